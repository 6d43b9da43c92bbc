"""Parsers of option values: a string from the command line or a typed value from a fleet file in,
the checked value out, or BadInput naming the option, the rule and an example (exit 2).

Each takes (flag, raw). Booleans are never numbers, numbers are plain decimals (no NaN, no
exponent, bounded digits), and engine-argument values are JSON, or true/false/null/none in any case.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from enum import Enum
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, Type

from ..errors import BadInput
from ..files.reading import check_nesting
from ..units import parse_decimal, parse_int, parse_size

RESERVED_ENGINE_ARGS = {
    "model": "--model",
    "max_model_len": "--max-len / --min-len / --target-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_memory_bytes": "--kv-cache-memory",
    "tensor_parallel_size": "--tensor-parallel-size",
    "config": "the YAML the search writes (a served trial is started on it)",
    "port": "nothing: each served trial picks a free port (verify overrides a deployment's)",
    "host": "nothing: served trials listen on 127.0.0.1",
}
POSITIVE_ENGINE_ARGS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_gpu_blocks_override",
                        "pipeline_parallel_size", "data_parallel_size", "max_seq_len_to_capture")
"""Engine arguments that are counts or sizes: a value below 1 is no setting vLLM takes."""
MAX_VALUE_BYTES = 1 << 20
"""An engine argument's value longer than this (as JSON) is a mistake, not a setting."""
MAX_CONCURRENCY = 65536
"""--concurrency above this is no deployment (vLLM's max_num_seqs defaults are 256-1024)."""
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$")
_LITERALS = {"true": True, "false": False, "none": None, "null": None}
MAX_NUMBER = 10**15


def _whole(flag: str, raw: Any, example: str) -> int:
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise BadInput("%s must be a whole number, got %r; e.g. %s %s" % (flag, raw, flag, example))
    try:
        text = str(raw).strip()
        negative = isinstance(raw, str) and text.startswith("-")
        value = int(raw) if isinstance(raw, (int, float)) else -parse_int(text[1:]) if negative else parse_int(text)
    except (ValueError, TypeError, OverflowError):
        raise BadInput("%s must be a whole number, got %r; e.g. %s %s" % (flag, raw, flag, example)) from None
    if value > MAX_NUMBER:
        raise BadInput("%s is too large (%r); e.g. %s %s" % (flag, raw, flag, example))
    return value


def _decimal(flag: str, raw: Any, example: str) -> float:
    if isinstance(raw, bool):
        raise BadInput("%s must be a number, got %r; e.g. %s %s" % (flag, raw, flag, example))
    try:
        text = str(raw).strip()
        negative = isinstance(raw, str) and text.startswith("-")
        value = float(raw) if isinstance(raw, (int, float)) else -parse_decimal(text[1:]) if negative \
            else parse_decimal(text)
    except (ValueError, TypeError, OverflowError):
        raise BadInput("%s must be a number, got %r; e.g. %s %s" % (flag, raw, flag, example)) from None
    if not math.isfinite(value) or value > MAX_NUMBER:
        raise BadInput("%s must be a finite number, got %r; e.g. %s %s" % (flag, raw, flag, example))
    return value


POSITIVE_EXAMPLES = {"--granularity": "128", "--concurrency": "8", "--tensor-parallel-size": "2"}
"""An example value for the error message where a length (4096) would mislead."""


def positive_int(flag: str, raw: Any) -> int:
    """A whole number >= 1."""
    example = POSITIVE_EXAMPLES.get(flag, "4096")
    value = _whole(flag, raw, example)
    if value < 1:
        raise BadInput("%s must be at least 1, got %r; e.g. %s %s" % (flag, raw, flag, example))
    return value


def concurrency(flag: str, raw: Any) -> int:
    """A whole number of sequences from 1 to MAX_CONCURRENCY."""
    value = positive_int(flag, raw)
    if value > MAX_CONCURRENCY:
        raise BadInput("%s %d is more sequences than any deployment runs at once; at most %d"
                       % (flag, value, MAX_CONCURRENCY))
    return value


