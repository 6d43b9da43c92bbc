"""Check and convert what the user typed, before anything is launched. Errors are BadInput (exit 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

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


def _number(name: str, text: Optional[str], kind: type, example: str, ok, rule: str) -> Optional[Any]:
    """Parse `text` as `kind`; BadInput naming the option, the rule and an example otherwise."""
    if text is None:
        return None
    try:
        value = kind(str(text).strip())
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise BadInput("%s must be %s, got %r; e.g. %s %s" % (name, noun, text, name, example)) from None
    if value != value or value in (float("inf"), float("-inf")) or not ok(value):
        raise BadInput("%s must be %s, got %s; e.g. %s %s" % (name, rule, text, name, example))
    return value


def positive_int(name: str, text: Optional[str], example: str) -> Optional[int]:
    """A whole number >= 1, or None when not given."""
    return _number(name, text, int, example, lambda v: v >= 1, "at least 1")


def non_negative_int(name: str, text: Optional[str], example: str) -> int:
    """A whole number >= 0."""
    return _number(name, text, int, example, lambda v: v >= 0, "0 or more")


def positive_float(name: str, text: Optional[str], example: str) -> Optional[float]:
    """A number > 0, or None when not given."""
    return _number(name, text, float, example, lambda v: v > 0, "greater than 0")


def utilization(name: str, text: Optional[str]) -> Optional[float]:
    """A fraction in (0, 1] of the device's total memory."""
    value = positive_float(name, text, "0.9")
    if value is not None and value > 1:
        raise BadInput("%s must be in (0, 1] (a fraction of total device memory), got %s; e.g. %s 0.9"
                       % (name, text, name))
    return value


def fraction(name: str, text: Optional[str]) -> float:
    """A number in [0, 1)."""
    return _number(name, text, float, "0.05", lambda v: 0 <= v < 1, "in [0, 1)")


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
    items = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise BadInput("--engine-arg takes KEY=VALUE, got %r; e.g. --engine-arg enforce_eager=true" % pair)
        items.append((key.strip(), parse_value(value)))
    return _checked_engine_args(items)


def _checked_engine_args(items: Iterable[Tuple[str, Any]]) -> Dict[str, Any]:
    """Keys that are names, not set twice, and not one of the knobs the search sets itself."""
    args: Dict[str, Any] = {}
    for key, value in items:
        if not _KEY.match(key):
            raise BadInput("--engine-arg takes KEY=VALUE, got key %r; e.g. --engine-arg enforce_eager=true" % key)
        key = key.replace("-", "_")
        if key in RESERVED_ENGINE_ARGS:
            raise BadInput("%s is set by the search; use %s instead of --engine-arg"
                           % (key, RESERVED_ENGINE_ARGS[key]))
        if key in args:
            raise BadInput("--engine-arg %s is given twice; keep one" % key)
        args[key] = value
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


SEARCH_OPTIONS = ("model", "max_len", "min_len", "granularity", "gpu_memory_utilization", "kv_cache_memory",
                  "max_utilization", "target_len", "search", "kv_granularity", "require_idle", "retries",
                  "retry_wait", "tensor_parallel_size", "engine_args", "python", "trial_timeout", "strategy")
"""The options of one search, as `vllm-fit search` flags (dash-case) and fleet-file keys (snake_case)."""


def request_from_options(options: Mapping[str, Any], env: Mapping[str, str], default_python: str):
    """A checked SearchRequest from option values (strings from the CLI, or typed YAML values).

    `engine_args` is a list of KEY=VALUE strings (CLI) or a mapping (fleet file).
    """
    from .fitter import (DEFAULT_GRANULARITY, DEFAULT_KV_GRANULARITY, DEFAULT_MAX_UTILIZATION,
                         DEFAULT_TRIAL_TIMEOUT_S, SearchRequest)
    from .retry import RetryPolicy

    def text(name: str) -> Optional[str]:
        value = options.get(name)
        return None if value is None else str(value)

    max_len = positive_int("--max-len", text("max_len"), "8192")
    min_len = positive_int("--min-len", text("min_len"), "1024")
    length_range(min_len, max_len)
    util, kv_bytes = memory_knob(text("gpu_memory_utilization"), text("kv_cache_memory"))
    raw_engine_args = options.get("engine_args") or []
    checked_engine_args = (_checked_engine_args((str(k), v) for k, v in raw_engine_args.items())
                           if isinstance(raw_engine_args, Mapping) else engine_args(raw_engine_args))
    retries = options.get("retries")
    return SearchRequest(
        model=str(options["model"]), python=interpreter(text("python"), default_python),
        min_len=min_len, max_len=max_len,
        granularity=positive_int("--granularity", text("granularity"), "256") or DEFAULT_GRANULARITY,
        gpu_memory_utilization=util, kv_cache_memory_bytes=kv_bytes,
        max_utilization=utilization("--max-utilization", text("max_utilization")) or DEFAULT_MAX_UTILIZATION,
        target_len=positive_int("--target-len", text("target_len"), "4096"),
        search_knob=text("search") or "utilization",
        kv_granularity=size("--kv-granularity", text("kv_granularity")) or DEFAULT_KV_GRANULARITY,
        require_idle=bool(options.get("require_idle")),
        retry=RetryPolicy(attempts=(non_negative_int("--retries", text("retries"), "2") if retries is not None
                                    else 2) + 1,
                          wait_s=positive_float("--retry-wait", text("retry_wait"), "5") or 5.0),
        tensor_parallel_size=positive_int("--tensor-parallel-size", text("tensor_parallel_size"), "2") or 1,
        engine_args=checked_engine_args,
        trial_timeout_s=positive_float("--trial-timeout", text("trial_timeout"), "900") or DEFAULT_TRIAL_TIMEOUT_S,
        strategy=text("strategy") or "predict", env=dict(env),
    )
