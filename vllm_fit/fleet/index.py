"""The batch index (index.json): every entry's status and fit; read strictly, written with its summaries.

`merge` and `compare` read indexes other runs wrote, so nothing in one is trusted: its shape is
checked, and the config and report paths it names must stay inside its folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import __version__
from ..errors import BadInput
from ..export.html import summary_html
from ..export.junit import junit_xml
from ..export.markdown import summary_table
from ..files.atomic import write_bytes_atomic, write_text_atomic
from ..files.paths import contained, inside
from ..files.reading import read_input_bytes, read_json
from ..report.build import now_iso
from .status import EntryStatus


def load_index(path: Path) -> Dict[str, Any]:
    """An index.json, given as the file or the folder that holds it; BadInput for anything else."""
    path = path / "index.json" if path.is_dir() else path
    data = read_json(path, "batch index")
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise BadInput("%s is not a vllm-fit batch index (it needs an `entries` list)" % path)
    for number, entry in enumerate(data["entries"], start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise BadInput("%s: entry %d has no `name`; is this a vllm-fit index?" % (path, number))
        try:
            entry["status"] = EntryStatus(entry.get("status")).value
        except ValueError:
            raise BadInput("%s: entry %r has an unknown status %r" % (path, entry["name"], entry.get("status"))) \
                from None
        if entry.get("fit") is not None and not isinstance(entry["fit"], dict):
            raise BadInput("%s: entry %r has a `fit` that is not a mapping" % (path, entry["name"]))
        _check_fields(path, entry)
    return data


FIT_FIELDS: Dict[str, Any] = {"max_model_len": int, "kv_cache_tokens": int, "kv_cache_memory_bytes": int,
              "gpu_memory_utilization": (int, float), "max_concurrency": (int, float), "kv_cache_blocks": int}
"""The numbers of an entry's fit that merge, compare, --baseline and the summaries read."""
ENTRY_FIELDS: Dict[str, Any] = {"config": str, "report": str, "plot": str, "message": str, "vllm_version": str,
                "launches": int, "wall_time_s": (int, float)}


def _check_fields(path: Path, entry: Mapping[str, Any]) -> None:
    """Every field the tool reads has its type (a number is a number, never a bool or a string)."""
    checks: List[Tuple[Mapping[str, Any], str, Any]] = [(entry, key, kind) for key, kind in ENTRY_FIELDS.items()]
    checks += [(entry["fit"], key, kind) for key, kind in FIT_FIELDS.items() if isinstance(entry.get("fit"), dict)]
    for holder, key, kind in checks:
        value = holder.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kind) or (isinstance(value, (int, float)) and value < 0):
            raise BadInput("%s: entry %r: %s is %r, not a %s; is this a vllm-fit index?" % (
                path, entry["name"], key, value, "text" if kind is str else "non-negative number"))


def new_index(entries: List[Dict[str, Any]], fleet: Optional[str], shard: Optional[str]) -> Dict[str, Any]:
    return {"tool": {"name": "vllm-fit", "version": __version__}, "created": now_iso(), "fleet": fleet,
            "shard": shard, "entries": sorted(entries, key=lambda e: e["name"])}


def failing(index: Mapping[str, Any]) -> bool:
    """True when any entry did not get a proven fit (or regressed)."""
    return any(EntryStatus(e["status"]).failing for e in index["entries"])


def write_outputs(out_dir: Path, index: Dict[str, Any]) -> None:
    """index.json, summary.md and junit.xml for a set of entries."""
    write_text_atomic(out_dir / "index.json", json.dumps(index, indent=2, default=str) + "\n")
    write_text_atomic(out_dir / "summary.md", summary_table(index))
    write_text_atomic(out_dir / "summary.html", summary_html(index))
    cases = [{"name": e["name"], "status": e["status"], "verdict": EntryStatus(e["status"]).verdict,
              "message": e.get("message"), "time": e.get("wall_time_s"), "details": _details(e)}
             for e in index["entries"]]
    write_text_atomic(out_dir / "junit.xml", junit_xml("vllm-fit", cases))


def _details(entry: Mapping[str, Any]) -> str:
    fit = entry.get("fit") or {}
    return "max_model_len=%s kv_cache_tokens=%s launches=%s cached=%s" % (
        fit.get("max_model_len"), fit.get("kv_cache_tokens"), entry.get("launches"), entry.get("cached"))


def merge(indexes: List[Path], out_dir: Path) -> Dict[str, Any]:
    """Combine shard outputs: one index, summary and JUnit; configs and reports copied over.

    Every path an index names is read only from inside that index's folder and written only inside
    `out_dir`, under the same relative name.
    """
    entries: Dict[str, Dict[str, Any]] = {}
    fleets = set()
    copies = []
    for path in indexes:
        index = load_index(path)
        folder = path if path.is_dir() else path.parent
        fleets.add(index.get("fleet"))
        for entry in index["entries"]:
            if entry["name"] in entries:
                raise BadInput("entry %r is in more than one shard (%s); merge each shard once" % (entry["name"], path))
            entries[entry["name"]] = entry
            for key in ("config", "report", "plot"):
                if entry.get(key) is None:
                    continue
                what = "%s: entry %r %s" % (path, entry["name"], key)
                source = inside(folder, entry[key], what)
                target = inside(out_dir, entry[key], what)
                if not source.is_file():
                    raise BadInput("%s: entry %r names %s, which is missing" % (path, entry["name"], source))
                contained(source, folder, what)
                if os.path.lexists(target.parent) and (target.parent.is_symlink() or not target.parent.is_dir()):
                    raise BadInput("%s: %s in --out-dir is not a folder of its own (a link?); remove it"
                                   % (what, target.parent))
                if source.resolve() != target.resolve():
                    copies.append((source, target))
    out_dir.mkdir(parents=True, exist_ok=True)  # only once every index has been checked
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, read_input_bytes(source, "shard file", follow=False))
    index = new_index(list(entries.values()), fleets.pop() if len(fleets) == 1 else None, None)
    write_outputs(out_dir, index)
    return index
