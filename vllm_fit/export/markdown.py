"""Markdown: the batch summary table and the comparison of two sets of configs."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import one_line
from ..fleet.status import BatchIndex, EntryStatus, IndexEntry
from ..units import format_size


def memory_knob(fit: Mapping[str, Any]) -> str:
    """`util 0.93` or `kv 2.5MiB` (or `-`)."""
    if fit.get("kv_cache_memory_bytes") is not None:
        return "kv %s" % format_size(int(fit["kv_cache_memory_bytes"]))
    if fit.get("gpu_memory_utilization") is not None:
        return "util %.2f" % float(fit["gpu_memory_utilization"])
    return "-"


MARKDOWN = re.compile(r"([\\`*_\[\]<>#|~!])")


def md(text: str) -> str:
    """Text from files other people write (names, versions) as plain Markdown text: one line, control
    characters shown escaped, every character that Markdown or HTML would act on backslashed."""
    return MARKDOWN.sub(r"\\\1", one_line(text))


def _cell(value: Any) -> str:
    return "-" if value is None else md(str(value))


def summary_rows(index: BatchIndex) -> List[Tuple[IndexEntry, List[Any], str]]:
    """Per entry: the cells (model, max-model-len, memory, KV capacity, concurrency, launches, time) and the
    outcome (status, cached, and why where it is no fit); the Markdown and HTML summaries show the same."""
    rows = []
    for entry in index.entries:
        fit = entry.fit
        outcome = entry.status.value + (" (cached)" if entry.cached else "")
        if entry.message and entry.status is not EntryStatus.FIT:
            outcome += ": " + entry.message
        cells = [entry.name, fit.max_model_len if fit else None,
                 memory_knob(dataclasses.asdict(fit)) if fit else None, fit.kv_cache_tokens if fit else None,
                 fit.max_concurrency if fit else None, entry.launches, entry.wall_time_s]
        rows.append((entry, cells, outcome))
    return rows


def summary_title(index: BatchIndex) -> str:
    return "vllm-fit batch" + (" (shard %s)" % index.shard if index.shard else "")


def summary_table(index: BatchIndex) -> str:
    """One row per fleet entry: fit, capacity, concurrency, launches, time, outcome."""
    lines = ["# " + summary_title(index), "",
             "| model | max-model-len | memory | KV capacity (tokens) | concurrency | launches | time (s) | outcome |",
             "|---|---|---|---|---|---|---|---|"]
    for _, cells, outcome in summary_rows(index):
        lines.append("| %s |" % " | ".join(_cell(cell) for cell in [*cells, outcome]))
    counts: Dict[str, int] = {}
    for entry in index.entries:
        counts[entry.status.value] = counts.get(entry.status.value, 0) + 1
    lines += ["", ", ".join("%d %s" % (n, status) for status, n in sorted(counts.items()))]
    return "\n".join(lines) + "\n"


def _change(old: Optional[Any], new: Optional[Any], percent: bool = False) -> str:
    if old == new:
        return _cell(new)
    text = "%s → %s" % (_cell(old), _cell(new))
    if percent and isinstance(old, (int, float)) and isinstance(new, (int, float)) and old:
        text += " (%+.1f%%)" % (100.0 * (new - old) / old)
    return "**%s**" % text


def comparison(old: Mapping[str, Dict[str, Any]], new: Mapping[str, Dict[str, Any]]) -> str:
    """What changed between two sets of configs, per model, as a pull-request body."""
    names = sorted(set(old) | set(new))
    changed = [n for n in names if old.get(n) != new.get(n)]
    lines = ["## vllm-fit: %d of %d config(s) changed" % (len(changed), len(names)), ""]
    if changed:
        lines += ["| model | max-model-len | KV capacity (tokens) | memory | vLLM |", "|---|---|---|---|---|"]
    for name in changed:
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            lines.append("| %s | %s | | | |" % (_cell(name), "added" if a is None else "removed"))
            continue
        lines.append("| %s | %s | %s | %s | %s |" % (
            _cell(name), _change(a.get("max_model_len"), b.get("max_model_len"), percent=True),
            _change(a.get("kv_cache_tokens"), b.get("kv_cache_tokens"), percent=True),
            _change(memory_knob(a), memory_knob(b)), _change(a.get("vllm"), b.get("vllm"))))
    unchanged = len(names) - len(changed)
    if unchanged:
        lines += ["", "%d unchanged: %s" % (unchanged, ", ".join(md(n) for n in names if n not in changed))]
    return "\n".join(lines) + "\n"
