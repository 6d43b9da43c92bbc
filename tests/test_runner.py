"""The runner: timeouts, crashes and interrupts leave no process behind.

These use the fakegpu's vLLM (TEST DOUBLE, tests/fakegpu): real hangs and crashes cannot be provoked
on demand in real vLLM. The fake forks a child like vLLM's engine core, so the cleanup of the whole
process group is what is tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import default_signals, plan_for

from vllm_fit.outcome import Outcome
from vllm_fit.trial import process_tree, runner
from vllm_fit.trial.run import run_trial

KWARGS = {"model": "m", "max_model_len": 4096, "tensor_parallel_size": 1}


def _descendants_gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_hung_start_is_killed_at_the_timeout(fake_world, fake_model, tmp_path):
    env = runner.trial_environment(fake_world(mode="hang_start"))
    started = time.monotonic()
    record = run_trial(plan_for(sys.executable, tmp_path, 4, env), 1, dict(KWARGS, model=str(fake_model)))
    assert record.outcome is Outcome.TIMEOUT
    assert 4 <= time.monotonic() - started < 20
    assert not [line for line in record.evidence if "still alive" in line]


def test_hung_request_is_a_failed_request(fake_world, fake_model, tmp_path):
    env = runner.trial_environment(fake_world(mode="hang_request"))
    record = run_trial(plan_for(sys.executable, tmp_path, 6, env), 1, dict(KWARGS, model=str(fake_model)))
    assert record.outcome is Outcome.REQUEST_FAILED and "hung" in record.detail


def test_crash_keeps_the_log_tail(fake_world, fake_model, tmp_path):
    env = runner.trial_environment(fake_world(mode="crash"))
    record = run_trial(plan_for(sys.executable, tmp_path, 30, env), 1, dict(KWARGS, model=str(fake_model)))
    assert record.outcome is Outcome.CRASH and record.exit_code == 139
    assert any("non-default args" in line for line in record.evidence)  # the last line before the crash


def test_trial_environment_removes_the_cpu_kv_override_and_forces_plain_logs():
    env = runner.trial_environment({"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_LOGGING_LEVEL": "WARNING", "A": "b"})
    assert "VLLM_CPU_KVCACHE_SPACE" not in env and env["A"] == "b"
    assert env["NO_COLOR"] == "1" and env["VLLM_LOGGING_LEVEL"] == "INFO"
    assert runner.trial_environment({"VLLM_LOGGING_LEVEL": "DEBUG"})["VLLM_LOGGING_LEVEL"] == "DEBUG"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupting_the_tool_mid_trial_leaves_no_process(sig, fake_world, fake_model, tmp_path):
    env = fake_world(mode="hang_start", helper_ignores_sigterm=True)
    work = tmp_path / "work"
    report = tmp_path / "report.json"
    tool = subprocess.Popen(
        [sys.executable, "-m", "vllm_fit", "search", "--model", str(fake_model), "--max-len", "8192",
         "--work-dir", str(work), "--report", str(report)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=default_signals)  # a suite run under nohup or in the background ignores SIGINT
    def trial_log():
        found = sorted(work.glob("run-*/trial-001/output.log"))
        return found[0] if found else work / "run-?" / "trial-001" / "output.log"

    def loaded() -> bool:  # the engine-like child has loaded the model and hangs in its start
        log = trial_log()
        return log.exists() and "Model loading took" in log.read_text()

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not loaded():
        time.sleep(0.2)
    assert loaded(), tool.communicate(timeout=30)
    trial_pids = [p.pid for p in psutil.Process(tool.pid).children(recursive=True)]
    assert len(trial_pids) >= 2  # the probe and its engine-like grandchild
    tool.send_signal(sig)
    _, err = tool.communicate(timeout=60)
    assert tool.returncode == 130, err
    assert "interrupted" in err
    assert _descendants_gone(trial_pids, timeout=1.0), "trial processes outlived the tool"
    kept = json.loads(report.read_text())  # the interrupted search's report keeps what finished
    assert kept["stop"] == "interrupted" and kept["fit"] is None


def test_a_descendant_deaf_to_sigterm_is_killed_too(fake_world, fake_model, tmp_path, monkeypatch):
    """A descendant that ignores SIGTERM is still killed (SIGKILL) and nothing is left."""
    env = runner.trial_environment(fake_world(mode="hang_start", helper_ignores_sigterm=True))
    monkeypatch.setattr(process_tree, "TERM_GRACE_S", 0.5)
    run = runner.run_probe(sys.executable, dict(KWARGS, model=str(fake_model)), tmp_path / "t", timeout_s=3, env=env)
    assert run.timed_out and run.survivors == []
    assert os.path.exists(tmp_path / "t" / "output.log")
