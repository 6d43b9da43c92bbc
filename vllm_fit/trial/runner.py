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
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import psutil

from ..logs import phases
from ..logs.phases import Phase
from ..logs.probe_result import ProbeResult
from ..probe import PHASE_MARKER, SECRET_ARGS_ENV
from ..redact import is_secret_arg, public_args, scrub, secret_values
from .process_tree import GONE_TIMEOUT_S, kill_tree

PROBE_SOURCE = Path(__file__).resolve().parent.parent / "probe.py"
SHUTDOWN_GRACE_S = 10.0
"""After the probe wrote its result, how long it may take to shut vLLM down by itself."""

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
    result: Optional[ProbeResult]
    """The probe's result (with a served trial's HTTP findings), None when it wrote none or nothing valid."""
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
        self._lock = threading.Lock()
        self._log: Optional[Any] = None

    def run(self) -> None:
        with contextlib.ExitStack() as stack:
            self._log = stack.enter_context(open(self.log_path, "w", encoding="utf-8")) if self.log_path else None
            for raw in iter(self.stream.readline, b""):  # the log lives in a 0700 folder
                self.add(raw.decode("utf-8", errors="replace"))
            with self._lock:
                self._log = None

    def add(self, text: str) -> None:
        """One line of output (the child's, or the parent's own note such as a phase marker)."""
        line = scrub(text, self.secrets)
        with self._lock:
            self.chunks.append(line)
            if self._log:
                self._log.write(line)
                self._log.flush()
        self.on_line(line)

    def text(self) -> str:
        return "".join(self.chunks)


def run_probe(
    python: str,
    llm_kwargs: Mapping[str, Any],
    trial_dir: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    request_timeout_s: Optional[float] = None,
    start_timeout_s: Optional[float] = None,
    sequences: int = 1,
    on_phase: Callable[[Phase], None] = lambda phase: None,
    server_args: Optional[List[str]] = None,
    config_flags: Sequence[str] = (),
    driver: Optional[Driver] = None,
    also_secret: Sequence[str] = (),
) -> ProcessRun:
    """Run the probe on one spec in a fresh session and return its output and result.

    With `server_args` the probe runs vLLM's OpenAI server on them (`config_flags`: the config file's options, for
    a vLLM that cannot read the file) and `driver` sends the requests.

    The probe is copied alone into trial_dir and run from there, so none of vllm-fit's modules can
    shadow a package the trial imports. The child runs in the caller's working directory (relative
    model paths mean what the user typed). Secret engine arguments travel in the child's
    environment, never in the spec file. The request phase has its own timeout: a request that
    hangs (vLLM's null-block hang) ends at `request_timeout_s`, not at the trial timeout; a start that has
    not reached the request after `start_timeout_s` ends then.
    """
    trial_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    result_path = trial_dir / "result.json"
    if result_path.exists():
        result_path.unlink()
    secret_args = {key: value for key, value in llm_kwargs.items() if is_secret_arg(key, value)}
    spec: Dict[str, Any] = {"llm_kwargs": public_args(llm_kwargs), "sequences": sequences,
                            "result_path": str(result_path)}
    if server_args is not None:
        spec["server_args"], spec["config_flags"] = list(server_args), list(config_flags)
    spec_path = trial_dir / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1, default=str))
    probe_path = trial_dir / "probe.py"
    shutil.copyfile(PROBE_SOURCE, probe_path)
    argv = [python, str(probe_path), str(spec_path)]
    child_env = dict(env)
    ipc_folder = os.path.abspath(trial_dir)
    if "VLLM_RPC_BASE_PATH" not in env and len(ipc_folder) + len("/") + UUID_LEN <= MAX_SOCKET_PATH:
        child_env["VLLM_RPC_BASE_PATH"] = ipc_folder  # vLLM's ZeroMQ sockets go, and go away, with the trial
    if secret_args:
        child_env[SECRET_ARGS_ENV] = json.dumps(dict(secret_args))
    secrets = sorted({*secret_values(secret_args, env), *also_secret}, key=len, reverse=True)
    return run_child(argv, trial_dir, child_env, secrets, timeout_s=timeout_s, request_timeout_s=request_timeout_s,
                     start_timeout_s=start_timeout_s, on_phase=on_phase, driver=driver)


