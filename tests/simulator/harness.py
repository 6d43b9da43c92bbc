"""Run the real vllm-fit CLI in a simulated world and score its answer against the fakegpu's truth().

TEST DOUBLE: trials import the fake vllm (tests/fakegpu/pkg) and the tool's NVML queries reach the
fake pynvml; the search, the trial processes, the log parsing and the report are the product's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from .worlds import Case, config_json

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import fake_worlds  # noqa: E402  (the shared fakegpu: its paths, environment and memory model)

_fakeworld = fake_worlds.fakeworld  # the ground truth

FLAGS = {"min_len": "--min-len", "max_len": "--max-len", "granularity": "--granularity",
         "tensor_parallel_size": "--tensor-parallel-size", "gpu_memory_utilization": "--gpu-memory-utilization",
         "kv_cache_memory": "--kv-cache-memory", "target_len": "--target-len", "max_utilization": "--max-utilization"}
LENGTH_KEYS = ("min_len", "max_len", "granularity")
UNPROVEN = 4
"""vllm-fit's exit code for a verified fit not proven the best (README, exit codes)."""


@dataclass(frozen=True)
class Answer:
    """What one strategy answered in one world."""

    exit_code: int
    length: Optional[int]
    utilization: Optional[float]
    kv_bytes: Optional[int]
    launches: int
    wall_s: float
    stop: str = ""
    trial_s: float = 0.0
    """The trials' own seconds summed (what the launches cost on a GPU, hangs at their timeout)."""


@dataclass(frozen=True)
class Score:
    """An answer against the truth: right, above the limit (its config does not serve), or short."""

    right: bool
    above_limit: bool
    verdict: str


def prepare_world(case: Case, folder: Path) -> Path:
    """Write world.json and the model's config.json into `folder` (a fresh one per run: state lives there)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model").mkdir(exist_ok=True)
    (folder / "model" / "config.json").write_text(json.dumps(config_json(case.world["model"])))
    path = folder / "world.json"
    path.write_text(json.dumps(case.world))
    return path


def environment(world_path: Path) -> Dict[str, str]:
    """The tool's environment in a world: the fakes first on the paths, a private cache."""
    env = fake_worlds.environment(world_path)
    env["XDG_CACHE_HOME"] = str(world_path.parent / "xdg")
    env.pop("VLLM_FIT_CACHE_DIR", None)
    return env


def run_tool(case: Case, folder: Path, extra: List[str] = (), timeout_s: float = 900) -> Answer:
    """`vllm-fit search` in the world; the answer read from its JSON report."""
    world_path = prepare_world(case, folder)
    report = folder / "report.json"
    args = [sys.executable, "-m", "vllm_fit", "search", "--model", str(folder / "model"), "--no-cache",
            "--report", str(report), "--trial-timeout", "20", "--retry-wait", "0.2"]
    for key, value in case.question.items():
        if (key == "min_len" and value == 1) or (key in LENGTH_KEYS and "target_len" in case.question):
            continue  # the tool's defaults; a target length fixes the length
        args += [FLAGS[key], str(value)]
    started = time.monotonic()
    done = subprocess.run([*args, *extra], env=environment(world_path), capture_output=True, text=True,
                          timeout=timeout_s, cwd=str(folder))
    wall = time.monotonic() - started
    if not report.exists():
        return Answer(done.returncode, None, None, None, 0, wall, done.stderr.strip().splitlines()[-1:][0]
                      if done.stderr.strip() else "")
    data = json.loads(report.read_text())
    fit = data.get("fit") or {}
    args_of_fit = fit.get("engine_args") or {}
    trial_s = sum(float(t.get("duration_s") or 0) for t in data.get("trials") or [])
    return Answer(done.returncode, fit.get("max_model_len"), args_of_fit.get("gpu_memory_utilization"),
                  args_of_fit.get("kv_cache_memory_bytes"), int(data.get("launches") or 0), wall,
                  str(data.get("stop") or ""), trial_s)


def truth(case: Case) -> Dict[str, Any]:
    """The fakegpu's ground truth for the case's question."""
    return _fakeworld.truth(_world(case), dict(case.question))


def serves(case: Case, length: int, utilization: Optional[float], kv_bytes: Optional[int]) -> bool:
    """Whether this configuration starts and serves a full-length request in the world."""
    knob = {"kv_cache_memory_bytes": kv_bytes} if kv_bytes is not None else {"gpu_memory_utilization": utilization}
    return _fakeworld.works(_world(case), length, tensor_parallel_size=case.question.get("tensor_parallel_size", 1),
                            **knob)


def _world(case: Case) -> Dict[str, Any]:
    spec = json.loads(json.dumps(case.world))
    spec.setdefault("adversarial", {})
    spec.pop("adversarial")  # the truth is about memory: hangs, flakes and slow release do not change it
    spec["adversarial"] = {k: v for k, v in case.world.get("adversarial", {}).items()
                           if k in ("capacity_depends_on_len", "hang_when")}
    return spec


def score(case: Case, answer: Answer, expected: Dict[str, Any]) -> Score:
    """Right when it is the truth's fit (or, when nothing fits, when it says so with exit 1)."""
    want = expected.get("fit")
    if want is None:
        ok = answer.length is None and answer.exit_code == 1
        return Score(ok, False, "right: nothing fits" if ok else "WRONG: answered %s" % _show(answer))
    if answer.length is None:
        return Score(False, False, "no answer (exit %d, %s)" % (answer.exit_code, answer.stop))
    above = not serves(case, answer.length, answer.utilization, answer.kv_bytes)
    if above:
        return Score(False, True, "ABOVE THE LIMIT: %s does not serve" % _show(answer))
    cap = case.question.get("max_utilization") or 0.95
    if answer.utilization is not None and answer.utilization > cap + 1e-9:
        return Score(False, False, "serves, but above the cap %.2f: %s" % (cap, _show(answer)))
    same_knob = (answer.utilization == want.get("gpu_memory_utilization") if want.get("gpu_memory_utilization")
                 is not None else True)
    right = same_knob and answer.length == want["max_model_len"]
    if right and answer.exit_code == UNPROVEN:  # the best, verified, but the tool could not prove it
        return Score(True, False, "right (unproven: %s)" % answer.stop)
    return Score(right and answer.exit_code == 0, False, "right" if right else "short: %s, truth %s"
                 % (_show(answer), _show_fit(want)))


def _show(answer: Answer) -> str:
    knob = ("U=%.2f" % answer.utilization if answer.utilization is not None else
            "kv=%s" % answer.kv_bytes if answer.kv_bytes is not None else "")
    return "L=%s %s" % (answer.length, knob)


def _show_fit(fit: Dict[str, Any]) -> str:
    knob = fit.get("gpu_memory_utilization")
    return "L=%s %s" % (fit["max_model_len"], "U=%.2f" % knob if knob is not None else
                        "kv=%s" % fit.get("kv_cache_memory_bytes"))
