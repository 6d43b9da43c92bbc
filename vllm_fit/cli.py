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
from .export.json_report import write_report
from .export.yaml_config import render_config, write_config
from .fitter import (DEFAULT_GRANULARITY, DEFAULT_MAX_UTILIZATION, DEFAULT_TRIAL_TIMEOUT_S, KNOBS, SearchRequest,
                     prepare, run_search)
from .retry import RetryPolicy
from .output.view import TerminalView
from .report import config_comments, fit_engine_args
from .search.length import STRATEGIES

EXIT_OK, EXIT_NO_FIT = 0, 1


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vllm-fit")
def cli() -> None:
    """Find the longest max_model_len (and the memory knob) that really serves on this GPU."""


@cli.command()
@click.option("--model", required=True, help="Model directory or hub id, as vLLM takes it.")
@click.option("--max-len", metavar="N", help="Upper bound for max_model_len. Default: the model's "
              "maximum from its config.json (local directory or hub cache).")
@click.option("--min-len", metavar="N", help="Lower bound for max_model_len. Default: 1 (so the smallest candidate is the granularity).")
@click.option("--granularity", metavar="N", default=str(DEFAULT_GRANULARITY), show_default=True,
              help="The fit is a multiple of N (16: vLLM's smallest default block size).")
@click.option("--gpu-memory-utilization", metavar="U", help="Fix the fraction (0, 1] of total device "
              "memory vLLM may take.")
@click.option("--kv-cache-memory", metavar="SIZE", help="Fix the KV cache size instead "
              "(kv_cache_memory_bytes, vLLM 0.10.2+): 2621440, 64MiB, 2GiB ...")
@click.option("--max-utilization", metavar="U", default=str(DEFAULT_MAX_UTILIZATION), show_default=True,
              help="With no memory knob fixed: the highest utilization tried (capped by free memory).")
@click.option("--target-len", metavar="N", help="Instead of the longest length: the least memory that "
              "serves N tokens (for packing several models on one GPU).")
@click.option("--search", "search_knob", type=click.Choice(KNOBS), default="utilization", show_default=True,
              help="With --target-len: search gpu_memory_utilization (0.01 steps) or kv_cache_memory_bytes.")
@click.option("--kv-granularity", metavar="SIZE", default="1MiB", show_default=True,
              help="With --search kv-cache-memory: the KV size found is a multiple of SIZE.")
@click.option("--require-idle", is_flag=True, help="Refuse to start (exit 3) when other processes hold "
              "memory on the device.")
@click.option("--retries", metavar="N", default="2", show_default=True,
              help="Relaunches of a transiently failed trial (free memory short, NCCL hiccup).")
@click.option("--retry-wait", metavar="SECONDS", default="5", show_default=True,
              help="Backoff before the first relaunch; it doubles after each.")
@click.option("--tensor-parallel-size", metavar="N", default="1", show_default=True,
              help="Passed to vLLM; must divide the model's attention heads.")
@click.option("--engine-arg", "engine_arg", metavar="KEY=VALUE", multiple=True,
              help="Extra LLM(...) argument, repeatable; VALUE is parsed as JSON when it parses.")
@click.option("--python", "python", metavar="PATH", help="Interpreter of the vLLM environment. "
              "Default: the one running vllm-fit.")
@click.option("--trial-timeout", metavar="SECONDS", default=str(int(DEFAULT_TRIAL_TIMEOUT_S)),
              show_default=True, help="Kill a trial that has not finished after this long.")
@click.option("--strategy", type=click.Choice(sorted(STRATEGIES)), default="predict", show_default=True,
              help="predict: jump to what vLLM prints; bisect and doubling: baselines.")
@click.option("--out", metavar="FILE.yaml", help="Write the fit as a `vllm serve --config` file.")
@click.option("--report", metavar="FILE.json", help="Write the JSON report (fit, trials, evidence).")
@click.option("--work-dir", metavar="DIR", help="Keep each trial's spec, result and log here.")
def search(model: str, max_len: Optional[str], min_len: Optional[str], granularity: str,
           gpu_memory_utilization: Optional[str], kv_cache_memory: Optional[str], max_utilization: str,
           target_len: Optional[str], search_knob: str, kv_granularity: str, require_idle: bool,
           retries: str, retry_wait: str, tensor_parallel_size: str, engine_arg: List[str],
           python: Optional[str], trial_timeout: str, strategy: str, out: Optional[str],
           report: Optional[str], work_dir: Optional[str]) -> int:
    """Launch vLLM for real to find the longest max_model_len (and the memory knob) that serves.

    With no memory knob fixed, the highest utilization up to --max-utilization is searched too;
    with --target-len, the least memory that serves that length.
    """
    max_value = inputs.positive_int("--max-len", max_len, "8192")
    min_value = inputs.positive_int("--min-len", min_len, "1024")
    inputs.length_range(min_value, max_value)
    utilization, kv_bytes = inputs.memory_knob(gpu_memory_utilization, kv_cache_memory)
    retry_count = inputs.non_negative_int("--retries", retries, "2")
    request = SearchRequest(
        model=model, python=inputs.interpreter(python, sys.executable), min_len=min_value,
        max_len=max_value, granularity=inputs.positive_int("--granularity", granularity, "256") or 1,
        gpu_memory_utilization=utilization, kv_cache_memory_bytes=kv_bytes,
        max_utilization=inputs.utilization("--max-utilization", max_utilization) or DEFAULT_MAX_UTILIZATION,
        target_len=inputs.positive_int("--target-len", target_len, "4096"), search_knob=search_knob,
        kv_granularity=inputs.size("--kv-granularity", kv_granularity) or 1, require_idle=require_idle,
        retry=RetryPolicy(attempts=retry_count + 1,
                          wait_s=inputs.positive_float("--retry-wait", retry_wait, "5") or 1.0),
        tensor_parallel_size=inputs.positive_int("--tensor-parallel-size", tensor_parallel_size, "2") or 1,
        engine_args=inputs.engine_args(engine_arg),
        trial_timeout_s=inputs.positive_float("--trial-timeout", trial_timeout, "900") or 0.0,
        strategy=strategy, work_dir=Path(work_dir) if work_dir else None, env=dict(os.environ),
    )
    prepared = prepare(request)
    view = TerminalView()
    view.preflight(prepared.devices.preflight)
    for note in prepared.notes:
        view.note(note)
    try:
        outcome = run_search(prepared, view)
    finally:
        view.close()
    result = outcome.result
    yaml_text = None
    if result.fit is not None:
        args = fit_engine_args(result.fit)
        comments = config_comments(outcome.report)
        yaml_text = render_config(args, comments)
        if out:
            write_config(out, args, comments)
    if report:
        write_report(report, outcome.report)
    view.summary(result, yaml_text, out)
    if outcome.environment_failed:
        view.note("environment problem: %s" % result.stop_reason)
        return 3
    return EXIT_OK if result.fit is not None else EXIT_NO_FIT


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
