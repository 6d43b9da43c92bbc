"""The terminal view: a live line for the running trial, a line per finished trial, a summary.

On a terminal the running trial's line updates in place (candidate, phase, elapsed seconds); when
the output is a file or a CI log, each phase change is printed once instead.
"""

from __future__ import annotations

import threading
import time
from typing import Any, List, Mapping, Optional, Tuple

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..gpu import Preflight
from ..logs.phases import Phase
from ..outcome import Outcome
from ..report.search_report import SearchReport
from ..report.sections import FitSummary
from ..strategies.base import AUTO
from ..study import StudyResult
from ..trial.listener import Listener
from ..trial.record import TrialRecord
from ..units import format_size

_STYLE = {Outcome.OK: "green", Outcome.KV_TOO_SMALL: "yellow", Outcome.TOO_LONG_FOR_MODEL: "yellow"}


def describe_candidate(kwargs: Mapping[str, Any]) -> str:
    """`max_model_len=4992 kv=2.5MiB` or `max_model_len=auto util=0.90`."""
    length = kwargs.get("max_model_len")
    parts = ["max_model_len=%s" % ("auto" if length == AUTO else length)]
    if kwargs.get("kv_cache_memory_bytes") is not None:
        parts.append("kv=%s" % format_size(int(kwargs["kv_cache_memory_bytes"])))
    elif kwargs.get("gpu_memory_utilization") is not None:
        parts.append("util=%.2f" % float(kwargs["gpu_memory_utilization"]))
    return " ".join(parts)


def describe_result(record: TrialRecord) -> str:
    """What a finished trial proved, in a few words."""
    if record.outcome is Outcome.OK:
        tokens = record.facts.kv_cache_tokens
        text = "served %s tokens" % (record.request or {}).get("total_tokens")
        return text + (", KV cache %s tokens" % format(tokens, ",") if tokens else "")
    return record.detail


class _RunningLine:
    """The live line's content; rendered by rich on every refresh, so the clock keeps moving."""

    def __init__(self, index: int, candidate: str):
        self.index, self.candidate, self.phase = index, candidate, "launching"
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        elapsed = time.monotonic() - self.started
        return Text.assemble(("trial %d  " % self.index, "bold"), self.candidate,
                             ("  %s" % self.phase, "cyan"), "  %.0fs" % elapsed)


