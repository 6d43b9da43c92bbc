"""The fits `vllm-fit apply` writes into deployments: from a fit YAML, a search report, or a batch index."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import BadInput
from ..export.yaml_config import read_comment_facts, read_config
from ..files.paths import inside
from ..files.reading import read_input_bytes, read_json
from ..fleet.index import load_index
from ..report.search_report import SearchReport

KNOB_KEYS = ("gpu_memory_utilization", "kv_cache_memory_bytes")


@dataclass(frozen=True)
class Fit:
    """What one fit decides for a deployment, and where it was found."""

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

    def settings(self) -> Dict[str, Any]:
        """The engine arguments the fit decides, snake_case."""
        found: Dict[str, Any] = {"max_model_len": self.max_model_len, self.knob[0]: self.knob[1]}
        if self.max_num_seqs is not None:
            found["max_num_seqs"] = self.max_num_seqs
        return found


def _fit_from_args(source: str, args: Mapping[str, Any], name: Optional[str], vllm: Optional[str],
                   gpu: Optional[str], concurrency: bool) -> Fit:
    knobs = [(key, args[key]) for key in KNOB_KEYS if args.get(key) is not None]
    if not knobs:
        raise BadInput("%s sets no memory knob (gpu-memory-utilization or kv-cache-memory-bytes); is it a fit"
                       " vllm-fit wrote?" % source)
    served = args.get("served_model_name")
    served = served[0] if isinstance(served, list) and served else served
    return Fit(source, str(args["model"]), int(args["max_model_len"]), knobs[-1],
               int(args["max_num_seqs"]) if concurrency and args.get("max_num_seqs") else None, name,
               str(served) if served else None, vllm, gpu)


def _from_yaml(path: Path, name: Optional[str] = None) -> Fit:
    args, facts = read_config(path), read_comment_facts(path)
    device = facts.get("device")
    return _fit_from_args(str(path), args, name or facts.get("name"), facts.get("vllm"),
                          device.split(",")[0].strip() if device else None, "concurrency" in facts)


def _from_report(path: Path, data: Any) -> Fit:
    try:
        report = SearchReport.from_json(data)
    except ValueError as exc:
        raise BadInput("%s: %s; pass a file written by --report of this vllm-fit" % (path, exc)) from None
    if report.fit is None:
        raise BadInput("%s has no fit to apply (the search found none)" % path)
    concurrency = report.search.concurrency > 1
    return _fit_from_args(str(path), report.fit.engine_args, None, report.environment.vllm_version,
                          report.environment.gpu_name, concurrency)


def load_fits(source: str) -> List[Fit]:
    """The fits of a fit YAML, a search report (JSON) or a batch index (its folder or index.json)."""
    path = Path(source)
    if path.is_dir() or path.name == "index.json":
        index = load_index(path)
        folder = path if path.is_dir() else path.parent
        fits = [_from_yaml(inside(folder, entry.config, "%s: entry %r" % (path, entry.name)), entry.name)
                for entry in index.entries if entry.config]
        if not fits:
            raise BadInput("%s has no entry with a config to apply" % path)
        return fits
    head = read_input_bytes(path, "fit").lstrip()[:1]
    if head == b"{":
        return [_from_report(path, read_json(path, "report"))]
    return [_from_yaml(path)]
