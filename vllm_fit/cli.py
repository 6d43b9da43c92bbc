"""The command line: parse, refuse bad input in one line (exit 2), run, write, exit with a clear code.

Exit codes (errors.ExitCode): 0 a proven fit; 1 nothing in the range works (the report says why),
a regression, or an internal error; 2 bad input; 3 environment problem; 4 a verified fit that the
search could not prove the best; 130 interrupted. Never a traceback: an internal error is one line
and the path of a debug log.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import tempfile
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, List, Optional

import click

from . import cli_outputs  # noqa: F401  (registers merge, verify, compare, plot on the group)
from .api import check_search_outputs, store_for, write_search_outputs
from .cli_group import _exit, cli, table_options
from .errors import BadInput, ExitCode, FitError, one_line
from .export.markdown import summary_table
from .files.locks import folder_lock
from .files.paths import check_not_inputs, check_output
from .fitter import run_search
from .fleet import batch as batch_module
from .fleet.fleet_file import load_fleet, parse_shard
from .fleet.fleet_file import shard as select_shard
from .fleet.index import load_index
from .fleet.status import BatchIndex
from .output.view import TerminalView
from .prepare import inputs, prepare, request_from_options


def _store_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Cache and journal options, shared by `search` and `batch`."""
    function = click.option("--force", is_flag=True, help="Search again even when a fit for the same "
                            "fingerprint is cached.")(function)
    function = click.option("--no-cache", is_flag=True, help="Neither read nor write the cache and journal.")(
        function)
    return click.option("--cache-dir", metavar="DIR", help="Cached fits and trial journals. Default: "
                        "$VLLM_FIT_CACHE_DIR or ~/.cache/vllm-fit.")(function)


@cli.command()
@table_options()
@_store_options
@click.option("--out", metavar="FILE.yaml", help="Write the fit as a `vllm serve --config` file.")
@click.option("--report", metavar="FILE.json", help="Write the JSON report (fit, trials, evidence).")
@click.option("--work-dir", metavar="DIR", help="Keep each trial's spec, result and log here.")
def search(out: Optional[str], report: Optional[str], work_dir: Optional[str], cache_dir: Optional[str],
           no_cache: bool, force: bool, **options: Any) -> int:
    """Launch vLLM for real to find the longest max_model_len (and the memory knob) that serves.

    With no memory knob fixed, the highest utilization up to --max-utilization is searched too;
    with --target-len, the least memory that serves that length. A fit found before for the same
    fingerprint is reused without a launch; a search killed half-way resumes from its journal.
    """
    request = request_from_options(options, os.environ, sys.executable)
    prepared = prepare(request)
    folder = check_search_outputs(prepared, options["model"], out, report, work_dir)  # before the first launch
    prepared = replace(prepared, request=replace(request, work_dir=folder))
    store = store_for(cache_dir, not no_cache)
    view = TerminalView()
    view.preflight(prepared.devices.preflight)
    for note in prepared.notes:
        view.note(note)
    try:
        outcome = run_search(prepared, view, store=store, force=force)
    finally:
        view.close()
    result = outcome.result
    for note in result.notes:
        if outcome.cached or note not in prepared.notes:  # the preparation's notes were shown above
            view.note(note)
    yaml_text = write_search_outputs(outcome, out, report)
    view.summary(result, yaml_text, out)
    if outcome.report.explore:
        view.alternatives(outcome.report)
    if result.environment_failed:
        view.note("environment problem: %s" % result.stop_detail)
        return _exit(ExitCode.ENVIRONMENT)
    if result.fit is None:
        return _exit(ExitCode.NO_FIT)
    return _exit(ExitCode.OK if result.proven else ExitCode.UNPROVEN)


@cli.command()
@click.argument("fleet_file", metavar="FLEET.yaml")
@click.option("--out-dir", metavar="DIR", required=True, help="Where configs/, reports/, index.json, "
              "summary.md and junit.xml go.")
@click.option("--shard", metavar="I/N", help="Run only the I-th of N stable subsets of the entries (CI matrices).")
@click.option("--baseline", metavar="DIR|index.json", help="An earlier batch output: entries that got worse "
              "are regressions.")
@click.option("--tolerance", metavar="FRACTION", default=str(batch_module.DEFAULT_TOLERANCE), show_default=True,
              help="With --baseline: the KV capacity drop that counts as a regression.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: one entry after the other here; ray: each entry a task on a Ray cluster.")
@click.option("--ray-address", metavar="ADDR", help="With --executor ray: the cluster (default: auto).")
@click.option("--max-parallel", metavar="N", default="8", show_default=True,
              help="With --executor ray: entries running at once.")
