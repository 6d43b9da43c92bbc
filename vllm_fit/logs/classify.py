"""Pure classification of one finished trial into exactly one outcome, with its evidence.

The root cause is searched in the captured output first (in vLLM's multiprocess mode the caller only
sees "Engine core initialization failed"), then in the exception the probe caught (in-process mode
vLLM raises the original error without logging it). Unrecognised failures are `crash`, with the tail.
An error during the request that is neither an out-of-memory nor a length problem is a `crash` too:
it proves nothing about the length.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Pattern, Sequence, Tuple

from ..outcome import CapacityFacts, Classification, OomStage, Outcome
from ..probe import PHASE_MARKER
from . import logparse, patterns
from .capacity import no_token_fits
from .logparse import LogLine
from .probe_result import ProbeResult, ProbeStatus
from .regime import Engine, Regime

LOG_TAIL_LINES = 40

# Root causes in priority order: the first that matches decides the outcome.
_ROOT_CAUSES: List[Tuple[Pattern[str], Outcome]] = [
    (patterns.DERIVED_MAX, Outcome.TOO_LONG_FOR_MODEL),
    (patterns.V1_TOO_LONG, Outcome.KV_TOO_SMALL),
    (patterns.V0_TOO_LONG, Outcome.KV_TOO_SMALL),
    (patterns.NO_KV_MEMORY, Outcome.NO_KV_MEMORY),
    (patterns.FREE_MEMORY_SHORT, Outcome.FREE_MEMORY_SHORT),
    (patterns.OOM, Outcome.OOM),
    (patterns.NO_DEVICE, Outcome.ENVIRONMENT),
    (patterns.MISSING_MODULE, Outcome.ENVIRONMENT),
    (patterns.NO_TRITON, Outcome.ENVIRONMENT),
    (patterns.NO_KERNEL, Outcome.ENVIRONMENT),
    (patterns.PLATFORM_UNSUPPORTED, Outcome.ENVIRONMENT),
    (patterns.UNSUPPORTED_ARCHITECTURE, Outcome.ENVIRONMENT),
    (patterns.NO_FALLBACK_LAYER, Outcome.ENVIRONMENT),
    (patterns.BAD_CONFIG, Outcome.BAD_CONFIG),
]
_REQUEST_CAUSES: List[Tuple[Pattern[str], Outcome]] = [
    (patterns.OOM, Outcome.OOM),
    (patterns.V0_BLOCK_MANAGER, Outcome.REQUEST_FAILED),
    (patterns.NO_TRITON, Outcome.ENVIRONMENT),  # a kernel of the request's (vLLM 0.26's mamba2 conv on the CPU)
    (patterns.NO_KERNEL, Outcome.ENVIRONMENT),  # one the build lacks (vLLM 0.32 CPU: LongCat-Flash's router)
    (re.compile(r"prompt \(length \d+\) is longer than the maximum model length"), Outcome.REQUEST_FAILED),
]

_ENGINE_FACTS = {
    "num_gpu_blocks": "num_blocks",
    "block_size": "block_size",
    "max_model_len": "effective_max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "in_flight_tokens": "in_flight_tokens",
}


def _exception_lines(result: Optional[ProbeResult]) -> List[LogLine]:
    """The caught exception's message and traceback as log lines (searched after the output)."""
    return logparse.log_lines(result.exception_text) if result is not None else []


def _split_at_marker(lines: List[LogLine], phase: str) -> Tuple[List[LogLine], List[LogLine]]:
    """(lines before, lines after) the probe's last announcement of `phase` (all before when never)."""
    marker = PHASE_MARKER + phase
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].msg == marker:
            return lines[:index], lines[index + 1:]
    return lines, []


def _merge_engine_facts(facts: CapacityFacts, result: Optional[ProbeResult]) -> None:
    """Take what the probe read off the engine in-process; it wins over the log (it is final)."""
    engine = result.engine if result is not None else {}
    for source, target in _ENGINE_FACTS.items():
        if engine.get(source) is not None:
            setattr(facts, target, engine[source])


def oom_stage(before: List[LogLine], in_request: bool) -> OomStage:
    """Where memory ran out, from what the log had said before the error."""
    if in_request:
        return OomStage.REQUEST
    if any(logparse.find_all(pattern, before) for pattern in patterns.KV_SIZED):
        return OomStage.KV_ALLOCATION
    if logparse.find_all(patterns.WEIGHTS_LOADED, before):
        return OomStage.PROFILE
    return OomStage.LOAD


