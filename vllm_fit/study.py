"""The ask-and-tell loop: the objective proposes, a trial runs, the record is told back.

The loop owns no search logic and no process logic; it connects the objective (pure), the launch
path (side effects) and the listener (the terminal view), and decides when to stop.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .advice.engine_hints import crash_hint
from .gpu import LOST_VIEW
from .outcome import Outcome, StopReason
from .plan.weights import verify_with_real_weights
from .redact import public_args
from .strategies.base import Candidate
from .strategies.objectives import Objective
from .trial.hangs import boundary_hangs, boundary_text, confirmed, derived_deadlines
from .trial.listener import Listener
from .trial.record import TrialRecord
from .trial.run import RunTrial, TrialPlan, launch, run_trial

STOPPING_OUTCOMES = frozenset({Outcome.BAD_CONFIG, Outcome.CRASH, Outcome.ENVIRONMENT,
                               Outcome.FREE_MEMORY_SHORT})
"""Outcomes that say nothing about the candidate's length or memory: searching on is pointless."""
MAX_TRIALS = 64
MAX_TIMEOUTS_IN_A_ROW = 2
"""A timeout rules out its length (try shorter); this many in a row, with no success, end the search."""
CONFIRMING_STRETCH = 2.0
"""A length that hung under a derived deadline is launched again with this many times that deadline."""
MAX_TIMEOUTS_WITH_A_FIT = 6
"""Once a length served, timeouts above it narrow the range between the fit and the lowest length that
hangs; when they have cost this many whole --trial-timeouts in all (a derived timeout costs its share,
trial/hangs.py), the search ends with that range unproven."""