def non_negative_int(flag: str, raw: Any) -> int:
    """A whole number >= 0."""
    value = _whole(flag, raw, "2")
    if value < 0:
        raise BadInput("%s must be at least 0, got %r; e.g. %s 2" % (flag, raw, flag))
    return value


def seconds(flag: str, raw: Any) -> float:
    """A duration in seconds, > 0."""
    value = _decimal(flag, raw, "900")
    if value <= 0:
        raise BadInput("%s must be greater than 0, got %r; e.g. %s 900" % (flag, raw, flag))
    return value


MAX_BACKOFF_S = 3600.0


def backoff(flag: str, raw: Any) -> float:
    """A wait before a relaunch, in seconds: > 0 and at most an hour (it doubles after each retry)."""
    value = seconds(flag, raw)
    if value > MAX_BACKOFF_S:
        raise BadInput("%s must be at most %d seconds, got %r; e.g. %s 5" % (flag, MAX_BACKOFF_S, raw, flag))
    return value


def utilization_cap(flag: str, raw: Any) -> float:
    """The highest utilization a search tries: in [0.01, 1], since the search steps by 0.01."""
    value = utilization(flag, raw)
    if value < 0.01:
        raise BadInput("%s must be at least 0.01 (1%% of device memory; the search steps by 0.01), got %r;"
                       " e.g. %s 0.9" % (flag, raw, flag))
    return value


def utilization(flag: str, raw: Any) -> float:
    """A fraction in (0, 1] of the device's total memory."""
    value = _decimal(flag, raw, "0.9")
    if value <= 0:
        raise BadInput("%s must be greater than 0 and at most 1, got %r; e.g. %s 0.9" % (flag, raw, flag))
    if not 0 < value <= 1:
        raise BadInput("%s must be in (0, 1] (a fraction of total device memory), got %r; e.g. %s 0.9"
                       % (flag, raw, flag))
    return value


def fraction(flag: str, raw: Any) -> float:
    """A number in [0, 1)."""
    value = _decimal(flag, raw, "0.05")
    if not 0 <= value < 1:
        raise BadInput("%s must be in [0, 1), got %r; e.g. %s 0.05" % (flag, raw, flag))
    return value


def size(flag: str, raw: Any) -> int:
    """Bytes from a size such as 64MiB or 2GiB (or a whole number of bytes)."""
    if isinstance(raw, (bool, float)):
        raise BadInput("%s must be a size such as 2GiB (or a whole number of bytes), got %r" % (flag, raw))
    try:
        return parse_size(str(raw))
    except ValueError as exc:
        raise BadInput("%s: %s" % (flag, exc)) from None


def flag(flag_name: str, raw: Any) -> bool:
    """true or false (a YAML boolean, or the CLI flag's presence)."""
    if not isinstance(raw, bool):
        raise BadInput("%s must be true or false, got %r" % (flag_name, raw))
    return raw


def model_name(flag_name: str, raw: Any) -> str:
    """A non-empty model directory or hub id; `~/...` expanded here, since vLLM would take it as a hub id."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise BadInput("%s must name a model directory or a hub id, got %r; e.g. %s Qwen/Qwen2.5-7B-Instruct"
                       % (flag_name, raw, flag_name))
    name = raw.strip()
    return os.path.expanduser(name) if name.startswith("~") else name


def choice(enum: Type[Enum]) -> Callable[[str, Any], Any]:
    """A parser for one of an enum's values."""
    def parse(flag_name: str, raw: Any) -> Any:
        for member in enum:
            if raw == member.value or raw is member:
                return member
        raise BadInput("%s %r is unknown; use one of %s" % (flag_name, raw, ", ".join(m.value for m in enum)))
    return parse