def _worst_oom(hits: List[Tuple[LogLine, Any]], searched: List[LogLine]) -> Tuple[LogLine, Optional[int],
                                                                                   Optional[int], bool]:
    """Among the out-of-memory lines (under tensor parallelism one per rank), the one naming the largest
    shortfall (as capacity takes the smallest rank); a vLLM wrapper's sizes are read from the torch line
    that follows it. Also whether a wrapper names a stage after the KV cache was allocated."""
    position = {id(line): index for index, line in enumerate(searched)}
    best: Optional[Tuple[LogLine, Optional[int], Optional[int], Optional[int]]] = None
    late = False
    for line, _ in hits:
        alloc, free = logparse.oom_sizes(line.msg)
        if alloc is None:
            at = position.get(id(line), len(searched))
            following = next((later for later in searched[at + 1:at + WRAPPER_REACH]
                              if patterns.OOM_ALLOC.search(later.msg)), None)
            if following is not None:
                alloc, free = logparse.oom_sizes(following.msg)
        late = late or bool(patterns.OOM_AFTER_KV.search(line.msg))
        shortfall = alloc - (free or 0) if alloc is not None else None
        if best is None or (shortfall is not None and (best[3] is None or shortfall > best[3])):
            best = (line, alloc, free, shortfall)
    assert best is not None
    return best[0], best[1], best[2], late


WRAPPER_REACH = 40
"""How many lines after vLLM's out-of-memory wrapper torch's own message (with the sizes) may come."""


def _describe(outcome: Outcome, facts: CapacityFacts, line: str, interpreter: Optional[str] = None) -> str:
    """A one-line human summary of the deciding fact."""
    if outcome is Outcome.KV_TOO_SMALL:
        if facts.estimated_max_len is not None:
            return "KV cache too small; vLLM estimates the maximum length at %d" % facts.estimated_max_len
        if facts.error_capacity_tokens is not None:
            return "KV cache too small; it stores %d tokens" % facts.error_capacity_tokens
        if no_token_fits(facts, Regime.of(facts.engine_version, Engine.V1)):
            return "KV cache too small for one token (vLLM 0.9.1+ prints no estimate only then)"
        return "KV cache too small for one sequence (vLLM printed no estimate)"
    if outcome is Outcome.TOO_LONG_FOR_MODEL and facts.derived_max_len is not None:
        return "over the model's derived maximum of %d" % facts.derived_max_len
    for pattern, words in patterns.ENVIRONMENT_WORDS if outcome is Outcome.ENVIRONMENT else ():
        match = pattern.search(line)
        if match is not None:
            return words.format(match.group(0), *(group.strip() for group in match.groups()),
                                python=interpreter or "the --python interpreter")
    if outcome is Outcome.OOM and facts.oom_stage is not None:
        return "out of memory (%s): %s" % (facts.oom_stage.value.replace("_", " "), line[:200])
    return line[:240]


VALIDATION_HEADER = re.compile(r"\d+ validation errors? for \w+\s*$")
VALIDATION_TYPE = re.compile(r"\s*\[type=[^\]]*\]?.*$")


def _validation_reason(searched: List[LogLine], header: LogLine) -> Optional[str]:
    """The first error under pydantic's "1 validation error for ModelConfig" header: its field (when it names
    one) and message without pydantic's [type=...] tail (vLLM 0.14 on a transformers 5 config.json: "Value
    error, rope_parameters should have a 'rope_type' key")."""
    if not VALIDATION_HEADER.search(header.msg) or header not in searched:
        return None
    index = searched.index(header)
    following = [line.msg.strip() for line in searched[index + 1:index + 4]]
    field = following[0] if following and following[1:] and not following[0].startswith(("Value error", "Assertion")) \
        and "[type=" not in following[0] else None
    message = next((text for text in following if "[type=" in text), None)
    if message is None:
        return None
    message = VALIDATION_TYPE.sub("", message).strip()
    return "%s: %s" % (field, message) if field else message


def _decide(patterns: List[Tuple[Pattern[str], Outcome]], searched: List[LogLine], before: List[LogLine],
            facts: CapacityFacts, capacity_evidence: List[str], phase: Optional[str],
            in_request: bool, interpreter: Optional[str] = None) -> Optional[Classification]:
    """The first root cause found in `searched`, classified with its numbers and line."""
    for pattern, outcome in patterns:
        hits = logparse.find_all(pattern, searched)
        if not hits:
            continue
        line, match = hits[0]  # the log record; a bootstrap traceback may repeat it later
        logparse.read_error_facts(facts, match)
        if outcome is Outcome.OOM:
            line, facts.oom_alloc_bytes, facts.oom_free_bytes, late = _worst_oom(hits, searched)
            facts.oom_stage = OomStage.KV_ALLOCATION if late and not in_request else oom_stage(before, in_request)
        detail = _describe(outcome, facts, line.msg, interpreter)
        reason = _validation_reason(searched, line) if outcome is Outcome.BAD_CONFIG else None
        if reason is not None:  # pydantic's header names no cause; its next lines do
            detail = "%s: %s" % (detail, reason)[:400]
        return Classification(outcome, detail, facts, [*capacity_evidence, line.raw], phase)
    return None


