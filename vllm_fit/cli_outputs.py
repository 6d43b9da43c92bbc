"""The commands that work on what vllm-fit wrote: merge shard outputs, verify committed configs,
compare two sets of configs, and plot a report. They register on the `cli` group of cli.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

import click

from .cli_group import _exit, cli, table_options
from .errors import ExitCode
from .export.json_report import read_report, report_text
from .export.junit import junit_xml
from .export.markdown import summary_table
from .export.plot import FORMATS as PLOT_FORMATS
from .export.plot import render as render_plot
from .files.atomic import write_bytes_atomic, write_text_atomic
from .files.paths import check_distinct, check_not_inputs, check_output
from .fleet.compare import compare
from .fleet.index import merge
from .fleet.verify import DEFAULT_TOLERANCE as VERIFY_TOLERANCE
from .fleet.verify import VerifyStatus, targets_of, verify_all
from .output.view import TerminalView
from .prepare import inputs
from .prepare.envcheck import inspect_interpreter
from .prepare.request import DEFAULT_TRIAL_TIMEOUT_S, VIA_ENV, Via
from .report.build import now_iso


@cli.command(name="merge")
@click.argument("shard_outputs", metavar="SHARD_DIR...", nargs=-1, required=True)
@click.option("--out-dir", metavar="DIR", required=True, help="Where the merged index, summary, JUnit go.")
def merge_command(shard_outputs: List[str], out_dir: str) -> int:
    """Combine the outputs of `batch --shard` runs into one index, summary and JUnit report."""
    check_not_inputs({"--out-dir": out_dir}, folders=[p for p in shard_outputs if Path(p).is_dir()],
                      files=shard_outputs)
    folder = check_output(out_dir, kind="folder", what="--out-dir", create=False)  # created once all is checked
    index = merge([Path(p) for p in shard_outputs], folder)
    click.echo(summary_table(index).rstrip())
    return _exit(ExitCode.NO_FIT if index.failing else ExitCode.OK)


@cli.command()
@click.argument("configs", metavar="FILE...", nargs=-1, required=True)
@table_options(["python", "trial_timeout", "via"])
@click.option("--map-path", "maps", metavar="CONTAINER=LOCAL", multiple=True,
              help="A deployment's path that exists only in its container (/mnt/models, a volume) and the local"
                   " folder that holds the same files; repeat for several.")
@click.option("--tolerance", metavar="FRACTION", default=str(VERIFY_TOLERANCE), show_default=True,
              help="Fail when the KV capacity fell by more than this fraction below the recorded one.")
@click.option("--report", metavar="FILE.json", help="Write the verdicts with their evidence.")
@click.option("--junit", metavar="FILE.xml", help="Write one JUnit test case per config.")
def verify(configs: List[str], python: Optional[str], tolerance: str, trial_timeout: Optional[str],
           report: Optional[str], junit: Optional[str], via: Optional[str], maps: List[str]) -> int:
    """Launch each committed config once: it must start, serve a full-length request, keep its capacity.

    A deployment file (Kubernetes manifest, production-stack values, compose file, KServe
    InferenceService) is verified by launching each of its servers with the options its runtime gives
    vLLM, the model mapped to a local folder with --map-path, host and port replaced for the test.
    """
    from .deploy.launch import parse_maps

    paths = [Path(c) for c in configs]
    mapped = parse_maps(maps)
    targets_of(paths, mapped)  # every file read and checked before anything else
    check_distinct({"--report": report, "--junit": junit})
    check_not_inputs({"--report": report, "--junit": junit}, files=configs)
    if report:
        check_output(report, what="--report")
    if junit:
        check_output(junit, what="--junit")
    timeout_s = inputs.seconds("--trial-timeout", trial_timeout) if trial_timeout else DEFAULT_TRIAL_TIMEOUT_S
    tolerance_value = inputs.fraction("--tolerance", tolerance)
    how = inputs.choice(Via)("--via" if via else VIA_ENV, via or os.environ.get(VIA_ENV) or Via.SERVE.value)
    interpreter = inspect_interpreter(inputs.interpreter("--python", python) if python else sys.executable)
    view = TerminalView()
    try:
        verdicts = verify_all(paths, interpreter, os.environ, timeout_s, tolerance_value, view, how, mapped)
    finally:
        view.close()
    for verdict in verdicts:
        view.out.print("%s  %s: %s" % (verdict["status"].upper(), verdict["config"], verdict["message"]),
                       markup=False, highlight=False, soft_wrap=True)
    if report:
        write_text_atomic(report, report_text({"created": now_iso(), "verdicts": verdicts}))
    if junit:
        write_text_atomic(junit, junit_xml("vllm-fit verify", [
            {"name": v["config"], "status": v["status"], "verdict": VerifyStatus(v["status"]).verdict,
             "message": v["message"], "time": v["duration_s"], "details": v["message"]} for v in verdicts]))
    ok = all(VerifyStatus(v["status"]) is VerifyStatus.OK for v in verdicts)
    return _exit(ExitCode.OK if ok else ExitCode.NO_FIT)


@cli.command(name="compare")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option("--out", metavar="FILE.md", help="Also write the Markdown to this file.")
def compare_command(old: str, new: str, out: Optional[str]) -> int:
    """What changed between two sets of configs (folders of YAML, or batch index.json), as Markdown.

    Exit code 1 when a config got worse (gone, shorter, or less KV capacity).
    """
    if out:
        check_not_inputs({"--out": out}, files=[old, new], folders=[p for p in (old, new) if Path(p).is_dir()])
        check_output(out, what="--out")
    text, worse = compare(Path(old), Path(new))
    if out:
        write_text_atomic(out, text)
    click.echo(text.rstrip())
    return _exit(ExitCode.NO_FIT if worse else ExitCode.OK)


@cli.command(name="plot")
@click.argument("report", metavar="REPORT.json")
@click.option("--out", metavar="FILE.svg|png|pdf", required=True, help="Where to write the picture.")
def plot_command(report: str, out: str) -> int:
    """Draw a search: KV capacity against the memory knob, each trial coloured by its outcome.

    With the capacity model's line, the cap, the fit, the model's maximum and the concurrency
    levels. Needs matplotlib (pip install 'vllm-fit[plot]').
    """
    check_not_inputs({"--out": out}, files=[report])
    check_output(out, what="--out", suffixes=PLOT_FORMATS)
    data = read_report(report)
    write_bytes_atomic(out, render_plot(data, Path(out).suffix.lower()))
    click.echo("wrote %s" % out)
    return _exit(ExitCode.OK)


@cli.command(name="apply")
@click.argument("source", metavar="SOURCE")
@click.argument("more", metavar="[FILE...]", nargs=-1)
@click.option("--to", "targets", metavar="FILE...", multiple=True, required=True,
              help="The deployment files to update (Kubernetes manifests, KServe InferenceServices, production-stack"
                   " values, compose files, --config YAML, shell scripts that run vllm serve or docker run,"
                   " Dockerfiles, SkyPilot tasks, dstack configurations);"
                   " several may follow one --to (a shell glob).")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 with the diff when a file differs from the fit.")
@click.option("--allow-mismatch", is_flag=True,
              help="Write fits even where a server runs with other settings that change what the GPU holds"
                   " (tensor parallelism, dtypes, CUDA graphs ...), reads a --config file the files do not"
                   " show, has arguments the files do not hold ($EXTRA_ARGS, a script's \"$@\"), or, lowering"
                   " a value, declares another vLLM version or GPU than the fit's.")
def apply_command(source: str, more: List[str], targets: List[str], check: bool, allow_mismatch: bool) -> int:
    """Write fits into the deployment files that run them: max-model-len, the memory knob, max-num-seqs.

    SOURCE is a fit YAML (search --out), a report (search --report) or a batch index. Each vLLM server
    in the files is matched to its fit by name (entry, served model, container, service), else by model;
    the value its vLLM really gets (the last occurrence, extraArgs over vllmConfig, a script's command)
    is changed in the file's own style, and the edited file is read back to prove it, before anything
    is written. Prints a unified diff.
    """
    from .api import apply  # ruamel.yaml only for apply: search runs without it

    results = apply(source, list(targets) + list(more), check, allow_mismatch)
    for result in results:
        for note in result.notes:
            click.echo(note, err=True)
    differ = [result for result in results if result.after != result.before]
    for result in differ:
        click.echo(result.diff, nl=False)
    for result in results:
        state = "unchanged" if result.after == result.before else "differs" if check else "updated"
        by_server: Dict[str, List[str]] = {}
        for change in result.changes:
            by_server.setdefault(change.server.where, []).append("%s %s -> %s" % (
                change.option, change.old if change.old is not None else "(unset)", change.new))
        detail = "; ".join("%s: %s" % (where, ", ".join(items)) for where, items in by_server.items())
        click.echo("%s: %s (%d server%s)%s" % (result.path, state, result.matched, "" if result.matched == 1 else "s",
                                               ": " + detail if detail else ""), err=True)
    return _exit(ExitCode.NO_FIT if check and differ else ExitCode.OK)