def parse_value(text: str) -> Any:
    """An engine-argument value: JSON when it parses (8, {"a": 1}), true/false/null in any case, else the string.

    Non-finite numbers (NaN, Infinity, 1e400) are refused: vLLM would take them as nonsense.
    """
    if text.strip().lower() in _LITERALS:
        return _LITERALS[text.strip().lower()]
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
        check_nesting(value, "the value")
    except RecursionError:
        raise ValueError("the value is nested too deeply to read") from None
    except BadInput as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:
        if text.strip()[:1] in ("{", "[", '"'):
            raise ValueError("%r looks like JSON but does not parse (%s); fix the JSON or quote it"
                             % (text, exc)) from None
        return text
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError("%s is not a value vLLM takes" % name)


def engine_args(flag_name: str, raw: Any) -> Dict[str, Any]:
    """KEY=VALUE strings (CLI) or a mapping (fleet file) to LLM keyword arguments."""
    if isinstance(raw, Mapping):
        check_nesting(raw, "engine_args")
        items = []
        for key, value in raw.items():
            if not isinstance(key, str):
                raise BadInput("engine_args keys must be strings, got %r; quote it" % (key,))
            items.append((key, _plain(key, value)))
        return checked_engine_args(items)
    if isinstance(raw, str) or not isinstance(raw, Iterable):
        raw = [raw]
    pairs = []
    for pair in raw:
        key, sep, text = str(pair).partition("=")
        if not sep:
            raise BadInput("%s takes KEY=VALUE, got %r; e.g. %s enforce_eager=true" % (flag_name, pair, flag_name))
        try:
            pairs.append((key.strip(), parse_value(text)))
        except ValueError as exc:
            raise BadInput("%s %s: %s" % (flag_name, key.strip(), exc)) from None
    return checked_engine_args(pairs)


def _plain(key: str, value: Any) -> Any:
    """A fleet engine-argument value that JSON can carry to the child (no dates, no NaN)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise BadInput("engine_args %s: %r is not a plain value (string, number, true/false, list, mapping);"
                       " quote it" % (key, value)) from None
    return value


def checked_engine_args(items: Iterable[Tuple[str, Any]]) -> Dict[str, Any]:
    """Keys that are names, not set twice, and not one of the knobs the search sets itself."""
    args: Dict[str, Any] = {}
    for key, value in items:
        if not _KEY.match(key):
            raise BadInput("--engine-arg takes KEY=VALUE, got key %r; e.g. --engine-arg enforce_eager=true" % key)
        if key != key.lower():
            raise BadInput("--engine-arg %s: vLLM's engine arguments are lowercase (%s); fix the name"
                           % (key, key.lower()))
        key = key.replace("-", "_")
        if key in POSITIVE_ENGINE_ARGS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise BadInput("--engine-arg %s=%r: it must be a whole number of at least 1" % (key, value))
        if key in RESERVED_ENGINE_ARGS:
            raise BadInput("%s is set by the search; use %s instead of --engine-arg"
                           % (key, RESERVED_ENGINE_ARGS[key]))
        if key in args:
            raise BadInput("--engine-arg %s is given twice; keep one" % key)
        size = len(json.dumps(value, default=str))
        if size > MAX_VALUE_BYTES:
            raise BadInput("--engine-arg %s is %d bytes long; no engine argument is that long (at most %d)"
                           % (key, size, MAX_VALUE_BYTES))
        args[key] = value
    return args


def interpreter(flag_name: str, raw: Any) -> str:
    """An existing, executable interpreter path (or a name found on PATH)."""
    text = str(raw)
    path = text if os.sep in text else shutil.which(text)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise BadInput("%s %s: no such executable; pass the vLLM environment's interpreter,"
                       " e.g. %s /path/to/venv/bin/python" % (flag_name, text, flag_name))
    return os.path.abspath(path)


def length_range(min_len: Optional[int], max_len: Optional[int]) -> None:
    """min must not exceed max when both are given."""
    if min_len is not None and max_len is not None and min_len > max_len:
        raise BadInput("--min-len %d is greater than --max-len %d; swap them or lower --min-len"
                       % (min_len, max_len))
