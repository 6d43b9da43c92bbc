"""Model facts on real vLLM (CPU backend): variants of the tiny Llama that the tests make (issue 8).

Each variant copies the tiny model and changes its config.json: a LongRoPE rope, a Qwen2-style
unused sliding window, an fp8 KV cache. The KV pool is exact on the CPU backend: 40 blocks of
128 tokens hold one sequence of 39 x 128 = 4992 tokens (one block is the null block).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import BLOCK_BYTES

from vllm_fit.prepare.checks import cpu_flag

pytestmark = pytest.mark.vllm


needs_fp8_kv = pytest.mark.skipif(not (cpu_flag("avx512f") or cpu_flag("amx_tile")),
                                  reason="vLLM's CPU fp8 KV cache needs AVX-512 or AMX, which this CPU lacks"
                                  " (NotImplementedError in vLLM)")


def variant(tiny_model, tmp_path, name, **changes):
    folder = tmp_path / name
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def search(vllm_python, model, env, tmp_path, *args, timeout=900):
    report = tmp_path / ("report-%s.json" % model.name)
    done = subprocess.run([vllm_python, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg",
                           "enforce_eager=true", "--report", str(report), *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    return done, (json.loads(report.read_text()) if report.exists() else None)


def test_longrope_fits_the_pool_not_the_original_length(vllm_python, tiny_model, real_env, tmp_path):
    """vLLM 0.32 resolves max_model_len=-1 to original_max_position_embeddings for LongRoPE (1024 here);
    auto-fit did not reduce it, so the 40-block pool decides: 4992."""
    factors = [1.0] * 16  # head_dim / 2
    model = variant(tiny_model, tmp_path, "longrope", rope_parameters={
        "rope_type": "longrope", "rope_theta": 10000.0, "short_factor": factors, "long_factor": factors,
        "original_max_position_embeddings": 1024}, original_max_position_embeddings=1024)
    done, report = search(vllm_python, model, real_env, tmp_path, "--kv-cache-memory", 40 * BLOCK_BYTES,
                          "--granularity", 128)
    assert done.returncode == 0, done.stderr
    assert report["fit"]["max_model_len"] == 4992, [(t["engine_args"]["max_model_len"], t["outcome"])
                                                    for t in report["trials"]]


def test_an_unused_sliding_window_is_full_attention(vllm_python, tiny_model, real_env, tmp_path):
    """Qwen2 configs carry sliding_window with use_sliding_window false: block counts still apply.

    A Qwen2 architecture over the tiny Llama's numbers, with dummy weights (vLLM initialises them).
    """
    model = variant(tiny_model, tmp_path, "unused-window", architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                    sliding_window=4096, use_sliding_window=False, max_window_layers=2)
    done, report = search(vllm_python, model, real_env, tmp_path, "--kv-cache-memory", 40 * BLOCK_BYTES,
                          "--granularity", 128, "--max-len", 16384, "--engine-arg", "load_format=dummy")
    assert done.returncode == 0, done.stderr
    assert report["fit"]["max_model_len"] == 4992
    assert report["launches"] <= 2, [(t["engine_args"]["max_model_len"], t["outcome"]) for t in report["trials"]]


@needs_fp8_kv
@pytest.mark.parametrize("granule, expected", [("32KiB", 33 * 32 * 1024), ("1MiB", 2 * 1024 * 1024)])
def test_fp8_kv_takes_the_measured_page_size(vllm_python, tiny_model, real_env, tmp_path, granule, expected):
    """fp8 halves the page (32 KiB a block here): 4096 tokens need 32 + 1 blocks = 1,081,344 bytes,
    not the bf16 page size config.json implies."""
    done, report = search(vllm_python, tiny_model, real_env, tmp_path, "--target-len", 4096, "--search",
                          "kv-cache-memory", "--kv-granularity", granule, "--engine-arg", "kv_cache_dtype=fp8")
    assert done.returncode == 0, done.stderr
    assert report["fit"]["kv_cache_memory_bytes"] == expected, [
        (t["engine_args"].get("kv_cache_memory_bytes"), t["outcome"]) for t in report["trials"]]


@needs_fp8_kv
def test_explore_verifies_an_fp8_kv_cache_beside_the_fit(vllm_python, tiny_model, real_env, tmp_path):
    """Issue 11 --explore: the 40-block pool (bf16) holds 4992; the same bytes in fp8 are 80 blocks of
    32 KiB, 79 x 128 = 10112 tokens, found and served for real while the fit stays 4992."""
    done, report = search(vllm_python, tiny_model, real_env, tmp_path, "--kv-cache-memory", 40 * BLOCK_BYTES,
                          "--granularity", 128, "--max-len", 16384, "--explore", "--no-cache")
    assert done.returncode == 0, done.stderr
    assert report["fit"]["max_model_len"] == 4992
    [row] = report["explore"]
    assert row["alternative"] == "kv_cache_dtype=fp8" and row["verified"] and row["proven"]
    assert row["fit"]["max_model_len"] == 10112 and row["fit"]["kv_cache_blocks"] == 80
    assert row["fit"]["request"]["total_tokens"] == 10112 and row["launches"] <= 2
    assert "Alternatives (--explore)" in done.stdout and "kv_cache_dtype=fp8" in done.stdout
    # the picture of this real report: the fit and the alternative, labelled
    report_path = tmp_path / ("report-%s.json" % tiny_model.name)
    for suffix, magic in ((".svg", b"<?xml"), (".png", b"\x89PNG")):
        picture = tmp_path / ("capacity" + suffix)
        drawn = subprocess.run([vllm_python, "-m", "vllm_fit", "plot", str(report_path), "--out", str(picture)],
                               env=real_env, capture_output=True, text=True, timeout=120)
        assert drawn.returncode == 0, drawn.stderr
        assert picture.read_bytes().startswith(magic) and picture.stat().st_size > 10000
    svg = (tmp_path / "capacity.svg").read_text()
    assert "fit 4992 tokens" in svg and "explore: kv_cache_dtype=fp8, fit 10112" in svg


def test_a_rerun_with_a_longer_timeout_relaunches_what_timed_out(vllm_python, tiny_model, real_env, tmp_path):
    """Issue 8 class 12: timeouts journaled under --trial-timeout 2 say nothing under a longer one."""
    args = ["--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 128]
    first, _ = search(vllm_python, tiny_model, real_env, tmp_path, *args, "--trial-timeout", 2)
    assert first.returncode != 0 and "timed out" in first.stderr + first.stdout
    again, report = search(vllm_python, tiny_model, real_env, tmp_path, *args, "--trial-timeout", 600)
    assert again.returncode == 0, again.stderr
    assert report["fit"]["max_model_len"] == 4992 and report["launches"] >= 1


def test_a_python_module_vllm_lacks_for_the_model_is_an_environment_problem(vllm_python, tiny_model, real_env,
                                                                           tmp_path):
    """vLLM 0.32 imports torchvision to inspect OpenPangu-VL; without it the server fails with "failed to be
    inspected" inside a ModelConfig validation error. The default (served) path names the module, exit 3
    (issue 30)."""
    probe = subprocess.run([vllm_python, "-c", "import torchvision"], capture_output=True, timeout=120)
    if probe.returncode == 0:
        pytest.skip("torchvision is installed in the vLLM environment")
    model = variant(tiny_model, tmp_path, "pangu-vl", architectures=["OpenPanguVLForConditionalGeneration"])
    done, report = search(vllm_python, model, real_env, tmp_path, "--kv-cache-memory", 40 * BLOCK_BYTES,
                          "--max-len", 512)
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "'torchvision' is not installed where vLLM runs" in last and "environment (/" in last  # its path
    assert [trial["outcome"] for trial in report["trials"]] == ["environment"]
