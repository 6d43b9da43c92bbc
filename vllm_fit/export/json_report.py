"""The JSON report as text: the fit, every trial with its evidence, and the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Union

from ..errors import BadInput, one_line


def report_text(report: Mapping[str, Any]) -> str:
    """The report, pretty-printed (values JSON cannot carry become strings)."""
    return json.dumps(report, indent=2, default=str) + "\n"


def read_report(path: Union[str, Path]) -> Dict[str, Any]:
    """A report vllm-fit wrote (search --report, batch reports/), or BadInput naming the problem."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput("cannot read report %s: %s" % (path, one_line(getattr(exc, "strerror", None) or str(exc),
                                                                      200))) from None
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list):
        raise BadInput("%s is not a vllm-fit report (no `trials` list); pass a file written by --report" % path)
    return data
