"""The real-GPU acceptance check: what vllm-fit relies on, shown on the device itself, in a few minutes.

1. NVML: another process's memory is seen, the utilization cap drops to what is free, and after that
   process is killed the release wait sees the memory come back.
2. The seed's case: a stale vLLM holds part of the device (--hold-fraction); the default search
   (`vllm-fit search`, through `vllm serve` unless --via llm) runs beside it and writes its YAML.
3. Outside the tool (scripts/boundary.py): vLLM itself serves the written YAML and a full-length
   request, and the same YAML one granularity step longer refuses to start.
4. No process of the tool or of vLLM is left, and the device memory is back where it started.
Prints a JSON verdict; exit 0 when every step passed, 1 otherwise, 3 without a visible GPU.
Usage: python scripts/gpu_acceptance.py --model DIR [--python VLLM_PY] [--dummy-weights] [--via serve|llm]
On these CPU machines the same script runs in CI against the simulated GPU (tests/fakegpu, a TEST DOUBLE:
tests/test_gpu_acceptance.py), with --via llm since the double has no server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from boundary import check as boundary_check  # noqa: E402

from vllm_fit.gpu import Devices  # noqa: E402

STALE_VLLM = """# vllm-fit acceptance: a stale vLLM
import sys, time
from vllm import LLM
LLM(model=sys.argv[1], gpu_memory_utilization=float(sys.argv[2]), max_model_len=1024, enforce_eager=True,
    **({"load_format": "dummy"} if sys.argv[3] == "dummy" else {}))
