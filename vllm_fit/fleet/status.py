"""What became of fleet entries: the status every index, summary and JUnit report shares, and the batch
index (index.json) as typed records, read strictly (merge and compare read indexes other runs wrote)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Mapping, Optional, Tuple

from ..export.junit import Verdict


class EntryStatus(str, Enum):
    """What became of one fleet entry."""

    FIT = "fit"
    UNPROVEN = "unproven"
    """A verified fit was written, but the search stopped before proving it the best."""
    NO_FIT = "no_fit"
    ERROR = "error"
    REGRESSED = "regressed"
    INTERRUPTED = "interrupted"
    """Ctrl-C, SIGTERM or SIGHUP stopped the batch during this entry (its finished trials are in its report)."""

    @property
    def verdict(self) -> Verdict:
        if self is EntryStatus.FIT:
            return Verdict.PASSED
        return Verdict.ERROR if self is EntryStatus.ERROR else Verdict.FAILED

    @property
    def failing(self) -> bool:
        return self is not EntryStatus.FIT


FIT_FIELDS: Dict[str, Any] = {"max_model_len": int, "kv_cache_tokens": int, "kv_cache_memory_bytes": int,
                              "gpu_memory_utilization": (int, float), "max_concurrency": (int, float),
                              "kv_cache_blocks": int}
"""The numbers of an entry's fit that merge, compare, --baseline and the summaries read."""
ENTRY_FIELDS: Dict[str, Any] = {"config": str, "report": str, "plot": str, "message": str, "vllm_version": str,
                                "launches": int, "wall_time_s": (int, float)}


@dataclass(frozen=True)
class IndexFit:
    """The numbers of an entry's fit (the index keeps the whole fit summary; these are the ones read)."""

    max_model_len: Optional[int] = None
    kv_cache_tokens: Optional[int] = None
    kv_cache_memory_bytes: Optional[int] = None
    gpu_memory_utilization: Optional[float] = None
    max_concurrency: Optional[float] = None
    kv_cache_blocks: Optional[int] = None


@dataclass(frozen=True)
class IndexEntry:
    """One entry of a batch index: what became of one model, read once and checked field by field.

    `data` is the entry's JSON as written (merge carries keys of other versions through unchanged)."""

    name: str
    status: EntryStatus
    fit: Optional[IndexFit]
    cached: bool
    launches: Optional[int]
    wall_time_s: Optional[float]
    message: Optional[str]
    config: Optional[str]
    report: Optional[str]
    plot: Optional[str]
    vllm_version: Optional[str]
    data: Mapping[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> Dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_json(cls, data: Any, where: str = "index") -> IndexEntry:
        """The entry, or ValueError naming what is wrong (the caller adds where it was read)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            raise ValueError("%s: an entry has no `name`; is this a vllm-fit index?" % where)
        name = data["name"]
        if not name or len(name) > 200 or not name.isprintable():
            raise ValueError("%s: an entry's name %s is not a name vllm-fit writes; is this a vllm-fit index?"
                             % (where, repr(name)[:80]))
        try:
            status = EntryStatus(data.get("status"))
        except ValueError:
            raise ValueError("%s: entry %r has an unknown status %r" % (where, name, data.get("status"))) from None
        fit = data.get("fit")
        if fit is not None and not isinstance(fit, Mapping):
            raise ValueError("%s: entry %r has a `fit` that is not a mapping" % (where, name))
        _check_fields(where, name, data, ENTRY_FIELDS)
        _check_fields(where, name, fit or {}, FIT_FIELDS)
        return cls(name, status, IndexFit(**{key: fit.get(key) for key in FIT_FIELDS}) if fit is not None else None,
                   bool(data.get("cached")), data.get("launches"), data.get("wall_time_s"), data.get("message"),
                   data.get("config"), data.get("report"), data.get("plot"), data.get("vllm_version"), dict(data))

    def replaced(self, **changes: Any) -> IndexEntry:
        """The entry with these JSON fields changed (statuses as EntryStatus)."""
        values = {key: value.value if isinstance(value, Enum) else value for key, value in changes.items()}
        return IndexEntry.from_json(dict(self.data, **values))


def _check_fields(where: str, name: str, holder: Mapping[str, Any], kinds: Mapping[str, Any]) -> None:
    """Every field the tool reads has its type (a number is a number, never a bool or a string)."""
    for key, kind in kinds.items():
        value = holder.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kind) or (isinstance(value, (int, float)) and value < 0):
            raise ValueError("%s: entry %r: %s is %r, not a %s; is this a vllm-fit index?" % (
                where, name, key, value, "text" if kind is str else "non-negative number"))


@dataclass(frozen=True)
class BatchIndex:
    """index.json: the entries of one batch (or of merged shards), by name."""

    tool_version: str
    created: str
    fleet: Optional[str]
    shard: Optional[str]
    entries: Tuple[IndexEntry, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"tool": {"name": "vllm-fit", "version": self.tool_version}, "created": self.created,
                "fleet": self.fleet, "shard": self.shard, "entries": [entry.to_json() for entry in self.entries]}

    @classmethod
    def from_json(cls, data: Any, where: str = "index") -> BatchIndex:
        if not isinstance(data, Mapping) or not isinstance(data.get("entries"), list):
            raise ValueError("%s is not a vllm-fit batch index (it needs an `entries` list)" % where)
        tool = data["tool"] if isinstance(data.get("tool"), Mapping) else {}
        entries = tuple(IndexEntry.from_json(entry, where) for entry in data["entries"])
        names = [entry.name for entry in entries]
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError("%s: the entry %r appears twice; is this a vllm-fit index?" % (where, twice))
        return cls(str(tool.get("version")), str(data.get("created")), _text(data.get("fleet")),
                   _text(data.get("shard")), entries)

    @property
    def failing(self) -> bool:
        """True when any entry did not get a proven fit (or regressed)."""
        return any(entry.status.failing for entry in self.entries)

    def by_name(self) -> Dict[str, IndexEntry]:
        return {entry.name: entry for entry in self.entries}


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None
