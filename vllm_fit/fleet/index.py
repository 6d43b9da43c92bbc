"""The batch index (index.json, status.py's BatchIndex): read strictly, written with its summaries, merged.

`merge` and `compare` read indexes other runs wrote, so nothing in one is trusted: its shape is
checked, and the config and report paths it names must stay inside its folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional

from .. import __version__
from ..errors import BadInput
from ..export.html import summary_html
from ..export.junit import junit_xml
from ..export.markdown import summary_table
from ..files.atomic import write_bytes_atomic, write_text_atomic
from ..files.paths import contained, inside
from ..files.reading import read_input_bytes, read_json
from ..report.build import now_iso
from .status import BatchIndex, IndexEntry, IndexFit


def load_index(path: Path) -> BatchIndex:
    """An index.json, given as the file or the folder that holds it; BadInput for anything else."""
    path = path / "index.json" if path.is_dir() else path
    try:
        return BatchIndex.from_json(read_json(path, "batch index"), str(path))
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def new_index(entries: List[IndexEntry], fleet: Optional[str], shard: Optional[str]) -> BatchIndex:
    return BatchIndex(__version__, now_iso(), fleet, shard, tuple(sorted(entries, key=lambda entry: entry.name)))


def write_outputs(out_dir: Path, index: BatchIndex) -> None:
    """index.json, summary.md and junit.xml for a set of entries."""
    write_text_atomic(out_dir / "index.json", json.dumps(index.to_json(), indent=2, default=str) + "\n")
    write_text_atomic(out_dir / "summary.md", summary_table(index))
    write_text_atomic(out_dir / "summary.html", summary_html(index))
    cases = [{"name": e.name, "status": e.status.value, "verdict": e.status.verdict, "message": e.message,
              "time": e.wall_time_s, "details": _details(e)} for e in index.entries]
    write_text_atomic(out_dir / "junit.xml", junit_xml("vllm-fit", cases))


def _details(entry: IndexEntry) -> str:
    fit = entry.fit or IndexFit()
    return "max_model_len=%s kv_cache_tokens=%s launches=%s cached=%s" % (
        fit.max_model_len, fit.kv_cache_tokens, entry.launches, entry.data.get("cached"))


def merge(indexes: List[Path], out_dir: Path) -> BatchIndex:
    """Combine shard outputs: one index, summary and JUnit; configs and reports copied over.

    Every path an index names is read only from inside that index's folder and written only inside
    `out_dir`, under the same relative name.
    """
    entries: Dict[str, IndexEntry] = {}
    fleets = set()
    copies = []
    for path in indexes:
        index = load_index(path)
        folder = path if path.is_dir() else path.parent
        fleets.add(index.fleet)
        for entry in index.entries:
            if entry.name in entries:
                raise BadInput("entry %r is in more than one shard (%s); merge each shard once" % (entry.name, path))
            entries[entry.name] = entry
            for named in (entry.config, entry.report, entry.plot):
                if named is None:
                    continue
                what = "%s: entry %r %s" % (path, entry.name, named)
                source = inside(folder, named, what)
                target = inside(out_dir, named, what)
                if not source.is_file():
                    raise BadInput("%s: entry %r names %s, which is missing" % (path, entry.name, source))
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
