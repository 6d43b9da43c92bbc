"""Pure: read vLLM's Prometheus `/metrics` text (the cache config, running requests, preemptions)."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple, Union

_SAMPLE = re.compile(r"^(vllm:[a-z_]+)(?:\{(.*)\})?\s+([-+0-9.eE]+|NaN|[+-]Inf)\s*$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
CACHE_INFO = "vllm:cache_config_info"
"""The gauge whose labels are the engine's CacheConfig (every version with a metrics endpoint)."""
CACHE_FACTS = ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "kv_cache_memory_bytes",
               "kv_cache_size_tokens", "kv_cache_max_concurrency")
"""The cache-config labels taken as engine facts (the same names the offline probe reads)."""
RUNNING = "vllm:num_requests_running"
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
"""The preemption counter's names (V1; V0 exports it without `_total` in some versions)."""


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def cache_config_line(text: str) -> Optional[str]:
    """The `vllm:cache_config_info{...}` line, kept as evidence."""
    for line in text.splitlines():
        if line.startswith(CACHE_INFO + "{"):
            return line
    return None


def cache_facts(text: str) -> Dict[str, Any]:
    """The engine's KV facts from the cache-config gauge: numbers as int or float, `cache_dtype`."""
    line = cache_config_line(text)
    if line is None:
        return {}
    labels = dict(_LABEL.findall(line))
    facts: Dict[str, Any] = {}
    for name in CACHE_FACTS:
        value = _number(labels.get(name, ""))
        if value is not None:
            facts[name] = int(value) if value.is_integer() and name != "gpu_memory_utilization" else value
    if labels.get("cache_dtype"):
        facts["cache_dtype"] = labels["cache_dtype"]
    return facts


def total(text: str, names: Union[Tuple[str, ...], str]) -> Optional[float]:
    """The sum of a metric over its label sets (every engine, every model); None when absent."""
    wanted = (names,) if isinstance(names, str) else names
    values = [_number(match.group(3)) for match in _SAMPLE.finditer(text) if match.group(1) in wanted]
    found = [value for value in values if value is not None]
    return sum(found) if found else None
