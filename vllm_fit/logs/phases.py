"""Which phase a running trial is in, read line by line from its output (pure)."""

from __future__ import annotations

import re
from enum import Enum
from typing import List, Optional, Tuple

from ..probe import PHASE_MARKER


class Phase(str, Enum):
    """The phases of a trial, in the order they happen; the value is what the terminal shows."""

    IMPORT = "importing vLLM"
    START = "starting engine"
    LOAD = "loading weights"
    PROFILE = "profiling / KV cache"
    WARMUP = "warm-up"
    READY = "engine ready"
    REQUEST = "serving request"
    SHUTDOWN = "shutting down"


ORDER = list(Phase)
"""Phases only move forward: a late line that looks like an earlier phase does not go back."""

_PROBE_PHASES = {"import": Phase.IMPORT, "start": Phase.START, "request": Phase.REQUEST, "done": Phase.SHUTDOWN}

# vLLM log messages that open a phase, across versions (see vllm-strings.md, section 1d).
_LOG_PHASES: List[Tuple[re.Pattern[str], Phase]] = [
    (re.compile(r"Starting to load model|Loading model weights|Loading weights|Loading safetensors"
                r"|Model loading took"), Phase.LOAD),
    (re.compile(r"Memory profiling|Available KV cache memory|KV cache size|GPU blocks|cuda blocks"
                r"|CUDA blocks|# CPU blocks|for KV cache on node|Auto-fit max_model_len"), Phase.PROFILE),
    (re.compile(r"Capturing (?:CUDA )?graphs|Graph capturing|[Ww]arming up|Compiling a graph"), Phase.WARMUP),
    (re.compile(r"init engine \(profile, create kv cache, warmup model\) took|Starting vLLM API server"
                r"|Application startup complete"), Phase.READY),
]


def phase_of(line: str) -> Optional[Phase]:
    """The phase a line announces, or None when it announces nothing."""
    marker = line.find(PHASE_MARKER)
    if marker >= 0:
        return _PROBE_PHASES.get(line[marker + len(PHASE_MARKER):].strip())
    for pattern, phase in _LOG_PHASES:
        if pattern.search(line):
            return phase
    return None


def advance(current: Optional[Phase], line: str) -> Optional[Phase]:
    """The phase after reading `line`: the announced one if it is later than `current`, else current."""
    phase = phase_of(line)
    if phase is None:
        return current
    if current is not None and ORDER.index(phase) <= ORDER.index(current):
        return current
    return phase
