"""Run one trial: the probe in a fresh process and session, output captured, always cleaned up.

On every exit path (result, failure, timeout, Ctrl-C or SIGTERM of the tool) the trial's whole
process group and every descendant seen during the run are killed and reaped, and the runner waits
until they are really gone, so one trial's leftovers never disturb the next.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import psutil

from . import phases
from .probe import PHASE_MARKER

PROBE_PATH = Path(__file__).with_name("probe.py")
TERM_GRACE_S = 5.0
"""After SIGTERM to the group, how long before SIGKILL."""
SHUTDOWN_GRACE_S = 10.0
"""After the probe wrote its result, how long it may take to shut vLLM down by itself."""
GONE_TIMEOUT_S = 30.0
"""How long to wait for killed processes to disappear before reporting them."""

REMOVED_ENV = ("VLLM_CPU_KVCACHE_SPACE",)
"""Removed from the child's environment: it overrides the KV size the tool sets."""
FORCED_ENV = {
    "NO_COLOR": "1",
    "VLLM_LOGGING_COLOR": "0",
    "VLLM_CONFIGURE_LOGGING": "1",
    "PYTHONUNBUFFERED": "1",
    "TQDM_DISABLE": "1",
}
"""Set in the child's environment: plain, unbuffered, parseable logs."""


def trial_environment(base: Mapping[str, str], extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The child's environment: the caller's, minus REMOVED_ENV, plus FORCED_ENV and `extra`."""
    env = {key: value for key, value in base.items() if key not in REMOVED_ENV}
    env.update(FORCED_ENV)
    if env.get("VLLM_LOGGING_LEVEL", "INFO").upper() != "DEBUG":
        env["VLLM_LOGGING_LEVEL"] = "INFO"  # the capacity lines are INFO
    env.update(extra or {})
    return env


@dataclass
class TrialRun:
    """What one probe process left behind: its output, its result file, how it ended."""

    argv: List[str]
    log_text: str
    result: Optional[Dict[str, Any]]
    exit_code: Optional[int]
    timed_out: bool
    duration_s: float
    probe_phase: Optional[str]
    survivors: List[int] = field(default_factory=list)
    """PIDs still alive after cleanup (should always be empty; reported, never hidden)."""


class _OutputPump(threading.Thread):
    """Reads the child's merged output line by line into memory, a log file and a callback."""

    def __init__(self, stream, log_path: Optional[Path], on_line: Callable[[str], None]):
        super().__init__(daemon=True)
        self.stream, self.log_path, self.on_line = stream, log_path, on_line
        self.chunks: List[str] = []

    def run(self) -> None:
        log = open(self.log_path, "w", encoding="utf-8") if self.log_path else None
        try:
            for raw in iter(self.stream.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                self.chunks.append(line)
                if log:
                    log.write(line)
                    log.flush()
                self.on_line(line)
        finally:
            if log:
                log.close()

    def text(self) -> str:
        return "".join(self.chunks)


def _group_members(pgid: int) -> List[psutil.Process]:
    """Live (non-zombie) processes in a process group."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _alive(processes: Sequence[psutil.Process]) -> List[psutil.Process]:
    """The processes of a list that still run (same PID and start time, not a zombie)."""
    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def _signal_all(pgid: int, processes: Sequence[psutil.Process], sig: int) -> None:
    """Send sig to the group and to each listed process (descendants that left the group)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is already empty
    for proc in _alive(processes):
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass  # exited between the check and the signal


def kill_tree(popen: subprocess.Popen, descendants: Sequence[psutil.Process]) -> List[int]:
    """Terminate, then kill, the child's group and known descendants; return PIDs that survived."""
    pgid = popen.pid
    if _group_members(pgid) or _alive(descendants):
        _signal_all(pgid, descendants, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < deadline and (_group_members(pgid) or _alive(descendants)):
            _reap(popen)
            time.sleep(0.1)
        _signal_all(pgid, descendants, signal.SIGKILL)
    _reap(popen, block=True)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        left = {p.pid for p in _group_members(pgid)} | {p.pid for p in _alive(descendants)}
        if not left:
            return []
        time.sleep(0.1)
    return sorted(left)


def _reap(popen: subprocess.Popen, block: bool = False) -> None:
    """Collect the child's exit status so it does not linger as a zombie."""
    try:
        popen.wait(timeout=GONE_TIMEOUT_S if block else 0)
    except subprocess.TimeoutExpired:
        pass  # still running: kill_tree keeps signalling


def run_probe(
    python: str,
    spec: Dict[str, Any],
    work_dir: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    on_phase: Callable[[str], None] = lambda phase: None,
) -> TrialRun:
    """Run the probe on one spec in a fresh session and return its output and result.

    The child runs in the caller's working directory (relative model paths mean what the user
    typed); the spec gets `result_path` inside work_dir; the output goes to work_dir/output.log too.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    result_path = work_dir / "result.json"
    if result_path.exists():
        result_path.unlink()
    spec = dict(spec, result_path=str(result_path))
    spec_path = work_dir / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    argv = [python, str(PROBE_PATH), str(spec_path)]
    state: Dict[str, Any] = {"probe_phase": None, "done_at": None, "phase": None}

    def on_line(line: str) -> None:
        if PHASE_MARKER in line:
            state["probe_phase"] = line.split(PHASE_MARKER, 1)[1].strip()
            if state["probe_phase"] == "done":
                state["done_at"] = time.monotonic()
        phase = phases.advance(state["phase"], line)
        if phase != state["phase"]:
            state["phase"] = phase
            on_phase(phase)

    started = time.monotonic()
    popen = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=dict(env), start_new_session=True,
    )
    pump = _OutputPump(popen.stdout, work_dir / "output.log", on_line)
    pump.start()
    descendants: List[psutil.Process] = []
    timed_out = False
    survivors: List[int] = []
    try:
        timed_out = _wait(popen, started, timeout_s, state, descendants)
    finally:
        survivors = kill_tree(popen, descendants)
        pump.join(timeout=GONE_TIMEOUT_S)
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return TrialRun(
        argv=argv, log_text=pump.text(), result=result, exit_code=popen.returncode,
        timed_out=timed_out, duration_s=round(time.monotonic() - started, 2),
        probe_phase=state["probe_phase"], survivors=survivors,
    )


def _wait(popen: subprocess.Popen, started: float, timeout_s: float, state: Dict[str, Any],
          descendants: List[psutil.Process]) -> bool:
    """Wait for the probe to exit (or to linger after its result); return True on timeout."""
    known = set()
    while True:
        try:
            popen.wait(timeout=0.25)
            return False
        except subprocess.TimeoutExpired:
            pass  # still running: look at descendants and deadlines below
        try:
            for child in psutil.Process(popen.pid).children(recursive=True):
                if child.pid not in known:
                    known.add(child.pid)
                    descendants.append(child)
        except psutil.NoSuchProcess:
            pass  # exited while we looked; popen.wait reaps it next round
        now = time.monotonic()
        if state["done_at"] is not None and now - state["done_at"] > SHUTDOWN_GRACE_S:
            return False  # result written; vLLM's own shutdown is taking too long
        if now - started > timeout_s:
            return True
