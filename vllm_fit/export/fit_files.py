"""The files one search writes: its `vllm serve --config` YAML and its JSON report."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..report import config_comments, fit_engine_args
from ..trial import TrialRecord
from .atomic import write_text_atomic
from .json_report import write_report
from .yaml_config import render_config

PathLike = Union[str, Path]


def fit_config_text(fit: Optional[TrialRecord], report: Dict[str, Any]) -> Optional[str]:
    """The YAML config of the fit, or None when there is none."""
    if fit is None:
        return None
    return render_config(fit_engine_args(fit), config_comments(report))


def write_fit_files(fit: Optional[TrialRecord], report: Dict[str, Any], out: Optional[PathLike],
                    report_path: Optional[PathLike]) -> Optional[str]:
    """Write the config (when there is a fit and a path) and the report (when a path); return the YAML."""
    text = fit_config_text(fit, report)
    if out and text is not None:
        write_text_atomic(out, text)
    if report_path:
        write_report(report_path, report)
    return text
