"""The simulator suite of scripts/benchmark.py: vllm-fit and the hand baselines in every simulated world.

TEST DOUBLE: the worlds are tests/simulator (the vendored fakegpu plays vLLM 0.5-0.34 on NVIDIA GPUs).
vllm-fit runs for real (CLI, trial processes, log parsing); the baselines are played against the
same memory model, one start() plus one full-length request per launch.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from simulator.baselines import BASELINES  # noqa: E402
from simulator.harness import Answer, run_tool, score, truth  # noqa: E402
from simulator.random_worlds import INDIRECT_KINDS as KINDS  # noqa: E402
from simulator.worlds import Case, cases  # noqa: E402

RANGES = [("V0 (0.5-0.7, fallback)", lambda c: c.world.get("engine") == "v0" or _v(c) < (0, 8)),
          ("V1 0.8-0.9.0", lambda c: (0, 8) <= _v(c) < (0, 9, 1)),
          ("V1 0.9.1-0.13", lambda c: (0, 9, 1) <= _v(c) < (0, 14)),
          ("V1 0.14-0.28 (auto-fit)", lambda c: (0, 14) <= _v(c) < (0, 29)),
          ("V1 0.29-0.34 (null block)", lambda c: _v(c) >= (0, 29))]
Row = Dict[str, object]


def _v(case: Case) -> Tuple[int, ...]:
    return tuple(int(p) for p in case.world["vllm_version"].split(".post")[0].split(".")[:3])


def _baseline_answer(case: Case, run: Callable) -> Tuple[Answer, float]:
    fit, launches = run(case)
    if fit is None:
        return Answer(1, None, None, None, launches, 0.0), 0.0
    length, utilization = fit
    kv = case.question.get("kv_cache_memory")
    return Answer(0, length, utilization if kv is None else None, kv, launches, 0.0), 0.0


def _show(answer: Answer) -> str:
    if answer.length is None:
        return "none (exit %d)" % answer.exit_code
    knob = "U %.2f" % answer.utilization if answer.utilization is not None else \
        "kv %d MiB" % (answer.kv_bytes >> 20) if answer.kv_bytes is not None else ""
    return "%d @ %s" % (answer.length, knob)


def _truth_text(expected: Dict) -> str:
    fit = expected.get("fit")
    if not fit:
        return "nothing fits"
    knob = fit.get("gpu_memory_utilization")
    return "%d @ %s" % (fit["max_model_len"], "U %.2f" % knob if knob is not None else
                        "kv %d MiB" % ((fit.get("kv_cache_memory_bytes") or 0) >> 20))


def run_suite(progress: Callable[..., None], only: Optional[str] = None, worlds: Optional[List[Case]] = None,
              title: str = "Simulated GPUs", every_world: bool = True,
              kinds: bool = False) -> List[Tuple[str, List[str], List[List[str]]]]:
    """Per world and strategy one row; then the summary by version range and the overall one.

    worlds: the named worlds of tests/simulator/worlds.py unless given (the random suite draws its own);
    every_world: also the table of every world and strategy (else vllm-fit's rows only).
    """
    rows: List[Row] = []
    for case in cases() if worlds is None else worlds:
        if only and only not in case.name:
            continue
        expected = truth(case)
        with tempfile.TemporaryDirectory() as tmp:
            answers = {"vllm-fit": run_tool(case, Path(tmp), extra=["--trial-timeout", "5"])}
        for name, baseline in BASELINES.items():
            answers[name] = _baseline_answer(case, baseline)[0]
        for name, answer in answers.items():
            verdict = score(case, answer, expected)
            row = {"case": case, "strategy": name, "answer": answer, "right": verdict.right,
                   "above": verdict.above_limit, "verdict": verdict.verdict, "truth": _truth_text(expected)}
            rows.append(row)
            progress(case.name, name, answer.launches, _show(answer), verdict.verdict)
    per_world = [[r["case"].name, r["case"].world["vllm_version"], str(r["truth"]), str(r["strategy"]),  # type: ignore
                  str(r["answer"].launches), "%.0f" % r["answer"].trial_s, _show(r["answer"]),  # type: ignore
                  str(r["verdict"])] for r in rows if every_world or r["strategy"] == "vllm-fit"]
    summary = []
    for label, member in [*RANGES, ("all worlds", lambda c: True)]:
        for strategy in ["vllm-fit", *BASELINES]:
            chosen = [r for r in rows if r["strategy"] == strategy and member(r["case"])]
            if chosen:
                summary.append([label, strategy, *_stats(chosen)])
    objectives = []
    kind_rows = [(kind, lambda c, kind=kind: kind in c.tags) for kind in KINDS] if kinds else []
    for label, member in [*kind_rows, ("default (highest U, longest L)", _default), ("memory knob fixed", _fixed),
                          ("--target-len", lambda c: "target_len" in c.question),
                          ("nothing fits", lambda c: not truth(c).get("fit"))]:
        chosen = [r for r in rows if r["strategy"] == "vllm-fit" and member(r["case"])]
        if chosen:
            objectives.append([label, *_stats(chosen)])
    stat_columns = ["worlds", "right", "above the limit", "median launches", "p90", "max", "trial s (summed)"]
    return [("%s: the summary by vLLM version range" % title, ["version range", "strategy", *stat_columns],
             summary),
            ("%s: vllm-fit by objective" % title, ["objective", *stat_columns], objectives),
            ("%s: every world" % title, ["world", "vLLM", "truth (L @ knob)", "strategy", "launches", "trial s",
                                         "answer", "verdict"], per_world)]


def _default(case: Case) -> bool:
    q = case.question
    return not any(k in q for k in ("gpu_memory_utilization", "kv_cache_memory", "target_len")) and bool(
        truth(case).get("fit"))


def _fixed(case: Case) -> bool:
    return "gpu_memory_utilization" in case.question or "kv_cache_memory" in case.question


def _stats(rows: List[Row]) -> List[str]:
    launches = sorted(r["answer"].launches for r in rows)  # type: ignore
    p90 = launches[min(len(launches) - 1, round(0.9 * (len(launches) - 1)))]
    trial_s = sum(r["answer"].trial_s for r in rows)  # type: ignore
    return [str(len(rows)), "%d/%d" % (sum(bool(r["right"]) for r in rows), len(rows)),
            str(sum(bool(r["above"]) for r in rows)), "%g" % statistics.median(launches), str(p90),
            str(launches[-1]), "%.0f" % trial_s]
