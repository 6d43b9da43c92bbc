"""Which phase a running trial is in, read line by line from its output (pure)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from .probe import PHASE_MARKER

_PROBE_PHASES = {
    "import": "importing vLLM",
    "start": "starting engine",
    "request": "serving request",
    "done": "shutting down",
}

# vLLM log messages that open a phase, across versions (see vllm-strings.md, section 1d).
_LOG_PHASES: List[Tuple["re.Pattern[str]", str]] = [
    (re.compile(r"Starting to load model|Loading model weights|Loading weights|Loading safetensors"),
     "loading weights"),
    (re.compile(r"Memory profiling|Available KV cache memory|KV cache size|GPU blocks|cuda blocks"
                r"|CUDA blocks|# CPU blocks|for KV cache on node|Auto-fit max_model_len"),
     "profiling / KV cache"),
    (re.compile(r"Capturing (?:CUDA )?graphs|Graph capturing|[Ww]arming up|Compiling a graph"), "warm-up"),
    (re.compile(r"init engine \(profile, create kv cache, warmup model\) took"), "engine ready"),
]

ORDER = ["importing vLLM", "starting engine", "loading weights", "profiling / KV cache", "warm-up",
         "engine ready", "serving request", "shutting down"]
"""Phases only move forward: a late line that looks like an earlier phase does not go back."""


def phase_of(line: str) -> Optional[str]:
    """The phase a line announces, or None when it announces nothing."""
    marker = line.find(PHASE_MARKER)
    if marker >= 0:
        name = line[marker + len(PHASE_MARKER):].strip()
        return _PROBE_PHASES.get(name, name)
    for pattern, phase in _LOG_PHASES:
        if pattern.search(line):
            return phase
    return None


def advance(current: Optional[str], line: str) -> Optional[str]:
    """The phase after reading `line`: the announced one if it is later than `current`, else current."""
    phase = phase_of(line)
    if phase is None:
        return current
    if current in ORDER and phase in ORDER and ORDER.index(phase) <= ORDER.index(current):
        return current
    return phase
