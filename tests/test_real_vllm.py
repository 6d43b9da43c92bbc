"""End to end on real vLLM (CPU backend, the tiny model): exact answers, verified by real requests.

KV budgets are exact on the CPU backend (kv_cache_memory_bytes): 40 blocks of 64 KiB hold one
sequence of at most 39 x 128 = 4992 tokens (one block is vLLM's null block); 33 blocks hold 4096.
"""

from __future__ import annotations

import json
import subprocess

import psutil
import pytest
import yaml
from conftest import BLOCK_BYTES, plan_for

from vllm_fit.export.yaml_config import read_config
from vllm_fit.outcome import Outcome
from vllm_fit.trial.run import run_trial
from vllm_fit.trial.runner import trial_environment


def run_one(index, python, kwargs, work, env):
    """One real trial, as the search launches it (trial files under work/trial-NNN)."""
    return run_trial(plan_for(python, work, 300, env, block_size=128), index, dict(kwargs))

pytestmark = pytest.mark.vllm


def search(vllm_python, model, env, tmp_path, *args):
    out, report = tmp_path / "fit.yaml", tmp_path / "report.json"
    done = subprocess.run(
        [vllm_python, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg", "enforce_eager=true",
         "--out", str(out), "--report", str(report)] + [str(a) for a in args],
        env=env, capture_output=True, text=True, timeout=600)
    data = json.loads(report.read_text()) if report.exists() else None
    return done, data, out


def lengths_tried(report):
    return [t["engine_args"]["max_model_len"] for t in report["trials"]]


