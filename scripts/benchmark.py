"""Benchmark vllm-fit's searches side by side with the usual baselines; prints tables (and Markdown).

Suites:
  length       real vLLM (CPU backend, tiny model): max_model_len at several KV budgets (in 64 KiB
               blocks), predict vs blind bisection vs the doubling loop. True maximum from the CPU
               fit rule: (blocks - 1) x 128 tokens.
  kv-target    real vLLM: --target-len N --search kv-cache-memory: the least KV size, predicted from
               config.json vs found blind (the same search without the model's numbers). True least:
               (ceil(N / 128) + 1) blocks.
  utilization  the fake GPU (TEST DOUBLE, tests/fakes: an 80 GiB device simulated after vLLM's
               accounting, run through the real CLI pipeline, trial processes included): the two-knob
               default objective and --target-len, vs the walk-down from 0.98 in 0.01 steps.
Usage (from the repository root, after `make setup`):
    .venv/bin/python scripts/benchmark.py [--suite length,kv-target,utilization] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dataclasses  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from vllm_fit.fitter import run_search  # noqa: E402
from vllm_fit.prepare import prepare  # noqa: E402
from vllm_fit.prepare.request import Knob, SearchRequest, Strategy  # noqa: E402
from vllm_fit.search.knob import Grid, KvModel  # noqa: E402
from vllm_fit.search.memory import LeastMemoryForLength, WalkDown  # noqa: E402
from vllm_fit.trial.listener import Listener  # noqa: E402

BLOCK_TOKENS, BYTES_PER_TOKEN = 128, 512
BLOCK_BYTES = BLOCK_TOKENS * BYTES_PER_TOKEN
TINY = ROOT / ".cache" / "tiny-llama"
FAKES = ROOT / "tests" / "fakes"
GIB = 1 << 30


class Report:
    """Collects rows per suite and prints them as rich tables and Markdown."""

    def __init__(self):
        self.sections: List[tuple] = []

    def add(self, title: str, columns: List[str], rows: List[List[str]]) -> None:
        self.sections.append((title, columns, rows))
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        Console().print(table)

    def markdown(self) -> str:
        out = []
        for title, columns, rows in self.sections:
            out += ["#### " + title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            out += ["| " + " | ".join(row) + " |" for row in rows]
            out.append("")
        return "\n".join(out)


def _search(request: SearchRequest, autofit: bool = True, objective=None) -> Dict:
    prepared = prepare(request)
    if not autofit:  # the baselines start from the upper bound, not from vLLM's own fit
        prepared = dataclasses.replace(prepared, model=dataclasses.replace(prepared.model, derived_max_len=None))
    started = time.monotonic()
    outcome = run_search(prepared, Listener(), objective=objective(prepared) if objective else None)
    return {"result": outcome.result, "wall_s": time.monotonic() - started}


def _progress(*cells) -> None:
    Console(stderr=True).print("  ".join(str(c) for c in cells), highlight=False)


def suite_length(report: Report, budgets: List[int], granularity: int, env) -> None:
    rows = []
    for blocks in budgets:
        truth = (blocks - 1) * BLOCK_TOKENS
        for name, strategy, autofit in [("predict (auto-fit)", "predict", True),
                                        ("predict (no auto-fit)", "predict", False),
                                        ("bisect", "bisect", False), ("doubling", "doubling", False)]:
            request = SearchRequest(model=str(TINY), python=sys.executable, granularity=granularity,
                                    kv_cache_memory=blocks * BLOCK_BYTES, engine_args={"enforce_eager": True},
                                    strategy=Strategy(strategy), env=env)
            run = _search(request, autofit)
            found = run["result"].fit.length if run["result"].fit else None
            row = ["%d blocks (%d KiB)" % (blocks, blocks * 64), str(truth), name, str(run["result"].launches),
                   "%.0f" % run["wall_s"], str(found), "%.0f%%" % (100.0 * found / truth) if found else "-"]
            _progress(*row)
            rows.append(row)
    report.add("max_model_len at a fixed KV budget: real vLLM 0.32.0, CPU backend, tiny Llama, granularity %d"
               % granularity, ["KV budget", "true max", "strategy", "launches", "wall s", "found", "found / true"],
               rows)


def suite_kv_target(report: Report, targets: List[int], env) -> None:
    granule = 64 << 10
    rows = []
    for target in targets:
        truth = (-(-target // BLOCK_TOKENS) + 1) * BLOCK_BYTES
        for name, blind in [("predict", False), ("blind (no model numbers)", True)]:
            request = SearchRequest(model=str(TINY), python=sys.executable, target_len=target,
                                    search=Knob.KV_CACHE_MEMORY, kv_granularity=granule,
                                    engine_args={"enforce_eager": True}, env=env)

            def blind_objective(prepared, target=target):
                grid = Grid("kv_cache_memory_bytes", float(granule), 1, 1024)  # up to 64 MiB
                return LeastMemoryForLength(grid, target, KvModel(None, None, prepared.regime))

            run = _search(request, objective=blind_objective if blind else None)
            fit = run["result"].fit
            found = fit.llm_kwargs["kv_cache_memory_bytes"] if fit else None
            row = [str(target), "%d KiB" % (truth >> 10), name, str(run["result"].launches), "%.0f" % run["wall_s"],
                   "%d KiB" % (found >> 10) if found else "-", "exact" if found == truth else "off"]
            _progress(*row)
            rows.append(row)
    report.add("Least KV size for a target length (--search kv-cache-memory, 64 KiB granules): real vLLM 0.32.0,"
               " CPU backend, tiny Llama", ["target len", "true least", "strategy", "launches", "wall s", "found",
                                            "verdict"], rows)


WORLDS = {
    "idle, no request overhead": {},
    "request needs 5 GiB headroom": {"request_overhead_gib": 5.0},
    "8 GiB held by another process, 3 GiB headroom": {"request_overhead_gib": 3.0,
                                                      "others": [{"pid": 4242, "name": "jupyter", "gib": 8.0}]},
    "9 GiB headroom, OOM without numbers": {"request_overhead_gib": 9.0, "bare_oom": True},
}
BASE_WORLD = {"version": "0.32.0", "total_gib": 80.0, "others": [], "weights_gib": 50.0, "activation_gib": 2.0,
              "request_overhead_gib": 0.0, "kv_bytes_per_token": 131072, "block_size": 16,
              "derived_max_len": 262144, "release_delay_s": 0.0, "mode": "normal"}
"""A 256k-context model with 50 GiB of weights and 128 KiB of KV per token on an 80 GiB device."""


def suite_utilization(report: Report) -> None:
    """Runs itself again in a child whose PYTHONPATH puts the fakes (vLLM, NVML) first."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        env = dict(os.environ, PYTHONPATH=str(FAKES))
        subprocess.run([sys.executable, __file__, "--inner-utilization", str(out)], env=env, check=True)
        for title, columns, rows in json.loads(out.read_text()):
            report.add(title, columns, rows)