@_store_options
def batch(fleet_file: str, out_dir: str, shard: Optional[str], baseline: Optional[str], tolerance: str,
          executor: str, ray_address: Optional[str], max_parallel: str, cache_dir: Optional[str], no_cache: bool,
          force: bool) -> int:
    """Search every model of a fleet file; write one config per entry, an index, a summary, JUnit.

    Every entry is checked before the first launch. Exit code 1 when any entry has no proven fit,
    could not run, or regressed against --baseline.
    """
    if executor != "ray" and (ray_address or max_parallel != "8"):
        raise BadInput("--ray-address and --max-parallel apply to --executor ray only; add it or drop them")
    parallel = inputs.positive_int("--max-parallel", max_parallel)
    entries = load_fleet(fleet_file, os.environ, sys.executable)
    shard_label = None
    if shard:
        index, count = parse_shard(shard)
        entries, shard_label = select_shard(entries, index, count), "%d/%d" % (index, count)
    tolerance_value = inputs.fraction("--tolerance", tolerance)
    before = load_index(Path(baseline)) if baseline else None
    check_not_inputs({"--out-dir": out_dir}, files=[fleet_file] + ([baseline] if baseline else []),
                     folders=[baseline] if baseline and Path(baseline).is_dir() else [])
    folder = check_output(out_dir, kind="folder", what="--out-dir", create=False)
    batch_module.check_outputs(folder, entries)  # every file the batch writes, before anything is created
    folder = check_output(out_dir, kind="folder", what="--out-dir")
    for sub in ("configs", "reports", "plots"):
        check_output(folder / sub, kind="folder", what="--out-dir")
    settings = batch_module.BatchSettings(folder, fleet_file, shard_label, store_for(cache_dir, not no_cache), force,
                                          before, tolerance_value)
    view = TerminalView()
    try:
        with folder_lock(folder, "--out-dir"):
            if executor == "ray":
                from .fleet.ray_executor import run_batch_ray  # ray is imported only for --executor ray

                index_data: BatchIndex = run_batch_ray(entries, settings, view, ray_address, parallel)
            else:
                index_data = batch_module.run_batch(entries, settings, view)
    finally:
        view.close()
    view.out.print(summary_table(index_data).rstrip(), markup=False, highlight=False, soft_wrap=True)
    return _exit(ExitCode.NO_FIT if index_data.failing else ExitCode.OK)


def _raise_interrupt(signum: int, frame: object) -> None:
    """SIGTERM behaves like Ctrl-C: unwind, so every trial's process group is killed on the way."""
    raise KeyboardInterrupt


def _say(line: str) -> None:
    """One line to standard error, even when standard output is broken."""
    with contextlib.suppress(OSError):  # nowhere left to say it: the exit code still does
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _internal_error(exc: BaseException) -> int:
    """An unexpected error: one line, the traceback kept in a private debug log, exit 1."""
    fd, path = tempfile.mkstemp(prefix="vllm-fit-error-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    click.echo("vllm-fit: internal error: %s: %s (details in %s; please report it)"
               % (type(exc).__name__, one_line(str(exc), 200), path), err=True)
    return int(ExitCode.NO_FIT)


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: one-line errors, documented exit codes. SIGTERM, and SIGHUP unless it is
    ignored (nohup), end the run as Ctrl-C does: trials stopped, reports and index written, exit 130."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    hangup = signal.getsignal(signal.SIGHUP)
    if hangup is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _raise_interrupt)
    try:
        code = cli.main(args=argv, prog_name="vllm-fit", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "vllm-fit"
        click.echo("vllm-fit: error: %s (see `%s --help`)" % (one_line(exc.format_message()), command), err=True)
        code = int(ExitCode.BAD_INPUT)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("vllm-fit: interrupted; every trial process was stopped", err=True)
        code = int(ExitCode.INTERRUPTED)
    except FitError as exc:
        click.echo("vllm-fit: error: %s" % one_line(str(exc), 1000), err=True)
        code = int(exc.exit_code)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EBADF):
            code = _internal_error(exc)
        elif exc.filename:
            _say("vllm-fit: error: cannot write %s (%s); free space there or choose another place"
                 % (exc.filename, exc.strerror or exc))
            code = int(ExitCode.ENVIRONMENT)
        else:  # the terminal or the file standard output goes to is full or gone: files written stay
            _say("vllm-fit: error: cannot write to standard output (%s); free space or point standard output"
                 " elsewhere" % (exc.strerror or exc))
            code = int(ExitCode.ENVIRONMENT)
    except Exception as exc:  # never a traceback: one line and a debug log
        code = _internal_error(exc)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if hangup is not signal.SIG_IGN:
            signal.signal(signal.SIGHUP, hangup)
    sys.exit(code if isinstance(code, int) else 0)

