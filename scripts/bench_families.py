"""Launches and answers per attention kind on real vLLM (CPU backend), for one checkout of vllm-fit.

The tiny family models of scripts/make_family_models.py (MLA, Llama 4's chunked local layers, mamba2 and
gated DeltaNet hybrids, Gemma 2), each question on both entry points; run it once with this checkout and
once with an older one (`--root`) to put the two side by side. Every case runs the CLI as users do.
Usage: .venv/bin/python scripts/bench_families.py [--root CHECKOUT] [--markdown FILE]
Another vLLM version: run it with that environment's interpreter (.cache/vllm-envs/0.28.0/bin/python).
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
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / ".cache" / "families"
OFF = ("--engine-arg", "enable_prefix_caching=false")
CASES: List[Tuple[str, str, str, Tuple[str, ...]]] = [
    ("DeepSeek-V2 (MLA), 2.5 MiB", "deepseek_v2", "llm", ("--kv-cache-memory", "2621440")),
    ("DeepSeek-V2 (MLA), 2.5 MiB", "deepseek_v2", "serve", ("--kv-cache-memory", "2621440")),
    ("DeepSeek-V2, least KV for 1000", "deepseek_v2", "llm", ("--target-len", "1000", "--search",
                                                             "kv-cache-memory", "--kv-granularity", "36KiB")),
    ("Llama 4 (chunked local), 6 MiB", "llama4", "llm", ("--kv-cache-memory", "6MiB")),
    ("Llama 4 (chunked local), 6 MiB", "llama4", "serve", ("--kv-cache-memory", "6MiB")),
    ("Llama 4, least KV for 8000", "llama4", "llm", ("--target-len", "8000", "--search", "kv-cache-memory",
                                                     "--kv-granularity", "32KiB")),
    ("Granite 4.0-H (mamba2), 6 MiB, no prefix caching", "granite4h", "llm", ("--kv-cache-memory", "6MiB", *OFF)),
    ("Granite 4.0-H (mamba2), 6 MiB, no prefix caching", "granite4h", "serve", ("--kv-cache-memory", "6MiB", *OFF)),
    ("Granite 4.0-H, least KV for 20000, no prefix caching", "granite4h", "llm",
     ("--target-len", "20000", "--search", "kv-cache-memory", "--kv-granularity", "32KiB", *OFF)),
    ("Granite 4.0-H, 131 KiB state (640-token blocks)", "granite4h_wide", "llm", ("--kv-cache-memory", "6MiB", *OFF)),
    ("Granite 4.0-H, prefix caching on (crashes)", "granite4h", "serve", ("--kv-cache-memory", "6MiB")),
    ("Nemotron-H (M-M*), 6 MiB, no prefix caching", "nemotron_h", "llm", ("--kv-cache-memory", "6MiB", *OFF)),
    ("Nemotron-H (M-M*), 6 MiB, no prefix caching", "nemotron_h", "serve", ("--kv-cache-memory", "6MiB", *OFF)),
    ("Falcon-H1 (attention and mamba2 in each layer), 6 MiB, no prefix caching", "falcon_h1", "llm",
     ("--kv-cache-memory", "6MiB", *OFF)),
    ("Falcon-H1 (attention and mamba2 in each layer), 6 MiB, no prefix caching", "falcon_h1", "serve",
     ("--kv-cache-memory", "6MiB", *OFF)),
    ("Falcon-H1, least KV for 20000, no prefix caching", "falcon_h1", "llm",
     ("--target-len", "20000", "--search", "kv-cache-memory", "--kv-granularity", "128KiB", *OFF)),
    ("Zamba2 (mamba2 in each layer, shared attention), 6 MiB, no prefix caching", "zamba2", "llm",
     ("--kv-cache-memory", "6MiB", *OFF)),
    ("Zamba2 (mamba2 in each layer, shared attention), 6 MiB, no prefix caching", "zamba2", "serve",
     ("--kv-cache-memory", "6MiB", *OFF)),
    ("Zamba2, least KV for 20000, no prefix caching", "zamba2", "llm",
     ("--target-len", "20000", "--search", "kv-cache-memory", "--kv-granularity", "128KiB", *OFF)),
    ("LFM2 (short convolutions), 6 MiB, no prefix caching", "lfm2", "llm", ("--kv-cache-memory", "6MiB", *OFF)),
    ("LFM2 (short convolutions), 6 MiB, no prefix caching", "lfm2", "serve", ("--kv-cache-memory", "6MiB", *OFF)),
    ("LFM2, 6 MiB, prefix caching on", "lfm2", "serve", ("--kv-cache-memory", "6MiB")),
    ("LFM2, least KV for 20000, prefix caching on", "lfm2", "llm",
     ("--target-len", "20000", "--search", "kv-cache-memory", "--kv-granularity", "32KiB")),
    ("Qwen3-Next (gated DeltaNet), 6 MiB", "qwen3_next", "llm", ("--kv-cache-memory", "6MiB")),
    ("Qwen3-Next (gated DeltaNet), 6 MiB", "qwen3_next", "serve", ("--kv-cache-memory", "6MiB")),
    ("Qwen3-Next, least KV for 15000", "qwen3_next", "llm", ("--target-len", "15000", "--search", "kv-cache-memory",
                                                             "--kv-granularity", "160KiB")),
    ("Gemma 2 (sliding and full groups), 6 MiB", "gemma2", "llm", ("--kv-cache-memory", "6MiB")),
    ("Gemma 3 (five sliding groups, one full), 6 MiB", "gemma3", "llm", ("--kv-cache-memory", "6MiB")),
    ("Gemma 3 (five sliding groups, one full), 6 MiB", "gemma3", "serve", ("--kv-cache-memory", "6MiB")),
    ("Gemma 2, least KV for 4000", "gemma2", "llm", ("--target-len", "4000", "--search", "kv-cache-memory",
                                                     "--kv-granularity", "32KiB")),
    ("Gemma 4 (global heads twice as wide), 6 MiB", "gemma4", "llm", ("--kv-cache-memory", "6MiB")),
    ("Gemma 4 (global heads twice as wide), 6 MiB", "gemma4", "serve", ("--kv-cache-memory", "6MiB")),
    ("Gemma 4, least KV for 3000", "gemma4", "llm", ("--target-len", "3000", "--search", "kv-cache-memory",
                                                     "--kv-granularity", "64KiB")),
    ("Gemma 4 (KV-shared layers, K = V global heads), 6 MiB", "gemma4_shared", "llm", ("--kv-cache-memory", "6MiB")),
    ("Gemma 4 (KV-shared layers, K = V global heads), 6 MiB", "gemma4_shared", "serve", ("--kv-cache-memory", "6MiB")),
    ("Gemma 3n (KV-shared layers), 6 MiB", "gemma3n", "llm", ("--kv-cache-memory", "6MiB")),
    ("Gemma 3n (KV-shared layers), 6 MiB", "gemma3n", "serve", ("--kv-cache-memory", "6MiB")),
    ("LFM2-MoE, 6 MiB, no prefix caching", "lfm2_moe", "llm", ("--kv-cache-memory", "6MiB", *OFF)),
    ("LFM2-MoE, 6 MiB, prefix caching on", "lfm2_moe", "serve", ("--kv-cache-memory", "6MiB")),
    ("Jamba (mamba layers; its requests crash the CPU kernel), 6 MiB, no prefix caching", "jamba", "llm",
     ("--kv-cache-memory", "6MiB", *OFF)),
    ("MiniCPM3 (MLA projections, full K/V cached), 2.5 MiB", "minicpm3", "llm", ("--kv-cache-memory", "2621440")),
    ("MiniCPM3 (MLA projections, full K/V cached), 2.5 MiB", "minicpm3", "serve", ("--kv-cache-memory", "2621440")),
    ("MiniCPM3, least KV for 1000", "minicpm3", "llm", ("--target-len", "1000", "--search", "kv-cache-memory",
                                                        "--kv-granularity", "256KiB")),
    ("LongCat-Flash (two MLA sublayers a layer; CPU lacks its router kernel), 6 MiB", "longcat_flash", "serve",
     ("--kv-cache-memory", "6MiB")),
    ("LongCat-Flash, least KV for 1000", "longcat_flash", "llm", ("--target-len", "1000", "--search",
                                                                  "kv-cache-memory", "--kv-granularity", "72KiB")),
    ("Falcon (multi-query), 2.5 MiB", "falcon", "llm", ("--kv-cache-memory", "2560KiB")),
    ("Falcon (multi-query), 2.5 MiB", "falcon", "serve", ("--kv-cache-memory", "2560KiB")),
    ("Falcon (multi-query), least KV for 4000", "falcon", "llm", ("--target-len", "4000", "--search",
                                                                   "kv-cache-memory", "--kv-granularity", "32KiB")),
    ("StarCoder (multi-query, GPT-2's names), 2.5 MiB", "gpt_bigcode", "llm", ("--kv-cache-memory", "2560KiB")),
    ("StarCoder (multi-query, GPT-2's names), 2.5 MiB", "gpt_bigcode", "serve", ("--kv-cache-memory", "2560KiB")),
    ("StarCoder (multi-query, GPT-2's names), least KV for 4000", "gpt_bigcode", "llm",
     ("--target-len", "4000", "--search", "kv-cache-memory", "--kv-granularity", "32KiB")),
]


def run_case(root: Path, family: str, via: str, args: Tuple[str, ...], work: Path, index: int) -> List[str]:
    """One search through the CLI of the checkout at `root`: [launches, answer, stop, wall s]."""
    report = work / ("case-%d.json" % index)
    env = dict(os.environ, PYTHONPATH=str(root), VLLM_FIT_CACHE_DIR=str(work / "cache"), VLLM_TARGET_DEVICE="cpu")
    if via == "llm":
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    started = time.monotonic()
    granularity = () if "--target-len" in args else ("--granularity", "1")  # a least-KV search takes none
    done = subprocess.run([sys.executable, "-m", "vllm_fit", "search", "--model", str(FAMILIES / family),
                           "--engine-arg", "enforce_eager=true", "--via", via, "--no-cache", "--report", str(report),
                           *granularity, *args], env=env, capture_output=True, text=True, timeout=1800, cwd=str(work))
    wall = time.monotonic() - started
    if not report.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return ["0", "refused (exit %d): %s" % (done.returncode, last[:160].replace("|", "/")), "-", "%.0f" % wall]
    data = json.loads(report.read_text())
    fit = data.get("fit") or {}
    answer = fit.get("kv_cache_memory_bytes") if "--target-len" in args else fit.get("max_model_len")
    if answer is not None and "--target-len" in args:
        answer = "%d KiB" % (answer >> 10)
    outcomes = ",".join(trial["outcome"] for trial in data["trials"])
    return [str(data["launches"]), str(answer) if answer is not None else "none (%s)" % outcomes, data["stop"],
            "%.0f" % wall]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the vllm-fit checkout to measure")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--only", help="only the questions whose title contains this")
    args = parser.parse_args()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_family_models.py"), str(FAMILIES),
                    str(ROOT / ".cache" / "tiny-llama")], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for index, (title, family, via, extra) in enumerate(CASES):
            if args.only and args.only not in title:
                continue
            row = [title, via, *run_case(args.root.resolve(), family, via, extra, Path(work), index)]
            print("  ".join(row), file=sys.stderr, flush=True)
            rows.append(row)
    lines = ["| question | via | launches | answer | stop | wall s |", "|---|---|---|---|---|---|"]
    lines += ["| %s |" % " | ".join(row) for row in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
