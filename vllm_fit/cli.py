"""The command line: parse, refuse bad input in one line (exit 2), run, write, exit with a clear code.

Exit codes: 0 a verified fit; 1 nothing in the range works (the report says why); 2 bad input;
3 environment problem; 130 interrupted.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import List, Optional

import click

from . import inputs
from .errors import FitError, Interrupted
from .batch import DEFAULT_TOLERANCE as BATCH_TOLERANCE
from .batch import FAILING, load_index, merge, run_batch
from .compare import compare
from .envcheck import inspect_interpreter
from .export.atomic import write_text_atomic
from .export.fit_files import write_fit_files
from .export.json_report import write_report
from .export.junit import junit_xml
from .export.markdown import summary_table
from .export.yaml_config import read_config
from .fleet import load_fleet, parse_shard
from .fleet import shard as select_shard
from .report import now_iso
from .verify import DEFAULT_TOLERANCE as VERIFY_TOLERANCE
from .verify import verify_all
from .fitter import DEFAULT_GRANULARITY, DEFAULT_MAX_UTILIZATION, DEFAULT_TRIAL_TIMEOUT_S, KNOBS, prepare, run_search
from .store import FitStore, default_cache_dir
from .output.view import TerminalView
from .search.length import STRATEGIES

EXIT_OK, EXIT_NO_FIT = 0, 1


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vllm-fit")
def cli() -> None:
    """Find the longest max_model_len (and the memory knob) that really serves on this GPU."""


def _search_options(function):
    """The options of one search, shared by `search` (and mirrored by fleet-file keys)."""
    options = [
        click.option("--model", required=True, help="Model directory or hub id, as vLLM takes it."),
        click.option("--max-len", metavar="N", help="Upper bound for max_model_len. Default: the model's "
                     "maximum from its config.json (local directory or hub cache)."),
        click.option("--min-len", metavar="N", help="Lower bound for max_model_len. Default: 1 (so the "
                     "smallest candidate is the granularity)."),
        click.option("--granularity", metavar="N", default=str(DEFAULT_GRANULARITY), show_default=True,
                     help="The fit is a multiple of N (16: vLLM's smallest default block size)."),
        click.option("--gpu-memory-utilization", metavar="U", help="Fix the fraction (0, 1] of total "
                     "device memory vLLM may take."),
        click.option("--kv-cache-memory", metavar="SIZE", help="Fix the KV cache size instead "
                     "(kv_cache_memory_bytes, vLLM 0.10.2+): 2621440, 64MiB, 2GiB ..."),
        click.option("--max-utilization", metavar="U", default=str(DEFAULT_MAX_UTILIZATION), show_default=True,
                     help="With no memory knob fixed: the highest utilization tried (capped by free memory)."),
        click.option("--target-len", metavar="N", help="Instead of the longest length: the least memory that "
                     "serves N tokens (for packing several models on one GPU)."),
        click.option("--search", "search", type=click.Choice(KNOBS), default="utilization", show_default=True,
                     help="With --target-len: search gpu_memory_utilization (0.01 steps) or "
                     "kv_cache_memory_bytes."),
        click.option("--kv-granularity", metavar="SIZE", default="1MiB", show_default=True,
                     help="With --search kv-cache-memory: the KV size found is a multiple of SIZE."),
        click.option("--require-idle", is_flag=True, help="Refuse to start (exit 3) when other processes "
                     "hold memory on the device."),
        click.option("--retries", metavar="N", default="2", show_default=True,
                     help="Relaunches of a transiently failed trial (free memory short, NCCL hiccup)."),
        click.option("--retry-wait", metavar="SECONDS", default="5", show_default=True,
                     help="Backoff before the first relaunch; it doubles after each."),
        click.option("--tensor-parallel-size", metavar="N", default="1", show_default=True,
                     help="Passed to vLLM; must divide the model's attention heads."),
        click.option("--engine-arg", "engine_args", metavar="KEY=VALUE", multiple=True,
                     help="Extra LLM(...) argument, repeatable; VALUE is parsed as JSON when it parses."),
        click.option("--python", "python", metavar="PATH", help="Interpreter of the vLLM environment. "
                     "Default: the one running vllm-fit."),
        click.option("--trial-timeout", metavar="SECONDS", default=str(int(DEFAULT_TRIAL_TIMEOUT_S)),
                     show_default=True, help="Kill a trial that has not finished after this long."),
        click.option("--strategy", type=click.Choice(sorted(STRATEGIES)), default="predict", show_default=True,
                     help="predict: jump to what vLLM prints; bisect and doubling: baselines."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _store_options(function):
    """Cache and journal options, shared by `search` and `batch`."""
    function = click.option("--force", is_flag=True, help="Search again even when a fit for the same "
                            "fingerprint is cached.")(function)
    function = click.option("--no-cache", is_flag=True, help="Neither read nor write the cache and journal.")(
        function)
    return click.option("--cache-dir", metavar="DIR", help="Cached fits and trial journals. Default: "
                        "$VLLM_FIT_CACHE_DIR or ~/.cache/vllm-fit.")(function)


def store_for(cache_dir: Optional[str], no_cache: bool) -> Optional[FitStore]:
    """The fit store the options ask for (None with --no-cache)."""
    if no_cache:
        return None
    return FitStore(Path(cache_dir) if cache_dir else default_cache_dir(os.environ))


@cli.command()
@_search_options
@_store_options
@click.option("--out", metavar="FILE.yaml", help="Write the fit as a `vllm serve --config` file.")
@click.option("--report", metavar="FILE.json", help="Write the JSON report (fit, trials, evidence).")
@click.option("--work-dir", metavar="DIR", help="Keep each trial's spec, result and log here.")
def search(out: Optional[str], report: Optional[str], work_dir: Optional[str], cache_dir: Optional[str],
           no_cache: bool, force: bool, **options) -> int:
    """Launch vLLM for real to find the longest max_model_len (and the memory knob) that serves.

    With no memory knob fixed, the highest utilization up to --max-utilization is searched too;
    with --target-len, the least memory that serves that length. A fit found before for the same
    fingerprint is reused without a launch; a search killed half-way resumes from its journal.
    """
    request = inputs.request_from_options(options, os.environ, sys.executable)
    request.work_dir = Path(work_dir) if work_dir else None
    prepared = prepare(request)
    view = TerminalView()
    view.preflight(prepared.devices.preflight)
    for note in prepared.notes:
        view.note(note)
    try:
        outcome = run_search(prepared, view, store=store_for(cache_dir, no_cache), force=force)
    finally:
        view.close()
    result = outcome.result
    if outcome.cached:
        for note in result.notes:
            view.note(note)
    yaml_text = write_fit_files(result.fit, outcome.report, out, report)
    view.summary(result, yaml_text, out)
    if outcome.environment_failed:
        view.note("environment problem: %s" % result.stop_reason)
        return 3
    return EXIT_OK if result.fit is not None else EXIT_NO_FIT


@cli.command()
@click.argument("fleet_file", metavar="FLEET.yaml")
@click.option("--out-dir", metavar="DIR", required=True, help="Where configs/, reports/, index.json, "
              "summary.md and junit.xml go.")
@click.option("--shard", metavar="I/N", help="Run only the I-th of N stable subsets of the entries (CI matrices).")
@click.option("--baseline", metavar="DIR|index.json", help="An earlier batch output: entries that got worse "
              "are regressions.")
@click.option("--tolerance", metavar="FRACTION", default=str(BATCH_TOLERANCE), show_default=True,
              help="With --baseline: the KV capacity drop that counts as a regression.")
@_store_options
def batch(fleet_file: str, out_dir: str, shard: Optional[str], baseline: Optional[str], tolerance: str,
          cache_dir: Optional[str], no_cache: bool, force: bool) -> int:
    """Search every model of a fleet file; write one config per entry, an index, a summary, JUnit.

    Exit code 1 when any entry has no fit, could not run, or regressed against --baseline.
    """
    entries = load_fleet(fleet_file)
    shard_label = None
    if shard:
        index, count = parse_shard(shard)
        entries, shard_label = select_shard(entries, index, count), "%d/%d" % (index, count)
    tolerance_value = inputs.fraction("--tolerance", tolerance)
    before = load_index(Path(baseline)) if baseline else None
    view = TerminalView()
    try:
        index = run_batch(entries, Path(out_dir), os.environ, sys.executable, view, store_for(cache_dir, no_cache),
                          force, fleet_file, shard_label, before, tolerance_value)
    finally:
        view.close()
    view.out.print(summary_table(index).rstrip(), markup=False, highlight=False, soft_wrap=True)
    return EXIT_NO_FIT if any(e["status"] in FAILING for e in index["entries"]) else EXIT_OK


@cli.command(name="merge")
@click.argument("shard_outputs", metavar="SHARD_DIR...", nargs=-1, required=True)
@click.option("--out-dir", metavar="DIR", required=True, help="Where the merged index, summary, JUnit go.")
def merge_command(shard_outputs: List[str], out_dir: str) -> int:
    """Combine the outputs of `batch --shard` runs into one index, summary and JUnit report."""
    index = merge([Path(p) for p in shard_outputs], Path(out_dir))
    click.echo(summary_table(index).rstrip())
    return EXIT_NO_FIT if any(e["status"] in FAILING for e in index["entries"]) else EXIT_OK


@cli.command()
@click.argument("configs", metavar="CONFIG.yaml...", nargs=-1, required=True)
@click.option("--python", "python", metavar="PATH", help="Interpreter of the vLLM environment.")
@click.option("--tolerance", metavar="FRACTION", default=str(VERIFY_TOLERANCE), show_default=True,
              help="Fail when the KV capacity fell by more than this fraction below the recorded one.")
@click.option("--trial-timeout", metavar="SECONDS", default=str(int(DEFAULT_TRIAL_TIMEOUT_S)), show_default=True)
@click.option("--report", metavar="FILE.json", help="Write the verdicts with their evidence.")
@click.option("--junit", metavar="FILE.xml", help="Write one JUnit test case per config.")
def verify(configs: List[str], python: Optional[str], tolerance: str, trial_timeout: str, report: Optional[str],
           junit: Optional[str]) -> int:
    """Launch each committed config once: it must start, serve a full-length request, keep its capacity."""
    paths = [Path(c) for c in configs]
    for path in paths:
        read_config(path)  # refuse a broken file before launching anything
    interpreter = inspect_interpreter(inputs.interpreter(python, sys.executable))
    view = TerminalView()
    try:
        verdicts = verify_all(paths, interpreter.python, os.environ,
                              inputs.positive_float("--trial-timeout", trial_timeout, "900") or 1.0,
                              inputs.fraction("--tolerance", tolerance), view)
    finally:
        view.close()
    for verdict in verdicts:
        view.out.print("%s  %s: %s" % (verdict["status"].upper(), verdict["config"], verdict["message"]),
                       markup=False, highlight=False, soft_wrap=True)
    if report:
        write_report(report, {"created": now_iso(), "verdicts": verdicts})
    if junit:
        write_text_atomic(junit, junit_xml("vllm-fit verify", [
            {"name": v["config"], "status": v["status"], "message": v["message"], "time": v["duration_s"],
             "details": v["message"]} for v in verdicts]))
    return EXIT_OK if all(v["status"] == "ok" for v in verdicts) else EXIT_NO_FIT


@cli.command(name="compare")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option("--out", metavar="FILE.md", help="Also write the Markdown to this file.")
def compare_command(old: str, new: str, out: Optional[str]) -> int:
    """What changed between two sets of configs (folders of YAML, or batch index.json), as Markdown."""
    text = compare(Path(old), Path(new))
    if out:
        write_text_atomic(out, text)
    click.echo(text.rstrip())
    return EXIT_OK


def _raise_interrupt(signum: int, frame: object) -> None:
    """SIGTERM behaves like Ctrl-C: unwind, so every trial's process group is killed on the way."""
    raise KeyboardInterrupt


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: one-line errors, documented exit codes."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        code = cli.main(args=argv, prog_name="vllm-fit", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "vllm-fit"
        click.echo("vllm-fit: error: %s (see `%s --help`)" % (exc.format_message(), command), err=True)
        code = 2
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("vllm-fit: interrupted; every trial process was stopped", err=True)
        code = Interrupted.exit_code
    except FitError as exc:
        click.echo("vllm-fit: error: %s" % exc, err=True)
        code = exc.exit_code
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.exit(code if isinstance(code, int) else 0)