@dataclass(frozen=True)
class StudyResult:
    """The trials of one search, the best verified one, and why the search stopped."""

    records: List[TrialRecord]
    fit: Optional[TrialRecord]
    """The best verified trial (when the search stopped early: the best so far, not proven the best)."""
    stop: StopReason
    stop_detail: str
    launches: int = 0
    """Trials launched by this run (records taken from a journal are not launches)."""
    notes: List[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the search ran to its end (a fit, or proof that nothing in range works)."""
        return self.stop.proven

    @property
    def proven(self) -> bool:
        """True when the fit is proven the best (its better neighbours failed or cannot work)."""
        return self.fit is not None and self.stop is StopReason.COMPLETE

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or SIGTERM stopped the search; the records are the trials that finished."""
        return self.stop is StopReason.INTERRUPTED

    @property
    def environment_failed(self) -> bool:
        """True when a trial showed that the environment, not the config, is the problem (a fixed
        memory setting that the device's free memory cannot hold is a proof that nothing fits)."""
        last = self.records[-1] if self.records else None
        return last is not None and self.fit is None and self.stop is StopReason.STOPPING_OUTCOME \
            and last.outcome in (Outcome.ENVIRONMENT, Outcome.FREE_MEMORY_SHORT)


def _stop_before(records: List[TrialRecord], objective: Objective, timeout_s: float) -> Optional[tuple]:
    """(reason, detail) when the trials so far end the search before the objective is done."""
    stopping = STOPPING_OUTCOMES - objective.informative
    stopper = next((r for r in records if r.outcome in stopping), None)
    if stopper is not None:
        hint = crash_hint([stopper])
        return StopReason.STOPPING_OUTCOME, "trial %d ended %s: %s%s" % (
            stopper.index, stopper.outcome.value, stopper.detail, "; " + hint.why if hint else "")
    served = [r for r in records if r.outcome is Outcome.OK and r.length is not None]
    timeouts = [r for r in records if r.outcome is Outcome.TIMEOUT]
    spent = sum(min(1.0, (r.timeout_s or timeout_s) / timeout_s) for r in timeouts)
    if served and spent >= MAX_TIMEOUTS_WITH_A_FIT - 1e-9:
        return StopReason.TIMEOUTS, "%d trials timed out (trials %s); %s; raise --trial-timeout or check the" \
            " log" % (len(timeouts), ", ".join(str(r.index) for r in timeouts), _unproven_range(served, timeouts))
    tail = records[-MAX_TIMEOUTS_IN_A_ROW:]
    if not served and len(tail) == MAX_TIMEOUTS_IN_A_ROW and all(r.outcome is Outcome.TIMEOUT for r in tail):
        return StopReason.TIMEOUTS, "%d trials in a row timed out (trials %s) and none served; raise" \
            " --trial-timeout or check the log" % (len(tail), ", ".join(str(r.index) for r in tail))
    if len(records) >= MAX_TRIALS:
        return StopReason.TRIAL_LIMIT, "stopped after %d trials" % MAX_TRIALS
    return None


def _unproven_range(served: List[TrialRecord], timeouts: List[TrialRecord]) -> str:
    """What hangs leave open: the lengths between the longest that served and the shortest that hung."""
    best = max(r.length or 0 for r in served)
    hung = min((r.length for r in timeouts if r.length is not None and r.length > best), default=None)
    if hung is None:
        return "the longest verified length is %d" % best
    return "lengths from %d (served) to %d (hung) are unproven" % (best, hung)


def _rests_on_hangs(records: List[TrialRecord], objective: Objective) -> bool:
    """The search is complete only because starts hung: without them it would launch again."""
    timeouts = [r for r in records if r.outcome is Outcome.TIMEOUT]
    return bool(timeouts) and objective.propose([r.observation() for r in records if r not in timeouts]) is not None


def _unconfirmed_boundary(records: List[TrialRecord], objective: Objective) -> Optional[Candidate]:
    """Where a served length's boundary rests on a length that hung once: that length again (a length
    that hangs twice counts as not starting; one hang may be a slow start)."""
    if confirmed(records) or not any(r.outcome is Outcome.OK for r in records) \
            or not _rests_on_hangs(records, objective):
        return None
    hang = boundary_hangs(records)[0]
    knob = hang.llm_kwargs
    return Candidate(hang.requested_len, knob.get("gpu_memory_utilization"), knob.get("kv_cache_memory_bytes"))


def _rests_on_a_hang(records: List[TrialRecord], objective: Objective) -> Optional[str]:
    """Where the search is complete only because starts hung and the boundary's hang is not confirmed: say
    so; a hang may be a slow machine, not a length that cannot work."""
    if confirmed(records) or not _rests_on_hangs(records, objective):
        return None
    timeouts = [r for r in records if r.outcome is Outcome.TIMEOUT]
    served = [r for r in records if r.outcome is Outcome.OK and r.length is not None]
    return "the search ends where starts hung (trials %s timed out after %s s), not where vLLM refused: %s" % (
        ", ".join(str(r.index) for r in timeouts), timeouts[-1].timeout_s, _unproven_range(served, timeouts))


def run_study(plan: TrialPlan, objective: Objective, listener: Optional[Listener] = None,
              records: Optional[List[TrialRecord]] = None, run: RunTrial = run_trial,
              on_record: Callable[[TrialRecord], None] = lambda record: None) -> StudyResult:
    """Propose, launch and record until the objective is done or the trials end the search.

    `records` are trials already finished (from a journal): they are told to the objective first
    and never launched again. `on_record` sees each new record as soon as it exists.
    """
    listener = listener or Listener()
    records = list(records or [])
    earlier = len(records)
    stop, detail = StopReason.COMPLETE, "search complete"
    try:
        launches = _loop(plan, objective, listener, records, run, on_record)
    except _Stopped as stopped:
        stop, detail, launches = stopped.reason, stopped.detail, stopped.launches
    except KeyboardInterrupt:  # the trial's group was killed on the way out; its record is not kept
        stop, detail = StopReason.INTERRUPTED, "interrupted after %d finished trial(s); every trial process" \
            " was stopped" % len(records)
        launches = sum(1 + len(r.retries) for r in records[earlier:])
    return _finish(plan, objective, listener, records, run, on_record, stop, detail, launches)


class _Stopped(Exception):
    """The loop ended before the objective was done (a reason from `_stop_before`, or a repeat)."""

    def __init__(self, reason: StopReason, detail: str, launches: int):
        super().__init__(detail)
        self.reason, self.detail, self.launches = reason, detail, launches


def _loop(plan: TrialPlan, objective: Objective, listener: Listener, records: List[TrialRecord], run: RunTrial,
          on_record: Callable[[TrialRecord], None]) -> int:
    """Propose, launch and record until the objective has no candidate; the launches made."""
    launches = 0
    while True:
        early = _stop_before(records, objective, plan.timeout_s)
        candidate = objective.propose([record.observation() for record in records]) if early is None else None
        if early is not None:
            raise _Stopped(early[0], early[1], launches)
        confirming = candidate is None
        candidate = candidate or _unconfirmed_boundary(records, objective)
        if candidate is None:
            return launches
        kwargs = plan.llm_kwargs(candidate.engine_args())
        if plan.explore_load_format:
            kwargs["load_format"] = plan.explore_load_format
        again = next((r for r in records if r.llm_kwargs == public_args(kwargs) and not r.transient), None)
        if again is not None and not confirming:  # the same launch twice proves nothing new: never loop
            raise _Stopped(StopReason.TRIAL_LIMIT, "the search proposed trial %d's candidate again; stopped"
                           " (please report this with the report file)" % again.index, launches)
        start_s, request_s = derived_deadlines(records, plan.timeout_s, plan.request_timeout_s,
                                               candidate.max_model_len)
        if confirming and start_s is not None:  # the second chance a hang gets is twice as long
            start_s = min(plan.timeout_s, CONFIRMING_STRETCH * start_s)
        trial_plan = plan if start_s is None else dataclasses.replace(plan, start_timeout_s=start_s,
                                                                      request_timeout_s=request_s)
        record = launch(trial_plan, len(records) + 1, kwargs, listener, run)
        launches += 1 + len(record.retries)
        records.append(record)
        on_record(record)


def _finish(plan: TrialPlan, objective: Objective, listener: Listener, records: List[TrialRecord], run: RunTrial,
            on_record: Callable[[TrialRecord], None], stop: StopReason, detail: str, launches: int) -> StudyResult:
    """The fit among the records (verified with the real weights where it was explored on dummy ones,
    plan/weights.py), and whether it is proven."""
    history = [record.observation() for record in records]
    fit_index = objective.fit(history)
    best = records[fit_index] if fit_index is not None else None
    notes: List[str] = []
    lost = next((r for r in records if (r.device or {}).get("view_lost")), None)
    if lost is not None:
        notes.append("from trial %d on, %s" % (lost.index, LOST_VIEW))
    if stop is StopReason.INTERRUPTED and best is not None and best.load_format:
        best = None  # explored on dummy weights and never verified with the real ones: no fit
    if best is not None and plan.explore_load_format and best.load_format == plan.explore_load_format:
        launched: List[TrialRecord] = []

        def launch_one(kwargs: Dict[str, Any]) -> TrialRecord:
            record = launch(plan, len(records) + 1, kwargs, listener, run)
            records.append(record)
            on_record(record)
            launched.append(record)
            return record

        check = verify_with_real_weights(plan, best, records, launch_one)
        launches += sum(1 + len(r.retries) for r in launched)
        best = check.record
        notes.append(check.note)
        if check.failure is not None:
            return StudyResult(records, None, StopReason.STOPPING_OUTCOME, check.failure, launches, notes)
    hang = _rests_on_a_hang(records, objective) if best is not None and stop is StopReason.COMPLETE else None
    if hang is not None:
        stop, detail = StopReason.TIMEOUTS, hang
    boundary = boundary_text(records) if best is not None and stop is StopReason.COMPLETE else None
    if boundary is not None and _rests_on_hangs(records, objective):
        notes.append(boundary)
    if not stop.proven:
        if best is not None:
            notes.append("best verified so far: trial %d (not proven the best)" % best.index)
        return StudyResult(records, best, stop, detail, launches, notes)
    if best is None:
        stop = StopReason.NOTHING_FITS
        detail = objective.why_nothing_fits(history) or \
            "no candidate in the range started and served a full-length request"
    return StudyResult(records, best, stop, detail, launches, notes)
