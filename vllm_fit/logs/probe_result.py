"""The probe's result file as a typed record, parsed once where the runner reads it.

The child (probe.py, standard library only) writes plain JSON; its status values are probe.py's
constants, so both sides name them once. Anything that is not a result of a known status is no
result: the trial is then classified from its log alone, as if the probe had been killed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Mapping, Optional

from .. import probe


class ProbeStatus(str, Enum):
    """How far the child got."""

    IMPORT_FAILED = probe.STATUS_IMPORT_FAILED
    START_FAILED = probe.STATUS_START_FAILED
    REQUEST_FAILED = probe.STATUS_REQUEST_FAILED
    OK = probe.STATUS_OK


@dataclass(frozen=True)
class ProbeResult:
    """What the child (or, served, the parent's HTTP driver) found: status, phase, engine facts, requests."""

    status: ProbeStatus
    phase: Optional[str] = None
    versions: Mapping[str, Any] = field(default_factory=dict)
    """vLLM, torch, CUDA and Python versions as the child saw them."""
    engine: Mapping[str, Any] = field(default_factory=dict)
    """Read off the engine (num_gpu_blocks, block_size, max_model_len ...), or off /metrics when served."""
    request: Optional[Mapping[str, Any]] = None
    """The verification requests: tokens expected and served, sequences, timings (and HTTP details)."""
    exception: Mapping[str, Any] = field(default_factory=dict)
    """The caught exception: type, message, traceback."""
    request_problem: Optional[str] = None
    """Why the requests did not prove the length, where no exception says it."""

    @classmethod
    def parse(cls, data: Any) -> Optional[ProbeResult]:
        """The record of a result object; None for anything else (no status, an unknown one, wrong types)."""
        if not isinstance(data, Mapping):
            return None
        try:
            status = ProbeStatus(data.get("status"))
        except ValueError:
            return None
        parts: Dict[str, Any] = {}
        for name in ("versions", "engine", "exception"):
            value = data.get(name)
            parts[name] = dict(value) if isinstance(value, Mapping) else {}
        request = data.get("request")
        phase, problem = data.get("phase"), data.get("request_problem")
        return cls(status, phase=phase if isinstance(phase, str) else None,
                   request=dict(request) if isinstance(request, Mapping) else None,
                   request_problem=str(problem) if problem else None, **parts)

    @property
    def exception_text(self) -> str:
        """The exception's traceback and message, as the log lines they would have been."""
        return "\n".join(str(part) for part in (self.exception.get("traceback"), self.exception.get("message"))
                         if part)

    @property
    def exception_summary(self) -> str:
        """`Type: first line of message` of the caught exception."""
        message = str(self.exception.get("message") or "").strip().splitlines()
        return "%s: %s" % (self.exception.get("type", "no exception"), message[0][:200] if message else "")
