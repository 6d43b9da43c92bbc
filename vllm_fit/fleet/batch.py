"""`vllm-fit batch`: search every model of a fleet file, write one config per entry and the summaries.

Outputs (all written atomically) under the output directory, refreshed after every entry so that a
batch killed half-way leaves a true account of what it finished:
  configs/<name>.yaml   `vllm serve --config` file of each entry that has a fit
  reports/<name>.json   each entry's full report
  index.json            every entry's status, fit, launches, time (what `merge` and `compare` read)
  plots/<name>.svg      each entry's picture (with matplotlib; else the index says why not)
  summary.md            the Markdown table;  summary.html: the table with the pictures
  junit.xml             one test case per entry
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import EnvironmentProblem, FitError, one_line
from ..export.json_report import report_text
from ..export.plot import render as render_plot
from ..export.yaml_config import config_text
from ..files.atomic import write_bytes_atomic, write_text_atomic
from ..files.paths import check_output
from ..fitter import SearchOutcome, run_search
from ..prepare import prepare
from ..report.search_report import SearchReport
from ..store import FitStore
from ..trial.listener import Listener
from .fleet_file import FleetEntry
from .index import new_index, write_outputs
from .status import BatchIndex, EntryStatus, IndexEntry

DEFAULT_TOLERANCE = 0.05
"""A capacity drop of more than 5% against the baseline (or the recorded fit) is a regression."""


@dataclass(frozen=True)
class BatchSettings:
    """How one batch runs: where it writes, the store, the baseline."""

    out_dir: Path
    fleet: str
    shard: Optional[str] = None
    store: Optional[FitStore] = None
    force: bool = False
    baseline: Optional[BatchIndex] = None
    tolerance: float = DEFAULT_TOLERANCE


OUTPUT_FILES = ("index.json", "summary.md", "summary.html", "junit.xml")


def check_outputs(out_dir: Path, entries: List[FleetEntry]) -> None:
    """Every file a batch writes into `out_dir`, checked before the first search (a link, a folder or
    a pipe where a file goes is refused now, not after hours of searches)."""
    paths = [out_dir / name for name in OUTPUT_FILES]
    for entry in entries:
        paths += [out_dir / "configs" / ("%s.yaml" % entry.name), out_dir / "reports" / ("%s.json" % entry.name),
                  out_dir / "plots" / ("%s.svg" % entry.name)]
    for sub in ("configs", "reports", "plots"):
        check_output(out_dir / sub, kind="folder", what="--out-dir", create=False)
    for path in paths:
        if os.path.lexists(path):
            check_output(path, what="--out-dir")


def entry_status(outcome: SearchOutcome) -> EntryStatus:
    result = outcome.result
    if result.fit is not None:
        return EntryStatus.FIT if result.proven else EntryStatus.UNPROVEN
    return EntryStatus.NO_FIT if result.complete else EntryStatus.ERROR


def search_entry(entry: FleetEntry, listener: Listener, settings: BatchSettings) -> SearchOutcome:
    """Prepare and run one entry's search (raises FitError for an entry that cannot run)."""
    prepared = prepare(entry.request)
    for note in prepared.notes:
        listener.note("%s: %s" % (entry.name, note))
    return run_search(prepared, listener, store=settings.store, force=settings.force)


def entry_result(entry: FleetEntry, outcome: SearchOutcome, out_dir: Path, wall_time_s: float) -> Dict[str, Any]:
    """Write one entry's config and report; return its index entry."""
    config_path = out_dir / "configs" / (entry.name + ".yaml")
    report_path = out_dir / "reports" / (entry.name + ".json")
    report, result = outcome.report, outcome.result
    text = config_text(report)
    if text is not None:
        write_text_atomic(config_path, text)
    elif config_path.exists():
        config_path.unlink()  # a config from an earlier run would claim a fit this run did not find
    write_text_atomic(report_path, report_text(report.to_json()))
    plot, plot_problem = _picture(out_dir, entry.name, report)
    return dict(_base(entry), status=entry_status(outcome).value, message=result.stop_detail,
                plot=plot, plot_problem=plot_problem,
                fit=report.fit.to_json() if report.fit is not None else None, launches=result.launches,
                trials=len(result.records), cached=outcome.cached,
                resumed_trials=report.cache.resumed_trials if report.cache and report.cache.resumed_trials else 0,
                fingerprint=report.environment.fingerprint, vllm_version=report.environment.vllm_version,
                config="configs/%s.yaml" % entry.name if text is not None else None,
                report="reports/%s.json" % entry.name, wall_time_s=round(wall_time_s, 2))


def _picture(out_dir: Path, name: str, report: SearchReport) -> Tuple[Optional[str], Optional[str]]:
    """plots/<name>.svg, and None; or None and why there is no picture (matplotlib missing, a drawing error)."""
    try:
        write_bytes_atomic(out_dir / "plots" / (name + ".svg"), render_plot(report, ".svg", title=name))
    except EnvironmentProblem as exc:
        return None, str(exc)
    except Exception as exc:  # a picture must not cost the batch its results: recorded in the index
        return None, "drawing failed: %s: %s" % (type(exc).__name__, one_line(str(exc), 200))
    return "plots/%s.svg" % name, None


