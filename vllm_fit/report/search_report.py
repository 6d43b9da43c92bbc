"""The report of one search as typed, frozen records: built once, written as JSON, read back the same.

`SearchReport.to_json` writes the JSON users' scripts read (its keys and their order are the schema;
tests/test_search_report.py compares), `from_json` reads it back for the cache, `plot` and `apply`,
refusing what it does not understand with a ValueError that names the problem.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Type, TypeVar

from ..gpu import Preflight
from ..outcome import StopReason
from ..trial.record import TrialRecord

Flat = TypeVar("Flat")


def _flat_json(record: Any, omit_none: bool = False) -> Dict[str, Any]:
    """A flat record's fields in declaration order (mappings copied; None left out where asked)."""
    out = {}
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        if value is None and omit_none:
            continue
        out[item.name] = dict(value) if isinstance(value, Mapping) else value
    return out


def _flat_from_json(cls: Type[Flat], data: Any) -> Flat:
    """A flat record from its JSON: required fields must be there, optional ones default."""
    if not isinstance(data, Mapping):
        raise TypeError("%s is not an object" % cls.__name__)
    names = {item.name for item in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class SearchSettings:
    """The search's settings as the report records them: every option that applies (the option table's keys,
    enums as their values, engine arguments without secrets), then what prepare decided (the length range,
    the utilization cap, the auto-fit start, the model's maximum), in that order."""

    objective: str
    """An ObjectiveKind's value."""
    values: Mapping[str, Any]
    """Everything else, keyed as the option table and prepare name it, in the order written."""

    def to_json(self) -> Dict[str, Any]:
        return {"objective": self.objective, **self.values}

    @classmethod
    def from_json(cls, data: Any) -> SearchSettings:
        values = dict(data)
        return cls(str(values.pop("objective")), values)

    def _int(self, key: str) -> Optional[int]:
        value = self.values.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def model(self) -> Optional[str]:
        return str(self.values["model"]) if self.values.get("model") is not None else None

    @property
    def min_len(self) -> Optional[int]:
        return self._int("min_len")

    @property
    def max_len(self) -> Optional[int]:
        return self._int("max_len")

    @property
    def model_derived_max_len(self) -> Optional[int]:
        return self._int("model_derived_max_len")

    @property
    def utilization_cap(self) -> Optional[float]:
        value = self.values.get("utilization_cap")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def concurrency(self) -> int:
        return self._int("concurrency") or 1

    @property
    def engine_args(self) -> Mapping[str, Any]:
        args = self.values.get("engine_args")
        return args if isinstance(args, Mapping) else {}


FIT_KEYS = ("max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes", "tensor_parallel_size",
            "kv_cache_tokens", "kv_cache_blocks", "block_size", "max_concurrency", "concurrency", "headroom_bytes",
            "trial", "request", "engine_args")
"""The fit's keys in the order the report writes them."""


@dataclass(frozen=True)
class FitSummary:
    """The fit as the report states it: the knobs, the capacity vLLM reported, the request that passed.
    Only the length, the trial and the engine arguments are required (reports of older versions lack others)."""

    max_model_len: int
    trial: int
    engine_args: Mapping[str, Any]
    """The engine arguments of the fit, with the length and utilization the engine really used."""
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None
    tensor_parallel_size: int = 1
    kv_cache_tokens: Optional[int] = None
    kv_cache_blocks: Optional[int] = None
    block_size: Optional[int] = None
    max_concurrency: Optional[float] = None
    concurrency: Optional[Mapping[str, Any]] = None
    """With --concurrency N: the sequences the pool holds at once, sent together, seen running."""
    headroom_bytes: Optional[int] = None
    """Device memory the fit leaves to others (None without a device total)."""
    request: Optional[Mapping[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        flat = _flat_json(self)
        return {key: flat[key] for key in FIT_KEYS}

    @classmethod
    def from_json(cls, data: Any) -> FitSummary:
        fit = _flat_from_json(cls, data)
        if not isinstance(fit.engine_args, Mapping) or not isinstance(fit.max_model_len, int):
            raise TypeError("the fit has no engine arguments or length")
        return fit


@dataclass(frozen=True)
class CacheInfo:
    """Where the report came from: a search run now (and how many trials a journal gave back), or the cache."""

    hit: bool
    resumed_trials: Optional[int] = None
    fingerprint: Optional[str] = None
    created: Optional[str] = None
    launches_then: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return _flat_json(self, omit_none=True)

    @classmethod
    def from_json(cls, data: Any) -> CacheInfo:
        return _flat_from_json(cls, data)


@dataclass(frozen=True)
class ReportEnvironment:
    """What the trials ran on: the interpreter and versions the child saw, the devices before the search."""

    python: Optional[str] = None
    python_version: Optional[str] = None
    vllm_version: Optional[str] = None
    vllm_distribution: Optional[str] = None
    torch_version: Optional[str] = None
    cuda_version: Optional[str] = None
    preflight: Optional[Preflight] = None
    fingerprint: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        out = _flat_json(self)
        out["preflight"] = self.preflight.as_dict() if self.preflight is not None else None
        return out

    @classmethod
    def from_json(cls, data: Any) -> ReportEnvironment:
        env = _flat_from_json(cls, data)
        preflight = data.get("preflight")
        return dataclasses.replace(env, preflight=Preflight.from_dict(preflight) if preflight else None)

    @property
    def gpu_name(self) -> Optional[str]:
        """The first device's name (None without NVML)."""
        devices = self.preflight.devices if self.preflight is not None else []
        return devices[0].name if devices else None


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
        row = _flat_from_json(cls, dict(data, fit=None, trials=()))
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
