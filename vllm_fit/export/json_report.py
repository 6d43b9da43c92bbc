"""The JSON report: the fit, every trial with its evidence, and the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Union

from .atomic import write_text_atomic


def write_report(path: Union[str, Path], report: Dict[str, Any]) -> Path:
    """Write the report atomically, pretty-printed."""
    return write_text_atomic(path, json.dumps(report, indent=2, default=str) + "\n")

