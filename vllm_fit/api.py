"""The one-call Python API, for notebooks and CI scripts: `vllm_fit.search`, `vllm_fit.apply`, `vllm_fit.verify`.

The same checks and the same errors as the commands (the exceptions of errors.py: BadInput,
EnvironmentProblem, Interrupted ...; their `exit_code` is the command's), the same option names as a
fleet file (the search options in snake_case), nothing printed unless a listener is given.

    import vllm_fit
    report = vllm_fit.search("/models/llama-3.1-8b", max_len=65536, gpu_memory_utilization=0.9, out="llama.yaml")
    print(report.fit.max_model_len if report.fit else report.stop_reason)
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .errors import Interrupted
from .export.json_report import report_text
from .export.yaml_config import config_text
from .files.atomic import write_text_atomic
from .files.paths import check_distinct, check_not_inputs, check_output
from .fitter import SearchOutcome, run_search
from .prepare import Prepared, prepare, request_from_options
from .report.search_report import SearchReport
from .store import FitStore, check_cache_dir, default_cache_dir
from .trial.listener import Listener

if TYPE_CHECKING:
    from .deploy.apply import FileResult

YAML_SUFFIXES = (".yaml", ".yml")


def check_search_outputs(prepared: Prepared, model: str, out: Optional[str], report: Optional[str],
                         work_dir: Optional[str]) -> Optional[Path]:
    """Every output of a search proven writable, distinct and never an input, before the first launch;
    the work folder (created) when one is given."""
    check_distinct({"--out": out, "--report": report})
    model_folder = prepared.model.path if prepared.model.path is not None else None
    check_not_inputs({"--out": out, "--report": report, "--work-dir": work_dir},
                     files=[model], folders=[model_folder] if model_folder else [])
    if out:
        check_output(out, what="--out", suffixes=YAML_SUFFIXES)
    if report:
        check_output(report, what="--report")
    return check_output(work_dir, kind="folder", what="--work-dir") if work_dir else None


def store_for(cache_dir: Optional[str], use_cache: bool) -> Optional[FitStore]:
    """The fit cache: --cache-dir, else the environment's or the default folder; None without a cache."""
    if not use_cache:
        return None
    if cache_dir:
        return FitStore(check_cache_dir(Path(cache_dir), chosen=True))
    return FitStore(check_cache_dir(default_cache_dir(os.environ)))


def write_search_outputs(outcome: SearchOutcome, out: Optional[str], report: Optional[str]) -> Optional[str]:
    """The config and the report of a search, written atomically; an interrupted search writes its report
    (the trials that finished) and raises Interrupted. The config's text, if there is a fit."""
    yaml_text = config_text(outcome.report)
    if outcome.interrupted:  # keep the finished trials; an unproven, interrupted fit is no config to deliver
        if report:
            write_text_atomic(report, report_text(outcome.report.to_json()))
        raise Interrupted("%s%s" % (outcome.result.stop_detail,
                                    "; the report %s keeps them" % report if report else ""))
    if out and yaml_text is not None:
        write_text_atomic(out, yaml_text)
    if report:
        write_text_atomic(report, report_text(outcome.report.to_json()))
    return yaml_text


def search(model: str, *, out: Optional[str] = None, report: Optional[str] = None, work_dir: Optional[str] = None,
           cache_dir: Optional[str] = None, use_cache: bool = True, force: bool = False,
           listener: Optional[Listener] = None, **options: Any) -> SearchReport:
    """Search one model as `vllm-fit search` does; the typed report (its `fit` is None when nothing fits).

    `options` are the search options in snake_case (max_len=65536, gpu_memory_utilization=0.9,
    target_len=32768, engine_args={"enforce_eager": True}, python="/venv/bin/python" ...), checked as the
    command checks them. `out` and `report` write the config and the JSON report."""
    request = request_from_options(dict(options, model=model), os.environ, sys.executable,
                                   where="vllm_fit.search()")
    prepared = prepare(request)
    folder = check_search_outputs(prepared, model, out, report, work_dir)
    prepared = replace(prepared, request=replace(request, work_dir=folder))
    outcome = run_search(prepared, listener or Listener(), store=store_for(cache_dir, use_cache), force=force)
    write_search_outputs(outcome, out, report)
    return outcome.report


def apply(source: str, to: Sequence[str], check: bool = False, allow_mismatch: bool = False) -> List[FileResult]:
    """Write fits into deployment files as `vllm-fit apply` does (proven before anything is written); per file,
    its text before and after and the changes. With `check`, nothing is written."""
    from .deploy.apply import apply_files
    from .deploy.fits import check_lengths, load_fits

    names = [str(name) for name in to]
    check_distinct({"--to %s" % name: name for name in names})
    check_not_inputs({"--to %s" % name: name for name in names}, files=[source])
    if not check:
        for name in names:
            check_output(name, what="--to")  # a regular file we may replace: never a link, a pipe or a folder
    loaded = load_fits(source)  # every value checked before a deployment file is read
    check_lengths(loaded.fits, dict(os.environ))
    return apply_files(loaded, [Path(name) for name in names], check, allow_mismatch)


def verify(files: Sequence[str], python: Optional[str] = None, via: Optional[str] = None, tolerance: float = 0.05,
           trial_timeout: Optional[float] = None, map_paths: Optional[Dict[str, str]] = None,
           listener: Optional[Listener] = None) -> List[Dict[str, Any]]:
    """Launch each config, or each server of a deployment file, once as `vllm-fit verify` does; the
    verdicts (`status` "ok" or "failed", the message, the trial)."""
    from .deploy.launch import parse_maps
    from .fleet.verify import targets_of, verify_all
    from .prepare import inputs
    from .prepare.envcheck import inspect_interpreter
    from .prepare.request import DEFAULT_TRIAL_TIMEOUT_S, VIA_ENV, Via

    paths = [Path(name) for name in files]
    maps = parse_maps(["%s=%s" % item for item in (map_paths or {}).items()])
    targets_of(paths, maps)  # every file read and checked before anything else
    how = inputs.choice(Via)("via" if via else VIA_ENV, via or os.environ.get(VIA_ENV) or Via.SERVE.value)
    interpreter = inspect_interpreter(inputs.interpreter("python", python) if python else sys.executable)
    return verify_all(paths, interpreter, os.environ, trial_timeout or DEFAULT_TRIAL_TIMEOUT_S,
                      inputs.fraction("tolerance", str(tolerance)), listener or Listener(), how, maps)
