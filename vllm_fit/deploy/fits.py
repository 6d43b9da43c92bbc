"""The fits `vllm-fit apply` writes into deployments: from a fit YAML, a search report, or a batch index.

A SOURCE is a file other people and jobs write (a shared cache, a CI artifact), so every value is
checked here before any deployment file is read: lengths whole numbers (within the model's maximum
where its config.json is here), a utilization in (0, 1], sizes and sequence counts positive whole
numbers, model and names plain printable strings. Only numbers this module formatted are ever written
(`Fit.settings`), so nothing a SOURCE says reaches a file as text.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import BadInput, one_line
from ..export.yaml_config import read_comment_facts, read_config
from ..files.paths import inside
from ..files.reading import read_input_bytes, read_json
from ..fleet.index import load_index
from ..prepare.checks import LONG_LEN_ENV
from ..prepare.modelinfo import read_model_info
from ..report.search_report import SearchReport
from .setup_match import SETUP_KEYS

KNOB_KEYS = ("gpu_memory_utilization", "kv_cache_memory_bytes")
SETTING_ORDER = ("max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes", "max_num_seqs")
"""The order added settings are written in."""
MAX_LENGTH = (1 << 31) - 1
MAX_KV_BYTES = 1 << 50
MAX_SEQS = 1 << 20
MAX_NAME = 4096
NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")
VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?[A-Za-z0-9.+_-]{0,40}")


@dataclass(frozen=True)
class Fit:
    """What one fit decides for a deployment, and where it was found (every field checked)."""

    source: str
    model: str
    max_model_len: int
    knob: Tuple[str, Any]
    """("gpu_memory_utilization", 0.9) or ("kv_cache_memory_bytes", N)."""
    max_num_seqs: Optional[int] = None
    """Set only where the search ran with --concurrency (the fit promises that many sequences)."""
    name: Optional[str] = None
    """The batch entry's name."""
    served_model_name: Optional[str] = None
    vllm_version: Optional[str] = None
    gpu: Optional[str] = None
    setup: Optional[Tuple[Tuple[str, Any], ...]] = None
    """The search's settings that change what a GPU holds (setup_match.py); None where the fit does not
    record them (every fit vllm-fit writes does: its tensor-parallel-size and --engine-arg options)."""

    def settings(self) -> Dict[str, str]:
        """The vLLM options the fit decides, in the order they are added, as text this tool formatted."""
        found = {"max_model_len": str(self.max_model_len), self.knob[0]: _number(self.knob[1])}
        if self.max_num_seqs is not None:
            found["max_num_seqs"] = str(self.max_num_seqs)
        ordered = {key: found[key] for key in SETTING_ORDER if key in found}
        for text in ordered.values():
            if not NUMBER.fullmatch(text):  # never reached: the fields are checked numbers
                raise AssertionError("a fit setting is not a formatted number: %r" % text)
        return ordered

    @property
    def label(self) -> str:
        return self.name or self.served_model_name or self.source


def _number(value: Any) -> str:
    if isinstance(value, float):
        return ("%.4f" % value).rstrip("0").rstrip(".")
    return str(int(value))


