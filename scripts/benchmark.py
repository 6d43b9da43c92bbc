"""Benchmark the search strategies side by side on real vLLM (CPU backend, the tiny model).

For each KV budget (in 64 KiB blocks of the tiny model) every strategy runs a full search; the
table shows launches, wall time and the length found against the true maximum, which the CPU fit
rule gives exactly: (blocks - 1) x 128 tokens. Usage (from the repository root, after `make setup`):

    .venv/bin/python scripts/benchmark.py [--budgets 33,40,57,100,203] [--granularity 128]
                                          [--markdown BENCHMARKS-table.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from vllm_fit.fitter import SearchRequest, prepare, run_search  # noqa: E402
from vllm_fit.study import Listener  # noqa: E402

BLOCK_TOKENS, BYTES_PER_TOKEN = 128, 512
STRATEGIES = [("predict", True), ("predict", False), ("bisect", False), ("doubling", False)]


def true_max(blocks: int, max_len: int) -> int:
    """The CPU fit rule (vllm-cpu.md): one block is vLLM's null block."""
    return min(max_len, (blocks - 1) * BLOCK_TOKENS)


def run_one(model: Path, blocks: int, strategy: str, autofit: bool, granularity: int, env) -> dict:
    request = SearchRequest(model=str(model), python=sys.executable, granularity=granularity,
                            kv_cache_memory_bytes=blocks * BLOCK_TOKENS * BYTES_PER_TOKEN,
                            engine_args={"enforce_eager": True}, strategy=strategy, env=env)
    prepared = prepare(request)
    prepared.use_autofit = autofit and prepared.use_autofit
    started = time.monotonic()
    outcome = run_search(prepared, Listener())
    fit = outcome.result.fit
    return {"launches": outcome.result.launches, "wall_s": time.monotonic() - started,
            "found": fit.length if fit else None}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="33,40,57,100,203", help="KV budgets in blocks")
    parser.add_argument("--granularity", type=int, default=128)
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    parser.add_argument("--model", default=str(ROOT / ".cache" / "tiny-llama"))
    args = parser.parse_args(argv)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING=os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"))
    table = Table(title="vllm-fit search strategies on vLLM %s (CPU backend, tiny Llama, granularity %d)"
                  % ("0.32.0", args.granularity))
    columns = ["KV budget", "true max", "strategy", "launches", "wall s", "found", "found / true"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("strategy", "KV budget") else "right")
    rows = []
    for blocks in [int(b) for b in args.budgets.split(",")]:
        truth = true_max(blocks, 32768)
        for strategy, autofit in STRATEGIES:
            name = strategy + (" (auto-fit)" if autofit else "" if strategy != "predict" else " (no auto-fit)")
            result = run_one(Path(args.model), blocks, strategy, autofit, args.granularity, env)
            found = result["found"]
            ratio = "%.0f%%" % (100.0 * found / truth) if found else "-"
            row = ["%d blocks (%d KiB)" % (blocks, blocks * 64), str(truth), name, str(result["launches"]),
                   "%.0f" % result["wall_s"], str(found), ratio]
            rows.append(row)
            table.add_row(*row)
            Console(stderr=True).print("  ".join(row), highlight=False)
    Console().print(table)
    if args.markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
