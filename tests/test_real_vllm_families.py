"""The model families people serve, on real vLLM (CPU backend, 0.32), with real weights (issues 20, 30).

Each family is a tiny model saved by transformers with its hub config's attention keys
(scripts/make_family_models.py): Gemma 2 (sliding on even layers, no layer_types), Gemma 3 (5:1
layer_types), Phi-3-mini-128k (LongRoPE, original 4096, window 262144), GPT-OSS (sinks, window 128 on
every other layer), Mistral (a window on every layer), Mixtral (experts), Qwen3 and Qwen2 (its window
off, transformers 5's layer_types), Llama 4 text (chunked local attention on three layers of four) and
DeepSeek-V2 (MLA: one 576-wide latent a token and layer, 16-token blocks on the CPU, 36 KiB a block).
One layer's page is otherwise 32 KiB a block; vLLM groups the layers by attention type
(kv_groups.py), so the same KV bytes hold a different length in each family.

Every answer below was checked outside the tool once (2026-12-04; Llama 4 and DeepSeek-V2 2026-12-05):
vLLM itself served L and refused L + 1 at the same KV size (`scripts/boundary.py --via llm`, one launch
each); the served answers were checked the same way with `--via serve`. The launch counts are the tool's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.vllm

KV_40_BLOCKS = 40 * 128 * 512  # 2.5 MiB: 40 blocks of the tiny Llama, 80 one-layer pages
KV_6MIB = 6 << 20


@pytest.fixture(scope="session")
def families(vllm_python, tiny_model) -> Path:
    """The tiny family models (made once, kept under .cache/families)."""
    out = ROOT / ".cache" / "families"
    subprocess.run([vllm_python, str(ROOT / "scripts" / "make_family_models.py"), str(out), str(tiny_model)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def search(vllm_python, model: Path, env, tmp_path, *args, via: str = "llm"):
    report = tmp_path / ("report-%s-%s.json" % (model.name, via))
    done = subprocess.run([vllm_python, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg",
                           "enforce_eager=true", "--via", via, "--no-cache", "--report", str(report),
                           *map(str, args)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(report.read_text())


def trials(report):
    return [(t["engine_args"]["max_model_len"], t["outcome"]) for t in report["trials"]]


@pytest.mark.parametrize("family, expected", [
    ("phi3", 4864),     # one sliding group, window 262144: cdiv(L, 128) + 1 blocks of 39 usable
    ("gemma2", 4992),   # sliding + full groups of one layer: 80 blocks, 40 + 39 of 79 usable
    ("gemma3", 1536),   # five sliding groups and one full: 6 x 12 + 5 of 79
    ("gpt_oss", 5760),  # window 128: the sliding group needs 34 blocks at most (LLM: 4096 in flight)
    ("mistral", 4864),  # window 1024 on every layer: below window - 1 + 4096 the need is cdiv(L, 128) + 1
    ("mixtral", 4992),  # full attention: 39 x 128
    ("qwen3", 4992),
    ("deepseek_v2", 1120),  # MLA: one 576-wide latent a token and layer, 16-token blocks: 71 of 36 KiB
])
def test_each_family_is_exact_in_one_launch(vllm_python, families, real_env, tmp_path, family, expected):
    report = search(vllm_python, families / family, real_env, tmp_path, "--kv-cache-memory", KV_40_BLOCKS,
                    "--granularity", 1)
    assert report["fit"]["max_model_len"] == expected, trials(report)
    assert report["stop"] == "complete" and report["launches"] == 1, trials(report)


def test_qwen2_with_its_window_off_is_plain_attention(vllm_python, families, real_env, tmp_path):
    """The issue's case: real weights, enforce_eager, 2560 KiB, --max-len 16384, granularity 128: 4992 at
    once (before: verified at launch 2, then 6 launches bisecting upwards past a pool that proved it)."""
    report = search(vllm_python, families / "qwen2", real_env, tmp_path, "--kv-cache-memory", "2560KiB",
                    "--max-len", 16384, "--granularity", 128)
    assert report["fit"]["max_model_len"] == 4992 and report["launches"] == 1, trials(report)


def test_phi3_over_a_long_max_len(vllm_python, families, real_env, tmp_path):
    """--max-len 32767 (the issue's run took 16 launches, every failure saying 4864)."""
    report = search(vllm_python, families / "phi3", real_env, tmp_path, "--kv-cache-memory", KV_40_BLOCKS,
                    "--granularity", 1, "--max-len", 32767)
    assert report["fit"]["max_model_len"] == 4864 and report["launches"] == 1, trials(report)


@pytest.mark.parametrize("family, target, page_kib, pages", [
    ("gemma2", 4000, 32, 66),       # 33 sliding + 32 full + the null block (2 launches before issue 30)
    ("llama4", 8000, 32, 172),      # 3 chunked groups of cdiv(512 + 4096, 128) + 63 full + the null block
    ("deepseek_v2", 1000, 36, 64),  # MLA: cdiv(1000, 16) + the null block, 36 KiB a block
])
def test_the_least_kv_for_a_target_is_exact_in_one_launch(vllm_python, families, real_env, tmp_path, family,
                                                          target, page_kib, pages):
    """--target-len --search kv-cache-memory: the need read off the KV cache groups, proven by the trial's
    own figures; one page less was refused outside the tool (scripts/boundary.py, 2026-12-05)."""
    report = search(vllm_python, families / family, real_env, tmp_path, "--target-len", target, "--search",
                    "kv-cache-memory", "--kv-granularity", "%dKiB" % page_kib)
    assert report["fit"]["kv_cache_memory_bytes"] == pages * page_kib * 1024, trials(report)
    assert report["launches"] == 1, trials(report)


def test_mistral_whose_window_never_binds_gets_the_models_maximum(vllm_python, families, real_env, tmp_path):
    """6 MiB: a request never holds more than cdiv(1023 + 4096, 128) + 1 = 41 of 95 usable blocks."""
    report = search(vllm_python, families / "mistral", real_env, tmp_path, "--kv-cache-memory", KV_6MIB,
                    "--granularity", 1)
    assert report["fit"]["max_model_len"] == 32768 and report["launches"] == 1, trials(report)


@pytest.mark.parametrize("via, expected", [("llm", 16128), ("serve", 18176)])
def test_gemma2_served_holds_more_than_offline(vllm_python, families, real_env, tmp_path, via, expected):
    """6 MiB = 192 one-layer pages. The sliding group holds window - 1 + max_num_batched_tokens tokens at
    most: 4096 + 4095 offline (65 blocks), 2048 + 4095 served (49), so the full group gets 126 or 142."""
    env = dict(real_env)
    if via == "serve":
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the default path, as users run it
    report = search(vllm_python, families / "gemma2", env, tmp_path, "--kv-cache-memory", KV_6MIB,
                    "--granularity", 1, via=via)
    assert report["fit"]["max_model_len"] == expected and report["launches"] == 1, trials(report)


@pytest.mark.parametrize("via, expected", [("llm", 10624), ("serve", 16768)])
def test_llama4_chunked_layers_hold_one_chunk_and_the_tokens_in_flight(vllm_python, families, real_env, tmp_path,
                                                                      via, expected):
    """6 MiB = 192 one-layer pages; each chunked group holds cdiv(512 + max_num_batched_tokens, 128) blocks
    at most (36 offline, 20 served), the full group the rest (issue 30: costed as full attention before,
    8064 where 18816 served, in 3 launches)."""
    env = dict(real_env)
    if via == "serve":
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    report = search(vllm_python, families / "llama4", env, tmp_path, "--kv-cache-memory", KV_6MIB,
                    "--granularity", 1, via=via)
    assert report["fit"]["max_model_len"] == expected and report["launches"] == 1, trials(report)


def test_deepseek_v2_served_is_exact_in_one_launch(vllm_python, families, real_env, tmp_path):
    """MLA on `vllm serve` (2 launches before issue 30: the longest candidate, then vLLM's estimate)."""
    env = {key: value for key, value in real_env.items() if key != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    report = search(vllm_python, families / "deepseek_v2", env, tmp_path, "--kv-cache-memory", KV_40_BLOCKS,
                    "--granularity", 1, via="serve")
    assert report["fit"]["max_model_len"] == 1120 and report["launches"] == 1, trials(report)


def test_phi3_served_is_exact_in_one_launch(vllm_python, families, real_env, tmp_path):
    env = {key: value for key, value in real_env.items() if key != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    report = search(vllm_python, families / "phi3", env, tmp_path, "--kv-cache-memory", KV_40_BLOCKS,
                    "--granularity", 1, via="serve")
    assert report["fit"]["max_model_len"] == 4864 and report["launches"] == 1, trials(report)