print("held", flush=True)
time.sleep(3600)
"""
"""A vLLM left running: it holds its weights and KV cache until it is killed (the seed's stale process)."""


def start_stale_vllm(python: str, model: str, fraction: float, dummy: bool, env: Dict[str, str],
                     timeout_s: float) -> subprocess.Popen:
    """Start the stale vLLM in its own session and wait until it holds its memory."""
    holder = subprocess.Popen([python, "-c", STALE_VLLM, model, str(fraction), "dummy" if dummy else "real"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                              start_new_session=True)
    deadline = time.monotonic() + timeout_s
    assert holder.stdout is not None
    while time.monotonic() < deadline:
        line = holder.stdout.readline()
        if line.strip() == "held":
            return holder
        if not line and holder.poll() is not None:
            raise RuntimeError("the stale vLLM did not start (exit %s)" % holder.returncode)
    stop_group(holder)
    raise RuntimeError("the stale vLLM did not start in %.0f s" % timeout_s)


def stop_group(process: subprocess.Popen) -> None:
    """SIGKILL a child's whole session and reap it."""
    with contextlib.suppress(ProcessLookupError):  # already gone: nothing to kill
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def nvml_side(devices_before: Devices, env: Dict[str, str]) -> Dict[str, Any]:
    """Step 1 with the stale vLLM running: its memory seen as another process's, the cap lowered."""
    busy, before = Devices(env, 1).preflight, devices_before.preflight
    held_before = sum(p.used_bytes or 0 for p in before.held_by_others)
    held_busy = sum(p.used_bytes or 0 for p in busy.held_by_others)
    cap_before, cap_busy = before.utilization_cap(), busy.utilization_cap()
    return {"holder_seen": held_busy > held_before, "holder_mib": (held_busy - held_before) >> 20,
            "cap_before": cap_before, "cap_busy": cap_busy,
            "cap_lowered": cap_before is not None and cap_busy is not None and cap_busy < cap_before,
            "devices": [d.name for d in busy.devices]}


def run_search(args: argparse.Namespace, work: Path, env: Dict[str, str]) -> Dict[str, Any]:
    """Step 2: the default search, as a user runs it, beside the stale vLLM."""
    out, report = work / "fit.yaml", work / "report.json"
    command = [sys.executable, "-m", "vllm_fit", "search", "--model", args.model, "--python", args.python,
               "--via", args.via, "--granularity", str(args.granularity), "--trial-timeout", str(args.trial_timeout),
               "--out", str(out), "--report", str(report), "--no-cache", "--engine-arg", "enforce_eager=true"]
    if args.dummy_weights:
        command += ["--engine-arg", "load_format=dummy"]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.search_timeout)
    result: Dict[str, Any] = {"exit_code": done.returncode, "wall_s": round(time.monotonic() - started, 1),
                              "stderr_tail": done.stderr.strip().splitlines()[-3:]}
    if report.exists():
        data = json.loads(report.read_text())
        fit = data.get("fit") or {}
        result.update(launches=data.get("launches"), stop=data.get("stop"), fit_max_model_len=fit.get("max_model_len"),
                      fit_engine_args=fit.get("engine_args"),
                      trials=[{"max_model_len": t["engine_args"].get("max_model_len"),
                               "gpu_memory_utilization": t["engine_args"].get("gpu_memory_utilization"),
                               "outcome": t["outcome"], "seconds": t["duration_s"]} for t in data["trials"]])
    result["yaml"] = str(out) if out.exists() else None
    result["ok"] = done.returncode == 0 and out.exists()
    return result


LEFTOVER_MARKERS = ("vllm_fit/probe.py", "vllm.entrypoints.openai", "##boundary", "vllm-fit acceptance")
"""What the command line of a trial, a served trial, a boundary launch or the stale vLLM contains."""
RUN_ENV = "VLLM_FIT_ACCEPTANCE_RUN"
"""Set to this check's own id in every process it starts (trials inherit it): another vLLM on the machine,
a test running beside this one, is not this check's leftover."""


def leftovers(run_id: str) -> List[Dict[str, Any]]:
    """Processes still alive that this check started (any descendant), or that carry its id and whose
    command line names the tool's probe, vLLM's server, a boundary launch or the stale vLLM."""
    found = {child.pid: child for child in psutil.Process().children(recursive=True)}
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info.get("cmdline") or [])
        if process.pid == os.getpid() or not any(marker in cmdline for marker in LEFTOVER_MARKERS):
            continue
        try:
            if process.environ().get(RUN_ENV) == run_id:
                found[process.pid] = process
        except psutil.Error:
            continue  # ended, or not ours to read: not started by this check
    alive = []
    for pid, process in sorted(found.items()):
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append({"pid": pid, "cmdline": " ".join(process.cmdline())[:200]})
        except psutil.Error:
            continue  # it ended while being looked at: not a leftover
    return alive


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local model directory (config.json, tokenizer)")
    parser.add_argument("--python", default=sys.executable, help="the vLLM interpreter")
    parser.add_argument("--hold-fraction", type=float, default=0.4,
                        help="gpu_memory_utilization of the stale vLLM (default 0.4)")
    parser.add_argument("--dummy-weights", action="store_true", help="load_format=dummy everywhere")
    parser.add_argument("--via", choices=("serve", "llm"), default="serve")
    parser.add_argument("--granularity", type=int, default=256)
    parser.add_argument("--trial-timeout", type=float, default=600)
    parser.add_argument("--search-timeout", type=float, default=1800)
    parser.add_argument("--work", type=Path, default=Path("out/gpu-acceptance"))
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    env[RUN_ENV] = uuid.uuid4().hex
    args.work.mkdir(parents=True, exist_ok=True)
    verdict: Dict[str, Any] = {}
    before = Devices(env, 1)
    if not before.preflight.available:
        print(json.dumps({"ok": False, "reason": "no GPU visible: %s" % before.preflight.reason}))
        return 3
    baseline = before.snapshot()
    holder = start_stale_vllm(args.python, args.model, args.hold_fraction, args.dummy_weights, env, 900)
    try:
        verdict["nvml"] = nvml_side(before, env)
        verdict["search"] = run_search(args, args.work, env)
        if verdict["search"]["yaml"]:
            config = yaml.safe_load(Path(verdict["search"]["yaml"]).read_text())
            verdict["outside"] = boundary_check(args.python, config, args.granularity, args.via,
                                                args.trial_timeout, env)
    finally:
        released_from = time.monotonic()
        stop_group(holder)
    waited = before.wait_released(baseline, timeout_s=120)
    verdict["cleanup"] = {"released": bool(waited.get("released")),
                          "release_wait_s": round(time.monotonic() - released_from, 2),
                          "leftover_processes": leftovers(env[RUN_ENV])}
    nvml = verdict["nvml"]
    checks = {"nvml": nvml["holder_seen"] and nvml["cap_lowered"], "search": verdict["search"]["ok"],
              "outside": bool(verdict.get("outside", {}).get("ok")),
              "cleanup": verdict["cleanup"]["released"] and not verdict["cleanup"]["leftover_processes"]}
    verdict["checks"], verdict["ok"] = checks, all(checks.values())
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
