"""`vllm-fit search` as a library call, top to bottom: fingerprint -> lock -> cache -> journal -> study ->
report -> store -> explore.

Everything that can be refused is refused in `prepare`, before the first launch; what the search
does (objective, first length, trial plan, dummy weights) is decided in `plan/`; this module only
puts the steps in order and keeps finished work (the cache and the journal) around them.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Optional

from .advice.explore import explore
from .files.workdir import run_folder
from .fingerprint import fingerprint, fingerprint_inputs
from .plan import objective_for, trial_plan
from .report.build import report_of_study
from .store import FitStore, Journal
from .study import StudyResult, run_study
from .trial.listener import Listener
from .trial.run import RunTrial, run_trial

if TYPE_CHECKING:  # names used in annotations only
    from .prepare import Prepared
    from .report.search_report import SearchReport
    from .strategies.objectives import Objective


@dataclass(frozen=True)
class SearchOutcome:
    """The study's result and the report built from it."""

    result: StudyResult
    report: SearchReport

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or SIGTERM stopped the search; the report holds the trials that finished."""
        return self.result.interrupted

    @property
    def cached(self) -> bool:
        return self.report.cache is not None and self.report.cache.hit


def run_search(prepared: Prepared, listener: Optional[Listener] = None, objective: Optional[Objective] = None,
               store: Optional[FitStore] = None, force: bool = False, run: RunTrial = run_trial) -> SearchOutcome:
    """Run the trials and build the report.

    With a store: a search whose fingerprint is cached returns the cached fit with 0 launches
    (unless `force`); otherwise every finished trial goes to the journal at once, and trials a
    killed earlier run finished are taken from it instead of being launched again. The lock is
    taken before the cache is read, so a second run of the same search waits and then reuses it.
    `objective` overrides the one the options ask for (the benchmark's baselines use it).
    """
    listener = listener or Listener()
    inputs = fingerprint_inputs(prepared)
    key = fingerprint(inputs)
    with store.lock(key, listener.note) if store is not None else contextlib.nullcontext():
        cached = store.cached(key, listener.note) if store is not None and not force else None
        if cached is not None:
            outcome = _from_cache(cached, key)
        else:
            journal = store.journal(key) if store is not None else None
            outcome = _search(prepared, listener, objective or objective_for(prepared), journal, force, inputs,
                              key, run)
            if store is not None and journal is not None and outcome.result.complete and (
                    outcome.result.fit is None or store.keep(key, outcome.report, listener.note)):
                journal.remove()  # after the cache holds the fit: a kill in between loses nothing
    if not prepared.request.explore or outcome.interrupted:
        return outcome
    if outcome.report.diagnosis is None:
        listener.note("explore: nothing to explore (%s)" % (
            "the fit reaches the maximum length" if outcome.report.fit else "no diagnosis"))
        return outcome
    limited = outcome.report.diagnosis.get("limited_by")
    if limited:
        listener.note("explore: nothing to explore (max_model_len=%s %s, not for want of KV cache: fp8 and tensor"
                      " parallelism would not lift it)" % (limited.get("max_model_len"), limited.get("outcome")))
        return outcome
    # each alternative is a search of its own, with its own fingerprint in the cache
    rows = explore(prepared, outcome.report, lambda other: run_search(other, listener, None, store, force, run).report,
                   listener.note)
    return replace(outcome, report=replace(outcome.report, explore=rows))


def _search(prepared: Prepared, listener: Listener, objective: Objective, journal: Optional[Journal], force: bool,
            inputs: Mapping[str, Any], key: str, run: RunTrial) -> SearchOutcome:
    """The study (resumed from the journal, which it keeps up to date) and its report."""
    request = prepared.request
    if journal is not None and force:
        journal.remove()
    earlier = journal.load(request.trial_timeout, listener.note) if journal is not None else []
    if earlier and journal is not None:
        listener.note("resuming: %d finished trial(s) taken from the journal %s" % (len(earlier), journal.path))
    started = time.monotonic()
    with run_folder(request.work_dir) as work_dir:
        result = run_study(trial_plan(prepared, work_dir), objective, listener, records=earlier, run=run,
                           on_record=journal.recorder(listener.note) if journal is not None else lambda record: None)
    result = replace(result, notes=list(prepared.notes) + result.notes)
    report = report_of_study(prepared, result, key, inputs, len(earlier), time.monotonic() - started)
    for line in (report.diagnosis or {}).get("lines", []):
        listener.note(line)
    return SearchOutcome(result, report)


def _from_cache(cached: SearchReport, key: str) -> SearchOutcome:
    """A cached search, as if it had just run, but with 0 launches and saying so."""
    report = cached.from_cache(key)
    note = "cached fit from %s (fingerprint %s); --force searches again" % (cached.created, key[:12])
    result = StudyResult(list(report.trials), report.fit_record, report.stop, report.stop_reason, launches=0,
                         notes=[note])
    return SearchOutcome(result, report)
