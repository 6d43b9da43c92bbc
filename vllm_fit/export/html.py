"""summary.html of a batch: the summary table with each entry's picture beside its row."""

from __future__ import annotations

import html

from ..fleet.status import BatchIndex
from .markdown import summary_rows, summary_title

_STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}th{background:#f4f4f4}"
          ".fit{color:#2a7d2a}.error,.no_fit,.regressed{color:#b22222}img{max-width:480px}")


def summary_html(index: BatchIndex) -> str:
    """The batch summary as one self-contained page; pictures are linked from plots/."""
    rows = []
    for entry, cells, outcome in summary_rows(index):
        picture = ('<a href="%s"><img src="%s" alt="%s"></a>' % ((html.escape(entry.plot),) * 2
                                                                 + (html.escape(entry.name),))
                   if entry.plot else "")
        rows.append("<tr>%s<td class=\"%s\">%s</td><td>%s</td></tr>" % (
            "".join("<td>%s</td>" % html.escape("-" if c is None else str(c)) for c in cells),
            html.escape(entry.status.value), html.escape(outcome), picture))
    title = summary_title(index)
    head = "".join("<th>%s</th>" % h for h in ("model", "max-model-len", "memory", "KV capacity (tokens)",
                                               "concurrency", "launches", "time (s)", "outcome", "picture"))
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>\n"
            "<body><h1>%s</h1>\n<table><tr>%s</tr>\n%s\n</table></body></html>\n"
            % (html.escape(title), _STYLE, html.escape(title), head, "\n".join(rows)))
