"""Numbers and byte sizes as people write them (4096, 0.9, 64MiB, 2GiB), with strict grammars, and back.

Only ASCII digits, no signs, no underscores, no NaN or infinity, bounded lengths: what parses here is
exactly what the user meant, and a value a few hundred digits long is refused, never overflowed.
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_INT = re.compile(r"[0-9]{1,15}", re.ASCII)
_DECIMAL = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,15})?|\.[0-9]{1,15}", re.ASCII)
_SIZE = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,15})?)\s*([A-Za-z]{0,3})", re.ASCII)
MAX_SIZE = 1 << 50
"""1 PiB: no device memory, KV cache or granule is larger."""


def parse_int(text: str) -> int:
    """A whole number of ASCII digits ('4096'); ValueError otherwise."""
    stripped = str(text).strip()
    if not _INT.fullmatch(stripped):
        raise ValueError("not a whole number")
    return int(stripped)


def parse_decimal(text: str) -> float:
    """A plain decimal ('0.9', '5', '.5'); no exponent, sign, NaN or infinity; ValueError otherwise."""
    stripped = str(text).strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError("not a number")
    return float(stripped)


def parse_size(text: str) -> int:
    """Bytes from '64MiB', '2GiB', '1.5GB' or a plain integer; ValueError with the fix otherwise."""
    match = _SIZE.fullmatch(str(text).strip())
    if not match:
        raise ValueError("%r is not a size; write e.g. 2621440, 64MiB or 2GiB" % (text,))
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError("unknown unit %r in %r; use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)" % (unit, text))
    exact = Fraction(number) * factor
    if exact.denominator != 1:
        raise ValueError("%r is not a whole number of bytes; write it in a smaller unit (e.g. 1536KiB)" % (text,))
    size = int(exact)
    if size <= 0:
        raise ValueError("%r is not a positive size" % (text,))
    if size > MAX_SIZE:
        raise ValueError("%r is larger than 1 PiB; no device has that much memory" % (text,))
    return size


def format_size(size: int) -> str:
    """The shortest exact binary form: 2621440 -> '2.5MiB', 3145728 -> '3MiB', 1000 -> '1000B'."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and (size * 4) % factor == 0:
            value = size / factor
            return ("%d%s" % (value, unit)) if value == int(value) else ("%g%s" % (value, unit))
    return "%dB" % size


def format_gib(size: float) -> str:
    """Bytes as GiB with two decimals: '79.25 GiB'."""
    return "%.2f GiB" % (size / 2**30)
