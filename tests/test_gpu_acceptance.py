"""scripts/gpu_acceptance.py (issue 24) on the simulated GPU. TEST DOUBLE: tests/fakegpu plays vLLM and
NVML on an H100; the script, the tool it runs and the outside check are the real ones (--via llm: the
double has no server). On a GPU machine the same script runs against real vLLM (BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from simulator.harness import ROOT, environment, prepare_world
from simulator.worlds import Case, question, world


def _world(tmp_path, **adversarial):
    case = Case("acceptance", dict(world("0.32.0", "H100", "llama-8b", adversarial=adversarial),
                                   name="acceptance"), question(131072), "the acceptance check")
    return prepare_world(case, tmp_path)  # with the model's config.json


def _accept(tmp_path, world_path, *extra):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_acceptance.py"), "--model",
                           str(tmp_path / "model"), "--python", sys.executable, "--via", "llm", "--granularity", "256",
                           "--trial-timeout", "120", "--work", str(tmp_path / "work"), *extra],
                          env=environment(world_path), capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    return done, (json.loads(done.stdout) if done.stdout.strip().startswith("{") else None)


def test_the_acceptance_check_passes_beside_a_stale_vllm(tmp_path):
    """A stale vLLM holds 70% of the device: NVML sees it and the cap drops, the default search fits
    beside it (memory binds: shorter than the model's 131072), vLLM serves the YAML and refuses it one
    step longer for want of KV cache, and nothing is left afterwards."""
    done, verdict = _accept(tmp_path, _world(tmp_path), "--hold-fraction", "0.7")
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict["checks"] == {"nvml": True, "search": True, "outside": True, "cleanup": True}
    assert verdict["nvml"]["cap_busy"] < verdict["nvml"]["cap_before"]
    search = verdict["search"]
    assert search["exit_code"] == 0 and search["launches"] <= 3, search["trials"]
    outside = verdict["outside"]
    assert outside["fit"]["served"] and outside["one_step_higher"]["started"] is False
    assert outside["fit"]["length"] == search["fit_max_model_len"] < 131072
    assert "KV cache" in outside["one_step_higher"]["detail"]
    assert verdict["cleanup"]["leftover_processes"] == []


def test_no_gpu_is_exit_3(tmp_path):
    done, verdict = _accept(tmp_path, _world(tmp_path, no_gpu=True))
    assert done.returncode == 3 and verdict == {"ok": False, "reason": verdict["reason"]}
    assert "no GPU" in verdict["reason"]


def test_only_this_checks_own_processes_are_leftovers(tmp_path):
    """Another vLLM server on the machine (a test beside this one) is not a leftover; one that carries this
    check's id is, even when it was reparented away from the check."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_acceptance

    sleeper = "import time; time.sleep(60)"
    marker = "vllm.entrypoints.openai"
    ours = subprocess.run(["sh", "-c", '"$0" -c "$1" "$2" >/dev/null 2>&1 & echo $!', sys.executable, sleeper, marker],
                          env={**environment(tmp_path), gpu_acceptance.RUN_ENV: "run-1"}, capture_output=True,
                          text=True, check=True)
    other = subprocess.run(["sh", "-c", '"$0" -c "$1" "$2" >/dev/null 2>&1 & echo $!', sys.executable, sleeper, marker],
                           env={**environment(tmp_path), gpu_acceptance.RUN_ENV: "run-2"}, capture_output=True,
                           text=True, check=True)
    pids = [int(ours.stdout), int(other.stdout)]
    try:
        found = [entry["pid"] for entry in gpu_acceptance.leftovers("run-1")]
        assert pids[0] in found and pids[1] not in found
    finally:
        for pid in pids:
            subprocess.run(["kill", "-9", str(pid)], check=False)