def _true_levels(spec: Dict, target: Optional[int]) -> Dict:
    """Brute force over 0.01 steps: which utilizations start and serve (`target`, or auto-fit, tokens)."""
    import fakegpu

    others = sum(p["gib"] for p in spec["others"]) * GIB
    total = spec["total_gib"] * GIB
    cap = min(0.95, int((total - others) / total * 100) / 100)
    serving = []
    for k in range(1, 101):
        try:
            plan = fakegpu.plan_engine(spec, target or -1, k / 100, None, others)
        except fakegpu.EngineError:
            continue
        if plan["request_ok"]:
            serving.append((k / 100, plan["max_model_len"]))
    capped = [level for level in serving if level[0] <= cap]
    return {"highest": capped[-1] if capped else None, "least": capped[0] if capped else None,
            "limit": serving[-1][0] if serving else None, "cap": cap}


def _verdict(got, want, truth) -> str:
    if got is None:
        return "no answer" if want else "right: nothing serves"
    if truth["limit"] is None or got[0] > truth["limit"]:
        return "WRONG: above the limit, its request runs out of memory"
    if got == want:
        return "right"
    if got[0] > truth["cap"]:
        return "serves, but above --max-utilization %.2f" % truth["cap"]
    return "serves, not the answer"


def inner_utilization(out: Path) -> None:
    sys.path.insert(0, str(FAKES))
    model = Path(tempfile.mkdtemp()) / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "hidden_size": 4096,
        "head_dim": 128, "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}))
    sections = []
    for objective_name, target in [("default: highest utilization, then the longest length", None),
                                   ("--target-len 131072: least utilization", 131072)]:
        rows = []
        for world_name, overrides in WORLDS.items():
            state = Path(tempfile.mkdtemp())
            spec = dict(BASE_WORLD, state_dir=str(state), **overrides)
            (state / "world.json").write_text(json.dumps(spec))
            os.environ["FAKE_GPU_WORLD"] = str(state / "world.json")
            truth = _true_levels(spec, target)
            want = truth["least" if target else "highest"]
            for name, walk in [("vllm-fit", False), ("walk-down from 0.98", True)]:
                length = target or (want[1] if want else 8192)
                request = SearchRequest(model=str(model), python=sys.executable, target_len=target,
                                        env=dict(os.environ), retries=0 if walk else 2, retry_wait=0.5)
                run = _search(request, objective=(lambda p, n=length: WalkDown(n)) if walk else None)
                fit = run["result"].fit
                got = (fit.llm_kwargs.get("gpu_memory_utilization"), fit.length) if fit else None
                verdict = _verdict(got, want, truth)
                rows.append([world_name, name, str(run["result"].launches),
                             "%.2f / %s" % got if got else "-", "%.2f / %s" % want if want else "-", verdict])
                _progress(*rows[-1])
        sections.append(("%s (fake 80 GiB GPU, TEST DOUBLE of vLLM's accounting)" % objective_name,
                         ["world", "strategy", "launches", "found util / len", "true util / len", "verdict"], rows))
    out.write_text(json.dumps(sections))


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="length,kv-target,utilization")
    parser.add_argument("--budgets", default="33,40,57,100,203", help="KV budgets in blocks (length suite)")
    parser.add_argument("--targets", default="1000,4096,10000,25000", help="target lengths (kv-target suite)")
    parser.add_argument("--granularity", type=int, default=128)
    parser.add_argument("--markdown", help="also write the tables as Markdown to this file")
    parser.add_argument("--inner-utilization", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner_utilization:
        inner_utilization(Path(args.inner_utilization))
        return 0
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING=os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"))
    report = Report()
    suites = args.suite.split(",")
    if "length" in suites:
        suite_length(report, [int(b) for b in args.budgets.split(",")], args.granularity, env)
    if "kv-target" in suites:
        suite_kv_target(report, [int(t) for t in args.targets.split(",")], env)
    if "utilization" in suites:
        suite_utilization(report)
    if args.markdown:
        Path(args.markdown).write_text(report.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
