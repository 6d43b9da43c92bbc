"""Check and convert what the user typed, before anything is launched. Errors are BadInput (exit 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any, Dict, Iterable, Optional, Tuple

from .errors import BadInput
from .units import parse_size

RESERVED_ENGINE_ARGS = {
    "model": "--model",
    "max_model_len": "--max-len / --min-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_memory_bytes": "--kv-cache-memory",
    "tensor_parallel_size": "--tensor-parallel-size",
}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def positive_int(name: str, text: Optional[str], example: str) -> Optional[int]:
    """A whole number >= 1, or None when not given."""
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise BadInput("%s must be a whole number, got %r; e.g. %s %s" % (name, text, name, example)) from None
    if value < 1:
        raise BadInput("%s must be at least 1, got %d; e.g. %s %s" % (name, value, name, example))
    return value


def non_negative_int(name: str, text: Optional[str], example: str) -> int:
    """A whole number >= 0."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise BadInput("%s must be a whole number, got %r; e.g. %s %s" % (name, text, name, example)) from None
    if value < 0:
        raise BadInput("%s must be 0 or more, got %d; e.g. %s %s" % (name, value, name, example))
    return value


def positive_float(name: str, text: Optional[str], example: str) -> Optional[float]:
    """A number > 0, or None when not given."""
    if text is None:
        return None
    try:
        value = float(str(text).strip())
    except ValueError:
        raise BadInput("%s must be a number, got %r; e.g. %s %s" % (name, text, name, example)) from None
    if not value > 0 or value != value or value == float("inf"):
        raise BadInput("%s must be greater than 0, got %r; e.g. %s %s" % (name, text, name, example))
    return value


def utilization(name: str, text: Optional[str]) -> Optional[float]:
    """A fraction in (0, 1] of the device's total memory."""
    value = positive_float(name, text, "0.9")
    if value is not None and value > 1:
        raise BadInput("%s must be in (0, 1] (a fraction of total device memory), got %s; e.g. %s 0.9"
                       % (name, text, name))
    return value


def size(name: str, text: Optional[str]) -> Optional[int]:
    """Bytes from a size such as 64MiB or 2GiB."""
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise BadInput("%s: %s" % (name, exc)) from None


def memory_knob(utilization_text: Optional[str], kv_text: Optional[str]) -> Tuple[Optional[float], Optional[int]]:
    """At most one of the two memory knobs, validated."""
    if utilization_text is not None and kv_text is not None:
        raise BadInput("--gpu-memory-utilization and --kv-cache-memory both fix the KV cache size;"
                       " pass only one of them")
    return utilization("--gpu-memory-utilization", utilization_text), size("--kv-cache-memory", kv_text)


def parse_value(text: str) -> Any:
    """JSON when it parses (8, true, {"a": 1}), else the plain string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def engine_args(pairs: Iterable[str]) -> Dict[str, Any]:
    """KEY=VALUE pairs to LLM keyword arguments (dashes in keys become underscores)."""
    args: Dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise BadInput("--engine-arg takes KEY=VALUE, got %r; e.g. --engine-arg enforce_eager=true" % pair)
        key = key.replace("-", "_")
        if key in RESERVED_ENGINE_ARGS:
            raise BadInput("%s is set by the search; use %s instead of --engine-arg"
                           % (key, RESERVED_ENGINE_ARGS[key]))
        if key in args:
            raise BadInput("--engine-arg %s is given twice; keep one" % key)
        args[key] = parse_value(value)
    return args


def interpreter(text: Optional[str], default: str) -> str:
    """An existing, executable interpreter path (or a name found on PATH)."""
    if text is None:
        return default
    path = text if os.sep in text else shutil.which(text)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise BadInput("--python %s: no such executable; pass the vLLM environment's interpreter,"
                       " e.g. --python /path/to/venv/bin/python" % text)
    return os.path.abspath(path)


def length_range(min_len: Optional[int], max_len: Optional[int]) -> None:
    """min must not exceed max when both are given."""
    if min_len is not None and max_len is not None and min_len > max_len:
        raise BadInput("--min-len %d is greater than --max-len %d; swap them or lower --min-len"
                       % (min_len, max_len))