def error_result(entry: FleetEntry, message: str, wall_time_s: float) -> Dict[str, Any]:
    return dict(_base(entry), status=EntryStatus.ERROR.value, message=one_line(message),
                wall_time_s=round(wall_time_s, 2))


def _base(entry: FleetEntry) -> Dict[str, Any]:
    return {"name": entry.name, "model": entry.request.model, "fit": None, "launches": 0, "trials": 0,
            "cached": False, "config": None, "report": None}


class EntryInterrupted(KeyboardInterrupt):
    """The batch was interrupted during an entry; `result` is the entry as the index keeps it."""

    def __init__(self, result: Dict[str, Any]):
        super().__init__()
        self.result = result


def run_entry(entry: FleetEntry, listener: Listener, settings: BatchSettings) -> Dict[str, Any]:
    """Search one entry and write its files; an entry that cannot run is an `error` entry, not the end."""
    started = time.monotonic()
    try:
        outcome = search_entry(entry, listener, settings)
    except FitError as exc:
        return error_result(entry, str(exc), time.monotonic() - started)
    except KeyboardInterrupt:
        raise EntryInterrupted(interrupted_result(entry, time.monotonic() - started)) from None
    result = entry_result(entry, outcome, settings.out_dir, time.monotonic() - started)
    if outcome.interrupted:  # its report is written; the batch ends here with this entry in the index
        raise EntryInterrupted(dict(result, status=EntryStatus.INTERRUPTED.value,
                                    message="interrupted; the report keeps the trials that finished"))
    return result


def interrupted_result(entry: FleetEntry, wall_time_s: float) -> Dict[str, Any]:
    return dict(_base(entry), status=EntryStatus.INTERRUPTED.value, message="interrupted before its search ran",
                wall_time_s=round(wall_time_s, 2))


def regression(entry: IndexEntry, before: Optional[IndexEntry], tolerance: float) -> Optional[str]:
    """Why an entry is worse than its baseline entry, or None."""
    if before is None or before.fit is None:
        return None
    old, new = before.fit, entry.fit
    if new is None:
        return "no fit any more (was max_model_len %s)" % old.max_model_len
    if (new.max_model_len or 0) < (old.max_model_len or 0):
        return "max_model_len dropped from %s to %s" % (old.max_model_len, new.max_model_len)
    for knob in ("gpu_memory_utilization", "kv_cache_memory_bytes"):
        was, now = getattr(old, knob), getattr(new, knob)
        if was is not None and now is not None and now > was and new.max_model_len == old.max_model_len:
            return "%s rose from %s to %s for the same length" % (knob, was, now)
    old_tokens, new_tokens = old.kv_cache_tokens, new.kv_cache_tokens
    if old_tokens and new_tokens is not None and new_tokens < old_tokens * (1 - tolerance):
        return "KV capacity dropped from %s to %s tokens (more than %.0f%%)" % (old_tokens, new_tokens,
                                                                             100 * tolerance)
    return None


def with_baseline(result: IndexEntry, settings: BatchSettings) -> IndexEntry:
    """The entry, marked regressed when it got worse than its baseline entry."""
    before = settings.baseline.by_name().get(result.name) if settings.baseline is not None else None
    why = regression(result, before, settings.tolerance)
    if why and before is not None and result.status in (EntryStatus.FIT, EntryStatus.UNPROVEN, EntryStatus.NO_FIT):
        result = result.replaced(status=EntryStatus.REGRESSED, message=why, baseline=before.data.get("fit"))
    return result


def finish_entry(result: Dict[str, Any], settings: BatchSettings, listener: Listener) -> IndexEntry:
    """The entry's result against the baseline, announced (local and Ray batches alike)."""
    entry = with_baseline(IndexEntry.from_json(result, "batch"), settings)
    failed = entry.status is not EntryStatus.FIT
    listener.note("== %s: %s%s" % (entry.name, entry.status.value, ": %s" % entry.message if failed else ""))
    return entry


RunEntry = Callable[[FleetEntry, Listener, BatchSettings], Dict[str, Any]]


def run_batch(entries: List[FleetEntry], settings: BatchSettings, listener: Listener,
              run: RunEntry = run_entry) -> BatchIndex:
    """Run the entries one after the other; the index and summaries are rewritten after each."""
    done: List[IndexEntry] = []
    for entry in entries:
        listener.note("== %s (%s)" % (entry.name, entry.request.model))
        started = time.monotonic()
        try:
            result = run(entry, listener, settings)
        except EntryInterrupted as stop:
            result = stop.result
        except KeyboardInterrupt:
            result = interrupted_result(entry, time.monotonic() - started)
        done.append(finish_entry(result, settings, listener))
        write_outputs(settings.out_dir, new_index(done, settings.fleet, settings.shard))
        if done[-1].status is EntryStatus.INTERRUPTED:
            raise KeyboardInterrupt
    index = new_index(done, settings.fleet, settings.shard)
    write_outputs(settings.out_dir, index)
    return index
