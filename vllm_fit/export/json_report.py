"""The JSON report as text: the fit, every trial with its evidence, and the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import BadInput
from ..files.reading import read_json
from ..report.search_report import SearchReport


def report_text(report: Mapping[str, Any]) -> str:
    """The report, pretty-printed (values JSON cannot carry become strings)."""
    return json.dumps(report, indent=2, default=str) + "\n"


def read_report(path: Union[str, Path]) -> SearchReport:
    """A report vllm-fit wrote (search --report, batch reports/), or BadInput naming the problem."""
    data = read_json(path, "report")
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list):
        raise BadInput("%s is not a vllm-fit report (no `trials` list); pass a file written by --report" % path)
    try:
        return SearchReport.from_json(data)
    except ValueError as exc:
        raise BadInput("%s: %s; pass a file written by --report of this vllm-fit" % (path, exc)) from None