def test_40_blocks_fit_4992_and_the_yaml_starts_vllm(vllm_python, tiny_model, real_env, tmp_path):
    done, report, out = search(vllm_python, tiny_model, real_env, tmp_path,
                               "--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 1)
    assert done.returncode == 0, done.stderr
    fit = report["fit"]
    assert fit["max_model_len"] == 4992
    assert fit["request"]["total_tokens"] == 4992
    assert fit["kv_cache_memory_bytes"] == 40 * BLOCK_BYTES and fit["kv_cache_blocks"] == 40
    assert report["launches"] == 1  # 40 pages of config.json's size: predicted, launched, proven by its pool
    assert report["environment"]["vllm_version"] == "0.32.0"
    config = yaml.safe_load(out.read_text())
    assert config["max-model-len"] == 4992 and config["kv-cache-memory-bytes"] == 40 * BLOCK_BYTES
    assert config["enforce-eager"] is True and config["model"] == str(tiny_model)
    assert "max-model-len: 4992" in done.stdout

    kwargs = read_config(out)
    record = run_one(1, vllm_python, kwargs, tmp_path / "from-yaml", trial_environment(real_env))
    assert record.outcome is Outcome.OK, record.detail
    assert record.request["total_tokens"] == 4992

    parsed = subprocess.run([vllm_python, "-c", SERVE_PARSER, str(out)], env=real_env, capture_output=True,
                            text=True, timeout=300)
    assert json.loads(parsed.stdout.strip().splitlines()[-1]) == {
        "model": str(tiny_model), "max_model_len": 4992, "kv_cache_memory_bytes": 40 * BLOCK_BYTES,
        "tensor_parallel_size": 1, "enforce_eager": True}, parsed.stderr


SERVE_PARSER = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
parser = FlexibleArgumentParser()
ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(["serve", "--config", sys.argv[1]])
keys = ("model", "max_model_len", "kv_cache_memory_bytes", "tensor_parallel_size", "enforce_eager")
print(json.dumps({key: getattr(args, key) for key in keys}))
"""
"""How `vllm serve --config FILE` reads a config (vLLM 0.32's own parser), without starting a server."""


def test_40_blocks_at_granularity_256_fit_4864(vllm_python, tiny_model, real_env, tmp_path):
    done, report, _ = search(vllm_python, tiny_model, real_env, tmp_path,
                             "--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 256)
    assert done.returncode == 0, done.stderr
    assert report["fit"]["max_model_len"] == 4864
    assert report["fit"]["request"]["total_tokens"] == 4864
    assert report["launches"] <= 2


def test_33_blocks_fit_4096(vllm_python, tiny_model, real_env, tmp_path):
    done, report, _ = search(vllm_python, tiny_model, real_env, tmp_path, "--kv-cache-memory", 33 * BLOCK_BYTES)
    assert done.returncode == 0, done.stderr
    assert report["fit"]["max_model_len"] == 4096


def test_a_fixed_kv_size_is_launched_at_the_length_its_pages_hold(vllm_python, tiny_model, real_env, tmp_path):
    """40 pages of config.json's size (512 bytes a token, 128-token blocks) hold (40 - 1) x 128 tokens:
    that length is launched first, and its own pool proves nothing longer fits. One launch, where
    the longest candidate and then vLLM's estimate took two (the estimate is parsed in the next test)."""
    done, report, _ = search(vllm_python, tiny_model, real_env, tmp_path,
                             "--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 1, "--max-len", 8192)
    assert done.returncode == 0, done.stderr
    assert lengths_tried(report) == [4992] and report["proven"] is True
    assert report["fit"]["max_model_len"] == 4992 and report["fit"]["kv_cache_blocks"] == 40


def test_multiprocess_trial_is_classified_from_the_captured_output(vllm_python, tiny_model, real_env, tmp_path):
    env = dict(real_env, VLLM_ENABLE_V1_MULTIPROCESSING="1")
    kwargs = {"model": str(tiny_model), "max_model_len": 5000, "kv_cache_memory_bytes": 40 * BLOCK_BYTES,
              "tensor_parallel_size": 1, "enforce_eager": True}
    record = run_one(1, vllm_python, kwargs, tmp_path / "mp", trial_environment(env))
    result = json.loads((tmp_path / "mp" / "trial-001" / "result.json").read_text())
    assert "Engine core initialization failed" in result["exception"]["message"]
    assert "To serve" not in result["exception"]["message"]  # the root cause is only in the output
    assert record.outcome is Outcome.KV_TOO_SMALL
    assert record.facts.estimated_max_len == 4992 and record.hint == 4992
    deciding = [line for line in record.evidence if "estimated maximum model length is 4992" in line]
    assert deciding and deciding[0].startswith("(EngineCore pid=") and deciding[0] in record.log


def test_over_the_models_maximum(vllm_python, tiny_model, real_env, tmp_path):
    kwargs = {"model": str(tiny_model), "max_model_len": 65536, "kv_cache_memory_bytes": 40 * BLOCK_BYTES,
              "tensor_parallel_size": 1, "enforce_eager": True}
    record = run_one(1, vllm_python, kwargs, tmp_path / "long", trial_environment(real_env))
    assert record.outcome is Outcome.TOO_LONG_FOR_MODEL
    assert record.facts.derived_max_len == 32768

    done, report, _ = search(vllm_python, tiny_model, real_env, tmp_path,
                             "--kv-cache-memory", 40 * BLOCK_BYTES, "--max-len", 65536)
    assert done.returncode == 0, done.stderr
    assert "over the model's maximum 32768" in done.stderr
    assert all(length <= 32768 for length in lengths_tried(report))
    assert report["fit"]["max_model_len"] == 4992


def test_no_trial_process_is_left_behind():
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if any("vllm_fit/probe.py" in part for part in (p.info["cmdline"] or []))]
    assert leftovers == []


def test_target_len_finds_the_least_kv_size_that_serves_it(vllm_python, tiny_model, real_env, tmp_path):
    done, report, out = search(vllm_python, tiny_model, real_env, tmp_path, "--target-len", 4096,
                               "--search", "kv-cache-memory", "--kv-granularity", "64KiB")
    assert done.returncode == 0, done.stderr
    assert report["fit"]["kv_cache_memory_bytes"] == 33 * BLOCK_BYTES  # 32 for 4096 tokens + the null block
    assert report["fit"]["max_model_len"] == 4096 and report["fit"]["request"]["total_tokens"] == 4096
    assert report["launches"] <= 2
    assert yaml.safe_load(out.read_text())["kv-cache-memory-bytes"] == 33 * BLOCK_BYTES

    env = trial_environment(real_env)
    served = run_one(1, vllm_python, read_config(out), tmp_path / "from-yaml", env)
    assert served.outcome is Outcome.OK and served.request["total_tokens"] == 4096
    one_block_less = dict(read_config(out), kv_cache_memory_bytes=32 * BLOCK_BYTES)
    refused = run_one(2, vllm_python, one_block_less, tmp_path / "less", env)
    assert refused.outcome is Outcome.KV_TOO_SMALL and refused.facts.estimated_max_len == 3968
