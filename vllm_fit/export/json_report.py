"""The JSON report as text: the fit, every trial with its evidence, and the environment."""

from __future__ import annotations

import json
from typing import Any, Mapping


def report_text(report: Mapping[str, Any]) -> str:
    """The report, pretty-printed (values JSON cannot carry become strings)."""
    return json.dumps(report, indent=2, default=str) + "\n"