def _whole(source: str, key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput("%s: %s must be a whole number from %d to %d, got %s; pass a fit vllm-fit wrote"
                       % (source, key, low, high, _shown(value)))
    return value


def _text(source: str, key: str, value: Any, required: bool) -> Optional[str]:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME or \
            any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadInput("%s: %s must be a plain one-line name, got %s; pass a fit vllm-fit wrote"
                       % (source, key, _shown(value)))
    return value


def _shown(value: Any) -> str:
    return one_line(repr(value), 80)


def checked_fit(source: str, args: Mapping[str, Any], name: Optional[str], vllm: Optional[str],
                gpu: Optional[str], concurrency: bool) -> Fit:
    """A Fit from engine arguments, every value checked; BadInput naming the first wrong one."""
    knobs = [(key, args[key]) for key in KNOB_KEYS if args.get(key) is not None]
    if not knobs:
        raise BadInput("%s sets no memory knob (gpu-memory-utilization or kv-cache-memory-bytes); is it a fit"
                       " vllm-fit wrote?" % source)
    if len(knobs) > 1:
        raise BadInput("%s sets both gpu-memory-utilization and kv-cache-memory-bytes; a fit sets one" % source)
    key, value = knobs[0]
    if key == "gpu_memory_utilization":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 < value <= 1:
            raise BadInput("%s: gpu-memory-utilization must be a number in (0, 1], got %s; pass a fit vllm-fit"
                           " wrote" % (source, _shown(value)))
        knob: Tuple[str, Any] = (key, float(value))
    else:
        knob = (key, _whole(source, "kv-cache-memory-bytes", value, 1, MAX_KV_BYTES))
    served = args.get("served_model_name")
    served = served[0] if isinstance(served, list) and len(served) == 1 else served
    seqs = args.get("max_num_seqs") if concurrency else None
    return Fit(source, _text(source, "model", args.get("model"), True) or "",
               _whole(source, "max-model-len", args.get("max_model_len"), 1, MAX_LENGTH), knob,
               _whole(source, "max-num-seqs", seqs, 1, MAX_SEQS) if seqs is not None else None,
               _text(source, "name", name, False), _text(source, "served-model-name", served, False),
               vllm if isinstance(vllm, str) and VERSION.fullmatch(vllm) else None,
               gpu if isinstance(gpu, str) and _printable(gpu) else None, _setup(args))


def _setup(args: Mapping[str, Any]) -> Optional[Tuple[Tuple[str, Any], ...]]:
    """The fit's settings compared with a server's (JSON text for mappings, so that the Fit stays hashable)."""
    if "tensor_parallel_size" not in args:
        return None
    return tuple((key, json.dumps(args[key], sort_keys=True) if isinstance(args[key], (dict, list)) else args[key])
                 for key in SETUP_KEYS if args.get(key) is not None)


def _printable(text: str) -> bool:
    return len(text) <= 200 and all(32 <= ord(c) != 127 for c in text)


def _from_yaml(path: Path, name: Optional[str] = None) -> Fit:
    args, facts = read_config(path), read_comment_facts(path)
    device = facts.get("device")
    return checked_fit(str(path), args, name or facts.get("name"), facts.get("vllm"),
                       device.split(",")[0].strip() if device else None, "concurrency" in facts)


def _from_report(path: Path, data: Any) -> Fit:
    try:
        report = SearchReport.from_json(data)
    except ValueError as exc:
        raise BadInput("%s: %s; pass a file written by --report of this vllm-fit" % (path, exc)) from None
    if report.fit is None:
        raise BadInput("%s has no fit to apply (the search found none)" % path)
    if not isinstance(report.fit.engine_args, Mapping):
        raise BadInput("%s: the fit has no engine arguments; pass a file written by --report" % path)
    return checked_fit(str(path), report.fit.engine_args, None, report.environment.vllm_version,
                       report.environment.gpu_name, report.search.concurrency > 1)


@dataclass(frozen=True)
class Source:
    """The fits of a SOURCE, and every name its entries carry (a fit never changes a server named for
    another entry, with a config or without)."""

    fits: List[Fit]
    entry_names: Tuple[str, ...] = ()


def load_fits(source: str) -> Source:
    """The fits of a fit YAML, a search report (JSON) or a batch index (its folder or index.json)."""
    path = Path(source)
    if path.is_dir() or path.name == "index.json":
        index = load_index(path)
        folder = path if path.is_dir() else path.parent
        fits = [_from_yaml(inside(folder, entry.config, "%s: entry %r" % (path, entry.name)), entry.name)
                for entry in index.entries if entry.config]
        if not fits:
            raise BadInput("%s has no entry with a config to apply" % path)
        names = tuple(_text(str(path), "an entry's name", entry.name, True) or "" for entry in index.entries)
        return Source(fits, names)
    head = read_input_bytes(path, "fit").lstrip()[:1]
    if head == b"{":
        return Source([_from_report(path, read_json(path, "report"))])
    return Source([_from_yaml(path)])


def check_lengths(fits: List[Fit], env: Dict[str, str]) -> None:
    """A fit longer than its model's maximum (where the model's config.json is here) is refused."""
    if env.get(LONG_LEN_ENV) in ("1", "true"):
        return
    for fit in fits:
        if not Path(fit.model).is_dir():
            continue
        try:
            info = read_model_info(fit.model, env)
        except BadInput:
            continue  # a model directory without a readable config.json: the deployment's own business
        bounds = [b for b in (info.derived_max_len, info.unscaled_max_len) if b is not None]
        if bounds and fit.max_model_len > max(bounds):
            raise BadInput("%s: max-model-len %d is over the model's maximum %d (%s); pass a fit vllm-fit wrote"
                           % (fit.source, fit.max_model_len, max(bounds), info.max_len_source))
