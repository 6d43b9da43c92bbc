"""Seconds per trial on real vLLM (CPU backend): served (`--via serve`) against offline (`--via llm`),
and dummy weights against real ones for a model whose weights are large enough to show the load.

    .venv/bin/python scripts/bench_trials.py [--repeat N]

Each trial is one launch of the 40-block tiny model at max_model_len 4992 through the tool's own
launch path (`run_trial`), full-length request included. The heavy model is the tiny one with a
4M-token vocabulary (the same 512 bytes of KV per token, 2 GiB of bf16 embeddings; only the
last position's logits are computed, so the trial's compute barely grows), made once under .cache/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from conftest import BLOCK_BYTES, plan_for  # noqa: E402

from vllm_fit.prepare.request import Via  # noqa: E402
from vllm_fit.trial.run import run_trial  # noqa: E402
from vllm_fit.trial.runner import trial_environment  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
TINY = ROOT / ".cache" / "tiny-llama"
HEAVY = ROOT / ".cache" / "heavy-llama"
MAKE_HEAVY = """
import json, shutil, sys, torch
from pathlib import Path
from transformers import LlamaConfig, LlamaForCausalLM
src, out = Path(sys.argv[1]), Path(sys.argv[2])
config = json.loads((src / "config.json").read_text())
config["vocab_size"], config["tie_word_embeddings"] = 1 << 22, False  # weights, hardly any compute
model = LlamaForCausalLM(LlamaConfig(**config)).to(torch.bfloat16)
model.save_pretrained(str(out), safe_serialization=True)
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    if (src / name).exists():
        shutil.copy(src / name, out / name)
"""


def heavy_model() -> Path:
    if not (HEAVY / "config.json").exists():
        subprocess.run([PYTHON, "-c", MAKE_HEAVY, str(TINY), str(HEAVY)], check=True)
    return HEAVY


def seconds(model: Path, via: Via, load_format, repeat: int, work: Path, env) -> list:
    plan = dataclasses.replace(plan_for(PYTHON, work, 600, env, block_size=128), via=via)
    kwargs = {"model": str(model), "max_model_len": 4992, "kv_cache_memory_bytes": 40 * BLOCK_BYTES,
              "enforce_eager": True}
    if load_format:
        kwargs["load_format"] = load_format
    times = []
    for i in range(repeat):
        record = run_trial(plan, len(list(work.glob("trial-*"))) + 1 + i, kwargs)
        assert record.outcome.value == "ok", record.detail
        times.append(record.duration_s)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_ENABLE_V1_MULTIPROCESSING="0")
    env.pop("PYTHONPATH", None)
    env = trial_environment(env)
    heavy = heavy_model()
    size = sum(f.stat().st_size for f in heavy.glob("*.safetensors"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, via, load in [("tiny", TINY, Via.LLM, None), ("tiny", TINY, Via.SERVE, None),
                                       ("heavy", heavy, Via.LLM, None), ("heavy", heavy, Via.LLM, "dummy"),
                                       ("heavy", heavy, Via.SERVE, None), ("heavy", heavy, Via.SERVE, "dummy")]:
            times = seconds(model, via, load, args.repeat, Path(tmp) / ("%s-%s-%s" % (name, via.value, load)), env)
            rows.append({"model": name, "via": via.value, "weights": load or "real", "seconds": times,
                         "median_s": statistics.median(times)})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| model | via | weights | median s per trial | runs |\n|---|---|---|---|---|")
    for row in rows:
        print("| %s | %s | %s | %.1f | %s |" % (row["model"], row["via"], row["weights"], row["median_s"],
                                               ", ".join("%.1f" % t for t in row["seconds"])))
    print("\nheavy model: %.2f GiB of bf16 weights" % (size / 2**30))
    return 0


if __name__ == "__main__":
    sys.exit(main())