MAX_SOCKET_PATH = 107
"""The longest path a Unix socket can have (sun_path is 108 bytes with its terminating zero)."""
UUID_LEN = 36
"""vLLM names each IPC socket by a UUID in VLLM_RPC_BASE_PATH."""


class Session:
    """A running trial as a driver thread sees it (serve mode): alive or not, its output so far."""

    def __init__(self, popen: subprocess.Popen, pump: _OutputPump, state: Dict[str, Any]):
        self.popen, self.pump, self.state = popen, pump, state

    def alive(self) -> bool:
        return self.popen.poll() is None and not self.state.get("stop")

    def text(self) -> str:
        return self.pump.text()

    def mark(self, phase: str) -> None:
        """Announce a phase in the trial's log, as the probe itself does (the classifier reads it)."""
        self.pump.add("\n" + PHASE_MARKER + phase + "\n")


Driver = Callable[[Session], Dict[str, Any]]
"""Works with a running child (sends its requests) and returns what it found; the child is then stopped."""


def run_child(argv: List[str], trial_dir: Path, child_env: Mapping[str, str], secrets: Sequence[str], *,
              timeout_s: float, request_timeout_s: Optional[float] = None,
              start_timeout_s: Optional[float] = None, on_phase: Callable[[Phase], None] = lambda phase: None,
              driver: Optional[Driver] = None) -> ProcessRun:
    """Run one child in its own session until it exits, its driver is done, or a timeout; then
    kill its whole tree. The result is the probe's result file, updated with the driver's findings."""
    result_path = trial_dir / "result.json"
    state: Dict[str, Any] = {"probe_phase": None, "done_at": None, "request_at": None, "phase": None,
                             "stop": False}

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
        env=dict(child_env), start_new_session=True,
    )
    pump = _OutputPump(popen.stdout, trial_dir / "output.log", on_line, secrets)
    pump.start()
    found: Dict[str, Any] = {}
    worker = None
    if driver is not None:
        def drive() -> None:
            try:
                found.update(driver(Session(popen, pump, state)))
            finally:
                state["stop"] = True
        worker = threading.Thread(target=drive, name="vllm-fit-driver", daemon=True)
        worker.start()
    descendants: List[psutil.Process] = []
    timed_out = False
    survivors: List[int] = []
    try:
        timed_out = _wait(popen, started, (timeout_s, start_timeout_s or timeout_s, request_timeout_s or timeout_s),
                          state, descendants)
    finally:
        state["stop"] = True
        survivors = kill_tree(popen, descendants)
        pump.join(timeout=GONE_TIMEOUT_S)
        if worker is not None:
            worker.join(timeout=GONE_TIMEOUT_S)
    written = _read_result(result_path, pump.secrets)
    if driver is not None and written is not None:
        written.update(json.loads(scrub(json.dumps(found, default=str), pump.secrets)))
    return ProcessRun(
        argv=argv, log_text=pump.text(), result=ProbeResult.parse(written), exit_code=popen.returncode,
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


def _wait(popen: subprocess.Popen, started: float, deadlines: Tuple[float, float, float],
          state: Dict[str, Any], descendants: List[psutil.Process]) -> bool:
    """Wait for the probe to exit (or to linger after its result); return True on a timeout.
    `deadlines`: (the whole trial, the start until the request, the request) in seconds."""
    timeout_s, start_timeout_s, request_timeout_s = deadlines
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
        if state["stop"]:
            return False  # the driver is done with the server
        if state["done_at"] is not None:
            if now - state["done_at"] > SHUTDOWN_GRACE_S:
                return False  # result written; vLLM's own shutdown is taking too long
            continue
        if state["request_at"] is not None and now - state["request_at"] > request_timeout_s:
            return True
        if state["request_at"] is None and now - started > start_timeout_s:
            return True
        if now - started > timeout_s:
            return True
