"""Kill and reap one trial's process tree: its session's group and every descendant seen.

A trial's leftovers must never disturb the next trial, nor outlive the tool: SIGTERM, a grace
period, SIGKILL, then wait until every process is really gone (survivors are reported, not hidden).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import List, Sequence

import psutil

TERM_GRACE_S = 5.0
"""After SIGTERM to the group, how long before SIGKILL."""
GONE_TIMEOUT_S = 30.0
"""How long to wait for killed processes to disappear before reporting them."""


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
