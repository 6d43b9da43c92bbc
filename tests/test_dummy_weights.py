"""Exploring trials on dummy weights (load_format=dummy), the fit verified once with the real ones.

The rules are pure (which models and arguments allow dummy weights); the real run is the tiny model
on vLLM's CPU backend with `--explore-weights dummy` (its 3 MB of weights are below auto's 4 GiB).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from conftest import BLOCK_BYTES

from vllm_fit.plan.weights import DUMMY_PAYS_BYTES, exploration_load_format
from vllm_fit.prepare.modelinfo import ModelInfo
from vllm_fit.prepare.request import ExploreWeights, SearchRequest


class _Prepared:
    def __init__(self, request, model):
        self.request, self.model = request, model


def model(**overrides):
    return dataclasses.replace(ModelInfo(None, 32768, 32, 512, "sha"), **overrides)


@pytest.mark.parametrize("weights, info, args, expected", [
    (ExploreWeights.DUMMY, model(), {}, "dummy"),
    (ExploreWeights.AUTO, model(weights_bytes=DUMMY_PAYS_BYTES), {}, "dummy"),
    (ExploreWeights.AUTO, model(weights_bytes=DUMMY_PAYS_BYTES - 1), {}, None),
    (ExploreWeights.REAL, model(weights_bytes=DUMMY_PAYS_BYTES), {}, None),
    (ExploreWeights.DUMMY, model(quantization="bitsandbytes"), {}, None),
    (ExploreWeights.DUMMY, model(quantization="gptq"), {}, None),
    (ExploreWeights.DUMMY, model(), {"load_format": "safetensors"}, None),
    (ExploreWeights.DUMMY, model(), {"quantization": "fp8"}, None),
    (ExploreWeights.DUMMY, model(config_sha256=None), {}, None),
])
def test_dummy_weights_only_where_they_take_the_real_memory(weights, info, args, expected):
    request = SearchRequest(model="m", explore_weights=weights, engine_args=args)
    assert exploration_load_format(_Prepared(request, info)) == expected


@pytest.mark.vllm
def test_dummy_exploration_then_one_real_verification(vllm_python, tiny_model, real_env, tmp_path):
    report_path, out = tmp_path / "report.json", tmp_path / "fit.yaml"
    done = subprocess.run(
        [vllm_python, "-m", "vllm_fit", "search", "--model", str(tiny_model), "--engine-arg", "enforce_eager=true",
         "--kv-cache-memory", str(40 * BLOCK_BYTES), "--granularity", "1", "--explore-weights", "dummy",
         "--report", str(report_path), "--out", str(out)], env=real_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    *explored, verified = report["trials"]
    assert explored and all(t["load_format"] == "dummy" for t in explored)
    assert verified["load_format"] is None and "load_format" not in verified["engine_args"]
    assert report["fit"]["trial"] == verified["index"] and report["fit"]["max_model_len"] == 4992
    assert verified["request"]["total_tokens"] == 4992 and report["proven"] is True
    assert "load-format" not in out.read_text()
    assert "explored on dummy weights" in done.stdout + done.stderr
