"""The sections of a search's report as typed, frozen records: settings, fit, environment, cache.

Each writes its part of the report's JSON (`to_json`, keys in the order users read them) and reads
it back (`from_json`); search_report.py puts them together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Type, TypeVar

from ..gpu import Preflight

Flat = TypeVar("Flat")


def flat_json(record: Any, omit_none: bool = False) -> Dict[str, Any]:
    """A flat record's fields in declaration order (mappings copied; None left out where asked)."""
    out = {}
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        if value is None and omit_none:
            continue
        out[item.name] = dict(value) if isinstance(value, Mapping) else value
    return out


def flat_from_json(cls: Type[Flat], data: Any) -> Flat:
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
    def granularity(self) -> int:
        return self._int("granularity") or 1

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
        flat = flat_json(self)
        return {key: flat[key] for key in FIT_KEYS}

    @classmethod
    def from_json(cls, data: Any) -> FitSummary:
        fit = flat_from_json(cls, data)
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
        return flat_json(self, omit_none=True)

    @classmethod
    def from_json(cls, data: Any) -> CacheInfo:
        return flat_from_json(cls, data)


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
        out = flat_json(self)
        out["preflight"] = self.preflight.as_dict() if self.preflight is not None else None
        return out

    @classmethod
    def from_json(cls, data: Any) -> ReportEnvironment:
        env = flat_from_json(cls, data)
        preflight = data.get("preflight")
        return dataclasses.replace(env, preflight=Preflight.from_dict(preflight) if preflight else None)

    @property
    def gpu_name(self) -> Optional[str]:
        """The first device's name (None without NVML)."""
        devices = self.preflight.devices if self.preflight is not None else []
        return devices[0].name if devices else None
