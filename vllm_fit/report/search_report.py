"""The report of one search as typed, frozen records: built once, written as JSON, read back the same.

`SearchReport.to_json` writes the JSON users' scripts read (its keys and their order are the schema;
tests/test_search_report.py compares), `from_json` reads it back for the cache, `plot` and `apply`,
refusing what it does not understand with a ValueError that names the problem.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..outcome import StopReason
from ..trial.record import TrialRecord
from .sections import CacheInfo, FitSummary, ReportEnvironment, SearchSettings, flat_from_json


@dataclass(frozen=True)
class ExploreRow:
    """One alternative `--explore` searched: its verified fit (or why there is none) and its trials."""

    alternative: str
    """How the change reads on the command line: `kv_cache_dtype=fp8`, `tensor_parallel_size=2`."""
    tensor_parallel_size: int
    engine_args: Mapping[str, Any]
    verified: bool
    stop: str
    """A StopReason's value, or "refused" when the alternative was refused before a launch."""
    stop_reason: Optional[str]
    launches: int
    fit: Optional[FitSummary]
    trials: Tuple[TrialRecord, ...]
    proven: Optional[bool] = None
    """None when refused before a launch."""

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"alternative": self.alternative, "tensor_parallel_size": self.tensor_parallel_size,
                               "engine_args": dict(self.engine_args), "verified": self.verified}
        if self.proven is not None:
            out["proven"] = self.proven
        out.update(stop=self.stop, stop_reason=self.stop_reason, launches=self.launches,
                   fit=self.fit.to_json() if self.fit is not None else None,
                   trials=[trial.to_json() for trial in self.trials])
        return out

    @classmethod
    def from_json(cls, data: Any) -> ExploreRow:
        row = flat_from_json(cls, dict(data, fit=None, trials=()))
        return dataclasses.replace(row, fit=FitSummary.from_json(data["fit"]) if data["fit"] is not None else None,
                                   trials=tuple(TrialRecord.from_json(trial) for trial in data["trials"]))


@dataclass(frozen=True)
class SearchReport:
    """The whole report of one search: settings, fit, why it stopped, every trial, where it ran, advice."""

    tool_version: str
    created: str
    search: SearchSettings
    fit: Optional[FitSummary]
    stop: StopReason
    stop_reason: str
    proven: bool
    notes: Tuple[str, ...]
    launches: int
    wall_time_s: float
    trials: Tuple[TrialRecord, ...]
    environment: ReportEnvironment
    diagnosis: Optional[Mapping[str, Any]] = None
    """advice/diagnosis.py's numbers and lines, when nothing fits or the fit is short."""
    fingerprint_inputs: Optional[Mapping[str, Any]] = None
    cache: Optional[CacheInfo] = None
    explore: Optional[Tuple[ExploreRow, ...]] = None

    def to_json(self) -> Dict[str, Any]:
        """The JSON report (its keys, their order and their values are what users' scripts read)."""
        out: Dict[str, Any] = {
            "tool": {"name": "vllm-fit", "version": self.tool_version},
            "created": self.created,
            "search": self.search.to_json(),
            "fit": self.fit.to_json() if self.fit is not None else None,
            "stop": self.stop.value,
            "stop_reason": self.stop_reason,
            "proven": self.proven,
            "notes": list(self.notes),
            "launches": self.launches,
            "wall_time_s": self.wall_time_s,
            "trials": [trial.to_json() for trial in self.trials],
            "environment": self.environment.to_json(),
        }
        if self.diagnosis is not None:
            out["diagnosis"] = dict(self.diagnosis)
        if self.fingerprint_inputs is not None:
            out["fingerprint_inputs"] = dict(self.fingerprint_inputs)
        if self.cache is not None:
            out["cache"] = self.cache.to_json()
        if self.explore is not None:
            out["explore"] = [row.to_json() for row in self.explore]
        return out

    @classmethod
    def from_json(cls, data: Any) -> SearchReport:
        """A report to_json wrote; ValueError naming what is missing or malformed for anything else."""
        try:
            fit = FitSummary.from_json(data["fit"]) if data["fit"] is not None else None
            trials = tuple(TrialRecord.from_json(trial) for trial in data["trials"])
            if fit is not None and not any(trial.index == fit.trial for trial in trials):
                raise ValueError("its fit names trial %s, which it does not hold" % fit.trial)
            return cls(
                tool_version=str(data["tool"]["version"]), created=str(data["created"]),
                search=SearchSettings.from_json(data["search"]),
                fit=fit, stop=StopReason(data["stop"]), stop_reason=str(data["stop_reason"]),
                proven=bool(data["proven"]), notes=tuple(str(note) for note in data["notes"]),
                launches=int(data["launches"]), wall_time_s=float(data["wall_time_s"]), trials=trials,
                environment=ReportEnvironment.from_json(data["environment"]),
                diagnosis=dict(data["diagnosis"]) if data.get("diagnosis") is not None else None,
                fingerprint_inputs=data.get("fingerprint_inputs"),
                cache=CacheInfo.from_json(data["cache"]) if data.get("cache") is not None else None,
                explore=tuple(ExploreRow.from_json(row) for row in data["explore"])
                if data.get("explore") is not None else None)
        except (KeyError, TypeError, AttributeError, OverflowError) as exc:
            raise ValueError("not a vllm-fit report (%s: %s)" % (type(exc).__name__, exc)) from None

    @property
    def fit_record(self) -> Optional[TrialRecord]:
        """The trial that verified the fit."""
        if self.fit is None:
            return None
        return next(trial for trial in self.trials if trial.index == self.fit.trial)

    def from_cache(self, fingerprint: str) -> SearchReport:
        """This cached report as a search run now returns it: 0 launches, saying where it came from."""
        return dataclasses.replace(self, launches=0, wall_time_s=0.0, cache=CacheInfo(
            hit=True, fingerprint=fingerprint, created=self.created, launches_then=self.launches))
