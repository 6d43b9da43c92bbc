"""Run one trial: the probe in a fresh process and session, output captured, always cleaned up.

On every exit path (result, failure, timeout, Ctrl-C or SIGTERM of the tool) the trial's whole
process group and every descendant seen during the run are killed and reaped, and the runner waits
until they are really gone, so one trial's leftovers never disturb the next.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import psutil

from ..logs import phases
from ..logs.phases import Phase
from ..probe import PHASE_MARKER, SECRET_ARGS_ENV
from ..redact import is_secret_name, public_args, scrub, secret_values

PROBE_SOURCE = Path(__file__).resolve().parent.parent / "probe.py"
TERM_GRACE_S = 5.0
"""After SIGTERM to the group, how long before SIGKILL."""
SHUTDOWN_GRACE_S = 10.0
"""After the probe wrote its result, how long it may take to shut vLLM down by itself."""
GONE_TIMEOUT_S = 30.0
"""How long to wait for killed processes to disappear before reporting them."""

KV_SIZE_ENV = ("VLLM_CPU_KVCACHE_SPACE",)
"""Removed from the child's environment when the tool sets the KV size: it would override it."""
FORCED_ENV = {
    "NO_COLOR": "1",
    "VLLM_LOGGING_COLOR": "0",
    "VLLM_CONFIGURE_LOGGING": "1",
    "PYTHONUNBUFFERED": "1",
    "TQDM_DISABLE": "1",
}
"""Set in the child's environment: plain, unbuffered, parseable logs."""


def trial_environment(base: Mapping[str, str], sets_kv_size: bool = True,
                      extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The child's environment: the caller's, plus FORCED_ENV and `extra`; without the CPU KV
    override when the tool sets the KV size itself (`sets_kv_size`)."""
    env = {key: value for key, value in base.items() if not (sets_kv_size and key in KV_SIZE_ENV)}
    env.update(FORCED_ENV)
    if env.get("VLLM_LOGGING_LEVEL", "INFO").upper() != "DEBUG":
        env["VLLM_LOGGING_LEVEL"] = "INFO"  # the capacity lines are INFO
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class ProcessRun:
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

    def __init__(self, stream, log_path: Optional[Path], on_line: Callable[[str], None], secrets: Sequence[str]):
        super().__init__(daemon=True)
        self.stream, self.log_path, self.on_line, self.secrets = stream, log_path, on_line, list(secrets)
        self.chunks: List[str] = []

    def run(self) -> None:
        with contextlib.ExitStack() as stack:
            log = stack.enter_context(open(self.log_path, "w", encoding="utf-8")) if self.log_path else None
            for raw in iter(self.stream.readline, b""):  # the log lives in a 0700 folder
                line = scrub(raw.decode("utf-8", errors="replace"), self.secrets)
                self.chunks.append(line)
                if log:
                    log.write(line)
                    log.flush()
                self.on_line(line)

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
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pgid, sig)
    for proc in _alive(processes):
        with contextlib.suppress(psutil.NoSuchProcess):  # exited between the check and the signal
            proc.send_signal(sig)


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
    with contextlib.suppress(subprocess.TimeoutExpired):  # still running: kill_tree keeps signalling
        popen.wait(timeout=GONE_TIMEOUT_S if block else 0)


def run_probe(
    python: str,
    llm_kwargs: Mapping[str, Any],
    trial_dir: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    request_timeout_s: Optional[float] = None,
    sequences: int = 1,
    on_phase: Callable[[Phase], None] = lambda phase: None,
) -> ProcessRun:
    """Run the probe on one spec in a fresh session and return its output and result.

    The probe is copied alone into trial_dir and run from there, so none of vllm-fit's modules can
    shadow a package the trial imports. The child runs in the caller's working directory (relative
    model paths mean what the user typed). Secret engine arguments travel in the child's
    environment, never in the spec file. The request phase has its own timeout: a request that
    hangs (vLLM's null-block hang) ends at `request_timeout_s`, not at the trial timeout.
    """
    trial_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    result_path = trial_dir / "result.json"
    if result_path.exists():
        result_path.unlink()
    secret_args = {key: value for key, value in llm_kwargs.items() if is_secret_name(key)}
    spec = {"llm_kwargs": public_args(llm_kwargs), "sequences": sequences, "result_path": str(result_path)}
    spec_path = trial_dir / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1, default=str))
    probe_path = trial_dir / "probe.py"
    shutil.copyfile(PROBE_SOURCE, probe_path)
    argv = [python, str(probe_path), str(spec_path)]
    child_env = dict(env)
    if secret_args:
        child_env[SECRET_ARGS_ENV] = json.dumps(dict(secret_args))
    state: Dict[str, Any] = {"probe_phase": None, "done_at": None, "request_at": None, "phase": None}

    def on_line(line: str) -> None:
        if PHASE_MARKER in line:
            state["probe_phase"] = line.split(PHASE_MARKER, 1)[1].strip()
            if state["probe_phase"] == "done":
                state["done_at"] = time.monotonic()
            if state["probe_phase"] == "request":
                state["request_at"] = time.monotonic()
        phase = phases.advance(state["phase"], line)
        if phase is not None and phase != state["phase"]:
            state["phase"] = phase
            on_phase(phase)

    started = time.monotonic()
    popen = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=child_env, start_new_session=True,
    )
    pump = _OutputPump(popen.stdout, trial_dir / "output.log", on_line, secret_values(secret_args, env))
    pump.start()
    descendants: List[psutil.Process] = []
    timed_out = False
    survivors: List[int] = []
    try:
        timed_out = _wait(popen, started, timeout_s, request_timeout_s or timeout_s, state, descendants)
    finally:
        survivors = kill_tree(popen, descendants)
        pump.join(timeout=GONE_TIMEOUT_S)
    result = _read_result(result_path, pump.secrets)
    return ProcessRun(
        argv=argv, log_text=pump.text(), result=result, exit_code=popen.returncode,
        timed_out=timed_out, duration_s=round(time.monotonic() - started, 2),
        probe_phase=state["probe_phase"], survivors=survivors,
    )


def _read_result(path: Path, secrets: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The probe's result (scrubbed of secrets, on disk too), or None when it wrote none (killed)
    or wrote something unreadable."""
    try:
        text = path.read_text()
        clean = scrub(text, secrets)
        if clean != text:
            path.write_text(clean)
        data = json.loads(clean)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _wait(popen: subprocess.Popen, started: float, timeout_s: float, request_timeout_s: float,
          state: Dict[str, Any], descendants: List[psutil.Process]) -> bool:
    """Wait for the probe to exit (or to linger after its result); return True on a timeout."""
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
        if state["done_at"] is not None:
            if now - state["done_at"] > SHUTDOWN_GRACE_S:
                return False  # result written; vLLM's own shutdown is taking too long
            continue
        if state["request_at"] is not None and now - state["request_at"] > request_timeout_s:
            return True
        if now - started > timeout_s:
            return True
