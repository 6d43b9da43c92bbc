"""Byte sizes as people write them (64MiB, 2GiB, 1.5GB, 2621440) and back."""

from __future__ import annotations

import re

_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Bytes from '64MiB', '2GiB', '1.5GB' or a plain integer; ValueError with the fix otherwise."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError("%r is not a size; write e.g. 2621440, 64MiB or 2GiB" % text)
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower() if unit else "b")
    if factor is None:
        raise ValueError("unknown unit %r in %r; use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)"
                         % (unit, text))
    size = int(float(number) * factor)
    if size <= 0:
        raise ValueError("%r is not a positive size" % text)
    return size


def format_size(size: int) -> str:
    """The shortest exact binary form: 2621440 -> '2.5MiB', 3145728 -> '3MiB', 1000 -> '1000B'."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and (size * 4) % factor == 0:
            value = size / factor
            return ("%d%s" % (value, unit)) if value == int(value) else ("%g%s" % (value, unit))
    return "%dB" % size