def classify(
    log_text: str,
    result: Optional[ProbeResult],
    *,
    timed_out: bool = False,
    exit_code: Optional[int] = None,
    last_phase: Optional[str] = None,
    interpreter: Optional[str] = None,
) -> Classification:
    """Decide the outcome of one trial from its merged output and the probe's result (if any);
    `interpreter` (the --python that ran it) is named where something is missing from it."""
    lines = logparse.log_lines(log_text)
    facts, capacity_evidence = logparse.read_capacity(lines)
    _merge_engine_facts(facts, result)
    before_request, in_request = _split_at_marker(lines, "request")
    status = result.status if result is not None else None
    if status is None and in_request:
        status = ProbeStatus.REQUEST_FAILED  # the probe died while serving (0.7-0.8.4 kill their own process)
    phase = (result.phase if result is not None else None) or ("request" if in_request else last_phase)
    searched_all = lines + _exception_lines(result)
    why_transient = [line.raw for line, _ in logparse.find_all(patterns.NONDETERMINISTIC, searched_all)]
    transient = bool(why_transient)

    if status is ProbeStatus.OK:
        request = (result.request if result is not None else None) or {}
        served = "served %s tokens in %ss" % (request.get("total_tokens"), request.get("seconds"))
        return Classification(Outcome.OK, served, facts, capacity_evidence, phase)
    if timed_out:
        if phase == "request":
            return Classification(Outcome.REQUEST_FAILED, "the full-length request hung; killed at its timeout",
                                  facts, capacity_evidence + _tail(lines), phase)
        return Classification(Outcome.TIMEOUT, "no result within the trial timeout (last phase: %s)"
                              % (phase or "unknown"), facts, _tail(lines), phase)

    if status is ProbeStatus.REQUEST_FAILED:
        searched = in_request + _exception_lines(result)
        verdict = _decide(_REQUEST_CAUSES, searched, before_request, facts, capacity_evidence, phase, True,
                          interpreter)
        if verdict is not None:
            return verdict
        problem = result.request_problem if result is not None else None
        if problem:  # served fewer tokens than asked: the KV cache could not hold the sequence
            return Classification(Outcome.REQUEST_FAILED, problem, facts, [*capacity_evidence, problem], phase)
        cause = root_cause(in_request + _exception_lines(result))
        detail = "the engine crashed serving the full-length request: %s" % (
            "%s (raised in %s)" % cause if cause is not None else _exception_summary(result))
        return Classification(Outcome.CRASH, detail, facts, _with(why_transient[:1], _tail(lines + _exception_lines(
            result))), phase, transient)

    searched = lines + _exception_lines(result)
    verdict = _decide(_ROOT_CAUSES, searched, lines, facts, capacity_evidence, phase, False, interpreter)
    if verdict is not None:
        return verdict
    tail = _tail(searched)
    if status is ProbeStatus.IMPORT_FAILED:
        return Classification(Outcome.ENVIRONMENT, "the child could not import vLLM: "
                              + _exception_summary(result), facts, tail, phase)
    detail = "nothing recognised (exit code %s)" % exit_code
    cause = root_cause(searched)  # a worker's own traceback before the wrapper's "See stack trace for root cause"
    if cause is not None:
        detail += ": %s (raised in %s)" % cause
    elif result is not None and result.exception:
        detail += ": " + _exception_summary(result)
    return Classification(Outcome.CRASH, detail, facts, _with(why_transient[:1], tail), phase, transient)


_VLLM_FRAME = re.compile(r'File "[^"]*?/(vllm/[^"]+\.py)", line (\d+), in (\w+)')
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b:?.*")


def raising_frame(texts: Sequence[str]) -> Optional[str]:
    """The innermost frame of vLLM's own code in these lines, `path:line (function)`."""
    found = None
    for text in texts:
        for match in _VLLM_FRAME.finditer(text):
            found = "%s:%s (%s)" % match.groups()
    return found


def root_cause(lines: Sequence[LogLine]) -> Optional[Tuple[str, str]]:
    """(exception line, innermost vLLM frame) of the first traceback that names a frame of vLLM's: the
    root cause, which a server's later "EngineCore encountered an issue. See stack trace (above)" and a
    chained exception's "direct cause" both print after it."""
    frames: List[str] = []
    inside = False
    for line in lines:
        if "Traceback (most recent call last)" in line.msg:
            inside, frames = True, []
        elif inside and _VLLM_FRAME.search(line.raw):
            frames.append(line.raw)
        elif inside and _EXCEPTION_LINE.match(line.msg.strip()) and not line.msg.startswith(" "):
            frame = raising_frame(frames)
            if frame is not None:
                return line.msg.strip(), frame
            inside = False
    return None


def _with(reason: List[str], tail: List[str]) -> List[str]:
    """The evidence of a crash: the log's tail, then the line that made it look non-deterministic (why it is
    retried), last, where a retry's summary keeps it."""
    return [line for line in tail if line not in reason] + reason


def _exception_summary(result: Optional[ProbeResult]) -> str:
    """`Type: first line of message` of the probe's caught exception."""
    return result.exception_summary if result is not None else "no exception: "


def _tail(lines: List[LogLine]) -> List[str]:
    """The last lines of output, kept as evidence when nothing else decided."""
    return [line.raw for line in lines[-LOG_TAIL_LINES:]]
