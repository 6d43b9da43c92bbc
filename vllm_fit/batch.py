"""`vllm-fit batch`: search every model of a fleet file, write one config per entry and the summaries.

Outputs (all written atomically) under the output directory:
  configs/<name>.yaml   `vllm serve --config` file of each entry that has a fit
  reports/<name>.json   each entry's full report
  index.json            every entry's status, fit, launches, time (what `merge` and `compare` read)
  summary.md            the Markdown table;  junit.xml: one test case per entry
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from .__about__ import __version__
from .errors import BadInput, FitError
from .export.atomic import write_text_atomic
from .export.fit_files import write_fit_files
from .export.junit import junit_xml
from .export.markdown import summary_table
from .fitter import prepare, run_search
from .fleet import FleetEntry
from .inputs import request_from_options
from .report import now_iso
from .store import FitStore
from .study import Listener

DEFAULT_TOLERANCE = 0.05
"""A capacity drop of more than 5% against the baseline (or the recorded fit) is a regression."""
FAILING = ("no_fit", "error", "regressed")


def run_entry(entry: FleetEntry, out_dir: Path, env: Mapping[str, str], default_python: str,
              listener: Listener, store: Optional[FitStore], force: bool) -> Dict[str, Any]:
    """Search one entry and write its files; return its index entry (errors become status `error`)."""
    config_path = out_dir / "configs" / (entry.name + ".yaml")
    report_path = out_dir / "reports" / (entry.name + ".json")
    started = time.monotonic()
    base = {"name": entry.name, "model": entry.options.get("model"), "fit": None, "launches": 0, "trials": 0,
            "cached": False, "config": None, "report": None}
    try:
        prepared = prepare(request_from_options(entry.options, env, default_python))
        for note in prepared.notes:
            listener.note("%s: %s" % (entry.name, note))
        outcome = run_search(prepared, listener, store=store, force=force)
    except FitError as exc:
        return dict(base, status="error", message=str(exc), wall_time_s=round(time.monotonic() - started, 2))
    report, result = outcome.report, outcome.result
    if result.fit is None and config_path.exists():
        config_path.unlink()  # a config from an earlier run would claim a fit this run did not find
    write_fit_files(result.fit, report, config_path, report_path)
    return dict(base, status="fit" if result.fit else "no_fit", message=result.stop_reason,
                fit=report["fit"], launches=result.launches, trials=len(result.records), cached=outcome.cached,
                resumed_trials=report.get("cache", {}).get("resumed_trials", 0),
                fingerprint=report["environment"].get("fingerprint"),
                vllm_version=report["environment"].get("vllm_version"),
                config="configs/%s.yaml" % entry.name if result.fit else None,
                report="reports/%s.json" % entry.name, wall_time_s=round(time.monotonic() - started, 2))


def regression(entry: Mapping[str, Any], before: Optional[Mapping[str, Any]], tolerance: float) -> Optional[str]:
    """Why an entry is worse than its baseline entry, or None."""
    if not before or not before.get("fit"):
        return None
    old, new = before["fit"], entry.get("fit")
    if not new:
        return "no fit any more (was max_model_len %s)" % old.get("max_model_len")
    if (new.get("max_model_len") or 0) < (old.get("max_model_len") or 0):
        return "max_model_len dropped from %s to %s" % (old["max_model_len"], new["max_model_len"])
    for knob in ("gpu_memory_utilization", "kv_cache_memory_bytes"):
        if old.get(knob) is not None and new.get(knob) is not None and new[knob] > old[knob] and \
                new.get("max_model_len") == old.get("max_model_len"):
            return "%s rose from %s to %s for the same length" % (knob, old[knob], new[knob])
    old_tokens, new_tokens = old.get("kv_cache_tokens"), new.get("kv_cache_tokens")
    if old_tokens and new_tokens is not None and new_tokens < old_tokens * (1 - tolerance):
        return "KV capacity dropped from %s to %s tokens (more than %.0f%%)" % (old_tokens, new_tokens,
                                                                             100 * tolerance)
    return None


def load_index(path: Path) -> Dict[str, Any]:
    """An index.json, given as the file or the folder that holds it."""
    path = path / "index.json" if path.is_dir() else path
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput("cannot read batch index %s: %s" % (path, exc)) from None


def write_outputs(out_dir: Path, index: Dict[str, Any]) -> None:
    """index.json, summary.md and junit.xml for a set of entries."""
    write_text_atomic(out_dir / "index.json", json.dumps(index, indent=2, default=str) + "\n")
    write_text_atomic(out_dir / "summary.md", summary_table(index))
    cases = [{"name": e["name"], "status": e["status"], "message": e.get("message"), "time": e.get("wall_time_s"),
              "details": _details(e)} for e in index["entries"]]
    write_text_atomic(out_dir / "junit.xml", junit_xml("vllm-fit", cases))


def _details(entry: Mapping[str, Any]) -> str:
    fit = entry.get("fit") or {}
    return "max_model_len=%s kv_cache_tokens=%s launches=%s cached=%s" % (
        fit.get("max_model_len"), fit.get("kv_cache_tokens"), entry.get("launches"), entry.get("cached"))


def new_index(entries: List[Dict[str, Any]], fleet: Optional[str], shard: Optional[str]) -> Dict[str, Any]:
    return {"tool": {"name": "vllm-fit", "version": __version__}, "created": now_iso(), "fleet": fleet,
            "shard": shard, "entries": sorted(entries, key=lambda e: e["name"])}


def run_batch(entries: List[FleetEntry], out_dir: Path, env: Mapping[str, str], default_python: str,
              listener: Listener, store: Optional[FitStore], force: bool, fleet: str, shard: Optional[str],
              baseline: Optional[Dict[str, Any]], tolerance: float) -> Dict[str, Any]:
    """Run the entries one after the other and write every output; return the index."""
    before = {e["name"]: e for e in (baseline or {}).get("entries", [])}
    done = []
    for entry in entries:
        listener.note("== %s (%s)" % (entry.name, entry.options.get("model")))
        result = run_entry(entry, out_dir, env, default_python, listener, store, force)
        why = regression(result, before.get(entry.name), tolerance)
        if why and result["status"] in ("fit", "no_fit"):
            result.update(status="regressed", message=why, baseline=before[entry.name].get("fit"))
        done.append(result)
        listener.note("== %s: %s%s" % (entry.name, result["status"],
                                       ": " + result["message"] if result["status"] != "fit" else ""))
    index = new_index(done, fleet, shard)
    write_outputs(out_dir, index)
    return index


def merge(indexes: List[Path], out_dir: Path) -> Dict[str, Any]:
    """Combine shard outputs: one index, summary and JUnit; configs and reports copied over."""
    entries: Dict[str, Dict[str, Any]] = {}
    fleets = set()
    for path in indexes:
        index = load_index(path)
        folder = path if path.is_dir() else path.parent
        fleets.add(index.get("fleet"))
        for entry in index["entries"]:
            if entry["name"] in entries:
                raise BadInput("entry %r is in more than one shard (%s); merge each shard once" % (entry["name"], path))
            entries[entry["name"]] = entry
            for key in ("config", "report"):
                if entry.get(key) and folder.resolve() != out_dir.resolve():
                    write_text_atomic(out_dir / entry[key], (folder / entry[key]).read_text())
    index = new_index(list(entries.values()), fleets.pop() if len(fleets) == 1 else None, None)
    write_outputs(out_dir, index)
    return index
