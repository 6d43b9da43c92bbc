"""Benchmark vllm-fit's searches side by side with the usual baselines; prints tables (and Markdown).

Suites:
  length       real vLLM (CPU backend, tiny model): max_model_len at several KV budgets (in 64 KiB
               blocks), predict vs blind bisection vs the doubling loop. True maximum from the CPU
               fit rule: (blocks - 1) x 128 tokens.
  kv-target    real vLLM: --target-len N --search kv-cache-memory: the least KV size, predicted from
               config.json vs found blind (the same search without the model's numbers). True least:
               (ceil(N / 128) + 1) blocks.
  simulator    simulated GPUs (TEST DOUBLE, tests/simulator over the vendored fakegpu): every world
               of every vLLM version range, vllm-fit (real CLI, trial processes) against the hand
               baselines (walk-down from 0.98, doubling at 0.9, blind bisection over both knobs).
  random       the same over --random-count worlds drawn with --random-seed (random_worlds.py):
               versions, devices, models, memory figures and questions nobody chose.
  hybrid       the same with sliding-window and hybrid-attention families on V1.
  oldest       the same on vLLM 0.4.0-0.5.3 only (the releases before the random suite's first).
  latent       the same with MLA families (DeepSeek V2 and V3 layouts) on vLLM 0.8.5-0.34.
  state        the same with mamba2 and gated DeltaNet hybrids (Granite 4.0-H, Nemotron-H, Qwen3-Next) on 0.29-0.34.
  indirect     the same with worlds where vLLM's numbers are indirect: pools that shrink with the
               length, requests that fail far below the pool, request OOM beside another process,
               starts that hang above some length (a quarter each).
Usage (from the repository root, after `make setup`):
    .venv/bin/python scripts/benchmark.py [--suite length,kv-target,simulator,random,hybrid] [--world NAME]
        [--random-seed S --random-count N] [--markdown FILE]   (also: --suite random,hybrid,indirect,latent,state)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import dataclasses  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from vllm_fit.fitter import run_search  # noqa: E402
from vllm_fit.prepare import prepare  # noqa: E402
from vllm_fit.prepare.request import Knob, SearchRequest, Strategy  # noqa: E402
from vllm_fit.strategies.knob import Grid, KvModel  # noqa: E402
from vllm_fit.strategies.memory import LeastMemoryForLength  # noqa: E402
from vllm_fit.trial.listener import Listener  # noqa: E402

BLOCK_TOKENS, BYTES_PER_TOKEN = 128, 512
BLOCK_BYTES = BLOCK_TOKENS * BYTES_PER_TOKEN
TINY = ROOT / ".cache" / "tiny-llama"
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


def suite_simulator(report: Report, only: Optional[str]) -> None:
    """Simulated GPUs (TEST DOUBLE): see scripts/bench_simulator.py."""
    from bench_simulator import run_suite

    for title, columns, rows in run_suite(_progress, only):
        report.add(title, columns, rows)


def suite_random(report: Report, seed: int, count: int, only: Optional[str], hybrid: bool = False,
                 oldest: bool = False, latent: bool = False, state: bool = False) -> None:
    """Simulated GPUs in seeded random worlds (TEST DOUBLE): the summaries and vllm-fit's every answer;
    `hybrid`: sliding-window and hybrid-attention families on V1; `oldest`: vLLM 0.4.0-0.5.3 only; `latent`:
    MLA families (DeepSeek V2 and V3 layouts, issue 30); `state`: mamba2 and gated DeltaNet hybrids (issue 30)."""
    from bench_simulator import run_suite
    from simulator.random_worlds import OLDEST_VERSIONS, random_cases

    kind = "Random sliding-window and hybrid" if hybrid else "Random vLLM 0.4.0-0.5.3" if oldest else \
        "Random MLA" if latent else "Random state-hybrid" if state else "Random"
    title = "%s simulated GPUs (seed %d, %d worlds)" % (kind, seed, count)
    cases = random_cases(seed, count, hybrid, OLDEST_VERSIONS if oldest else None, latent, state)
    for table, columns, rows in run_suite(_progress, only, cases, title,
                                          every_world=False):
        report.add(table, columns, rows)


def suite_indirect(report: Report, seed: int, count: int, only: Optional[str]) -> None:
    """Simulated GPUs where vLLM's numbers are indirect (TEST DOUBLE, issue 31): pools that shrink with the
    length, requests that fail far below the pool, request OOM beside another process, hangs at the boundary."""
    from bench_simulator import run_suite
    from simulator.random_worlds import indirect_cases

    title = "Indirect simulated GPUs (seed %d, %d worlds)" % (seed, count)
    for table, columns, rows in run_suite(_progress, only, indirect_cases(seed, count), title, every_world=False,
                                          kinds=True):
        report.add(table, columns, rows)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="length,kv-target,simulator")
    parser.add_argument("--world", help="simulator suite: only worlds whose name contains this")
    parser.add_argument("--budgets", default="33,40,57,100,203", help="KV budgets in blocks (length suite)")
    parser.add_argument("--targets", default="1000,4096,10000,25000", help="target lengths (kv-target suite)")
    parser.add_argument("--granularity", type=int, default=128)
    parser.add_argument("--random-seed", type=int, default=20261203, help="random suite: the seed of its worlds")
    parser.add_argument("--random-count", type=int, default=100, help="random suite: how many worlds")
    parser.add_argument("--markdown", help="also write the tables as Markdown to this file")
    args = parser.parse_args(argv)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING=os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"))
    report = Report()
    suites = args.suite.split(",")
    if "length" in suites:
        suite_length(report, [int(b) for b in args.budgets.split(",")], args.granularity, env)
    if "kv-target" in suites:
        suite_kv_target(report, [int(t) for t in args.targets.split(",")], env)
    if "simulator" in suites:
        suite_simulator(report, args.world)
    if "random" in suites:
        suite_random(report, args.random_seed, args.random_count, args.world)
    if "hybrid" in suites:
        suite_random(report, args.random_seed, args.random_count, args.world, hybrid=True)
    if "oldest" in suites:
        suite_random(report, args.random_seed, args.random_count, args.world, oldest=True)
    if "latent" in suites:
        suite_random(report, args.random_seed, args.random_count, args.world, latent=True)
    if "state" in suites:
        suite_random(report, args.random_seed, args.random_count, args.world, state=True)
    if "indirect" in suites:
        suite_indirect(report, args.random_seed, args.random_count, args.world)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(report.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