class TerminalView(Listener):
    """Listener that draws the trials on a rich Console."""

    def __init__(self, console: Optional[Console] = None, out: Optional[Console] = None):
        self.console = console or Console(stderr=True)
        self.out = out or Console()
        self._lock = threading.Lock()
        self._line: Optional[_RunningLine] = None
        self._live: Optional[Live] = None

    def note(self, message: str) -> None:
        """A plain informational line (preflight, cache hits, warnings)."""
        self.console.print(message, highlight=False, soft_wrap=True)

    def preflight(self, preflight: Preflight) -> None:
        """The devices before the first trial: memory, and who else holds some."""
        if not preflight.available:
            self.note("preflight: %s" % preflight.reason)
            return
        table = Table(title="Devices (driver %s)" % preflight.driver, title_justify="left")
        for column in ("#", "name", "total MiB", "free MiB", "held by"):
            table.add_column(column, justify="right" if "MiB" in column or column == "#" else "left")
        for device in preflight.devices:
            held = ", ".join("%s (pid %d, %s MiB)" % (p.name, p.pid, (p.used_bytes or 0) >> 20)
                             for p in device.processes) or "-"
            table.add_row(str(device.index), device.name, str(device.total_bytes >> 20),
                          str(device.free_bytes >> 20), held)
        self.console.print(table)

    def trial_started(self, index: int, llm_kwargs: Mapping[str, Any]) -> None:
        with self._lock:
            self._line = _RunningLine(index, describe_candidate(llm_kwargs))
            if self.console.is_terminal:
                self._live = Live(self._line, console=self.console, refresh_per_second=4, transient=True)
                self._live.start()
            else:
                self.console.print("trial %d  %s  launching" % (index, self._line.candidate), highlight=False,
                                   soft_wrap=True)

    def phase(self, index: int, phase: Phase) -> None:
        phase_text = phase.value if isinstance(phase, Phase) else str(phase)
        with self._lock:
            line = self._line
            if line is None or line.index != index or line.phase == phase_text:
                return
            line.phase = phase_text
            if self._live is None:
                self.console.print("trial %d  %s  %s  %.0fs" % (index, line.candidate, phase_text,
                                   time.monotonic() - line.started), highlight=False, soft_wrap=True)

    def trial_finished(self, record: TrialRecord) -> None:
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None
            self._line = None
        style = _STYLE.get(record.outcome, "red")
        self.console.print(Text.assemble(
            ("trial %d  " % record.index, "bold"), describe_candidate(record.llm_kwargs) + "  ",
            (record.outcome.value, style), "  %s  %.1fs" % (describe_result(record), record.duration_s)),
            soft_wrap=True)

    def close(self) -> None:
        """Stop the live line (on interrupts)."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def alternatives(self, report: SearchReport) -> None:
        """--explore: the fit and each alternative side by side, each with its own verified fit."""
        table = Table(title="Alternatives (--explore)", title_justify="left", box=box.SIMPLE)
        for column in ("change", "max len", "memory", "KV tokens", "verified", "launches"):
            table.add_column(column, justify="left" if column in ("change", "verified") else "right",
                             no_wrap=True)
        rows: List[Tuple[str, Optional[FitSummary], int, str, Optional[str]]] = [
            ("as searched", report.fit, report.launches, report.stop.value, report.stop_reason)]
        rows += [(row.alternative, row.fit, row.launches, row.stop, row.stop_reason) for row in report.explore or ()]
        why = []
        for name, fit, launches, stop, stop_reason in rows:
            if fit is None:
                table.add_row(name, "-", "-", "-", Text("no", style="red"), str(launches))
                why.append("%s: %s: %s" % (name, stop, stop_reason))
                continue
            memory = ("U=%.2f" % fit.gpu_memory_utilization if fit.gpu_memory_utilization is not None
                      else format_size(fit.kv_cache_memory_bytes or 0))
            table.add_row(name, str(fit.max_model_len), memory, str(fit.kv_cache_tokens or "?"),
                          Text("trial %d" % fit.trial, style="green"), str(launches))
        self.out.print(table)
        for line in why:
            self.out.print(line, highlight=False, markup=False)

    def summary(self, result: StudyResult, yaml_text: Optional[str], out_path: Optional[str]) -> None:
        """The table of all trials, then the fit (or why there is none) and the config written."""
        table = Table(title="Trials", title_justify="left")
        for column in ("#", "candidate", "outcome", "what it proved", "seconds"):
            table.add_column(column, justify="right" if column in ("#", "seconds") else "left")
        for record in result.records:
            table.add_row(str(record.index), describe_candidate(record.llm_kwargs),
                          Text(record.outcome.value, style=_STYLE.get(record.outcome, "red")),
                          describe_result(record), "%.1f" % record.duration_s)
        self.out.print(table)
        if result.fit is None:
            self.out.print(Text("No fit: %s" % result.stop_detail, style="bold red"))
            for note in result.notes:
                self.out.print(note, highlight=False)
            return
        fit = result.fit
        retried = sum(len(record.retries) for record in result.records)  # launched, but not rows of the table
        self.out.print(Text.assemble(
            ("Fit: ", "bold green"), "%s  " % describe_candidate(dict(fit.llm_kwargs, max_model_len=fit.length)),
            "(trial %d, %d launch%s%s)" % (fit.index, result.launches, "" if result.launches == 1 else "es",
                                           "; %d transient failure%s retried" % (retried, "" if retried == 1 else "s")
                                           if retried else "")))
        if not result.proven:
            self.out.print(Text("Not proven the best: %s" % result.stop_detail, style="bold yellow"))
            for note in result.notes:
                self.out.print(note, highlight=False)
        if yaml_text:
            self.out.print(("Wrote %s:" % out_path) if out_path else "Config:", highlight=False)
            self.out.print(yaml_text.rstrip(), highlight=False, markup=False, soft_wrap=True)
