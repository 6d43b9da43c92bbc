"""Pure classification of one finished trial into exactly one outcome, with its evidence.

The root cause is searched in the captured output first (in vLLM's multiprocess mode the caller only
sees "Engine core initialization failed"), then in the exception the probe caught (in-process mode
vLLM raises the original error without logging it). Unrecognised failures are `crash`, with the tail.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Pattern, Tuple

from . import logparse
from .logparse import LogLine
from .outcome import CapacityFacts, Classification, Outcome
from .probe import PHASE_MARKER

LOG_TAIL_LINES = 40

# Root causes in priority order: the first that matches decides the outcome.
_ROOT_CAUSES: List[Tuple[Pattern[str], Outcome]] = [
    (logparse.DERIVED_MAX, Outcome.TOO_LONG_FOR_MODEL),
    (logparse.V1_TOO_LONG, Outcome.KV_TOO_SMALL),
    (logparse.V0_TOO_LONG, Outcome.KV_TOO_SMALL),
    (logparse.NO_KV_MEMORY, Outcome.NO_KV_MEMORY),
    (logparse.FREE_MEMORY_SHORT, Outcome.FREE_MEMORY_SHORT),
    (logparse.OOM, Outcome.OOM),
    (logparse.BAD_CONFIG, Outcome.BAD_CONFIG),
]

_ENGINE_FACTS = {
    "num_gpu_blocks": "num_blocks",
    "block_size": "block_size",
    "max_model_len": "effective_max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}


def _exception_lines(result: Optional[Dict[str, Any]]) -> List[LogLine]:
    """The caught exception's message and traceback as log lines (searched after the output)."""
    exception = (result or {}).get("exception") or {}
    text = "\n".join(filter(None, [exception.get("traceback"), exception.get("message")]))
    return logparse.log_lines(text)


def _after_marker(lines: List[LogLine], phase: str) -> List[LogLine]:
    """Lines printed after the probe announced `phase` (all lines when it never did)."""
    marker = PHASE_MARKER + phase
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].msg == marker:
            return lines[index + 1:]
    return lines


def _merge_engine_facts(facts: CapacityFacts, result: Optional[Dict[str, Any]]) -> None:
    """Take what the probe read off the engine in-process; it wins over the log (it is final)."""
    engine = (result or {}).get("engine") or {}
    for source, target in _ENGINE_FACTS.items():
        if engine.get(source) is not None:
            setattr(facts, target, engine[source])


def _describe(outcome: Outcome, facts: CapacityFacts, line: str) -> str:
    """A one-line human summary of the deciding fact."""
    if outcome is Outcome.KV_TOO_SMALL:
        if facts.estimated_max_len is not None:
            return "KV cache too small; vLLM estimates the maximum length at %d" % facts.estimated_max_len
        if facts.error_capacity_tokens is not None:
            return "KV cache too small; it stores %d tokens" % facts.error_capacity_tokens
        return "KV cache too small for one sequence (vLLM printed no estimate)"
    if outcome is Outcome.TOO_LONG_FOR_MODEL and facts.derived_max_len is not None:
        return "over the model's derived maximum of %d" % facts.derived_max_len
    return line[:240]


def classify(
    log_text: str,
    result: Optional[Dict[str, Any]],
    *,
    timed_out: bool = False,
    exit_code: Optional[int] = None,
    last_phase: Optional[str] = None,
) -> Classification:
    """Decide the outcome of one trial from its merged output and the probe's result (if any)."""
    lines = logparse.log_lines(log_text)
    facts, capacity_evidence = logparse.read_capacity(lines)
    _merge_engine_facts(facts, result)
    status = (result or {}).get("status")
    phase = (result or {}).get("phase") or last_phase

    if status == "ok":
        request = result.get("request", {})  # type: ignore[union-attr]
        served = "served %s tokens in %ss" % (request.get("total_tokens"), request.get("seconds"))
        return Classification(Outcome.OK, served, facts, capacity_evidence, phase)
    if timed_out:
        if phase == "request":
            return Classification(Outcome.REQUEST_FAILED, "the verification request hung; killed at the"
                                  " trial timeout", facts, _tail(lines), phase)
        return Classification(Outcome.TIMEOUT, "no result within the trial timeout (last phase: %s)"
                              % (phase or "unknown"), facts, _tail(lines), phase)

    searched = _after_marker(lines, "request") if status == "request_failed" else lines
    searched = searched + _exception_lines(result)
    for pattern, outcome in _ROOT_CAUSES:
        hits = logparse.find_all(pattern, searched)
        if hits:
            line, match = hits[0]  # the log record; a bootstrap traceback may repeat it later
            logparse.read_error_facts(facts, match)
            evidence = capacity_evidence + [line.raw]
            return Classification(outcome, _describe(outcome, facts, line.msg), facts, evidence, phase)

    tail = _tail(lines + _exception_lines(result))
    if status == "request_failed":
        problem = result.get("request_problem") or _exception_summary(result)  # type: ignore[union-attr]
        return Classification(Outcome.REQUEST_FAILED, problem, facts, tail or [problem], phase)
    if status == "import_failed":
        return Classification(Outcome.ENVIRONMENT, "the child could not import vLLM: "
                              + _exception_summary(result), facts, tail, phase)
    detail = "nothing recognised (exit code %s)" % exit_code
    if result and result.get("exception"):
        detail += ": " + _exception_summary(result)
    return Classification(Outcome.CRASH, detail, facts, tail, phase)


def _exception_summary(result: Optional[Dict[str, Any]]) -> str:
    """`Type: first line of message` of the probe's caught exception."""
    exception = (result or {}).get("exception") or {}
    message = (exception.get("message") or "").strip().splitlines()
    return "%s: %s" % (exception.get("type", "no exception"), message[0] if message else "")


def _tail(lines: List[LogLine]) -> List[str]:
    """The last lines of output, kept as evidence when nothing else decided."""
    return [line.raw for line in lines[-LOG_TAIL_LINES:]]


def is_nondeterministic(classification: Classification, log_text: str) -> bool:
    """True for crashes that vLLM or the system reports as transient (port clash, NCCL hiccup)."""
    if classification.outcome is not Outcome.CRASH:
        return False
    text = "\n".join([log_text, classification.detail] + classification.evidence)
    return bool(logparse.find_all(logparse.NONDETERMINISTIC, logparse.log_lines(text)))
