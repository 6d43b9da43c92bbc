"""The one-call Python API (vllm_fit.search, apply, verify): the commands' checks and errors, typed results.

TEST DOUBLE for the searches: the shared fakegpu (an 80 GiB GPU world, tests/fake_worlds.py).
"""

from __future__ import annotations

import json
import sys

import pytest

import vllm_fit
from vllm_fit.report.search_report import SearchReport


@pytest.fixture
def world_env(fake_world, monkeypatch):
    for key, value in fake_world().items():
        monkeypatch.setenv(key, value)


def test_search_returns_the_typed_report_and_writes_what_it_is_asked(world_env, fake_model, tmp_path):
    report = vllm_fit.search(str(fake_model), gpu_memory_utilization=0.9, max_len=8192, granularity=256,
                             out=str(tmp_path / "fit.yaml"), report=str(tmp_path / "r.json"))
    assert isinstance(report, SearchReport) and report.fit is not None
    assert report.fit.engine_args["max_model_len"] == report.fit.max_model_len
    assert "max-model-len: %d" % report.fit.max_model_len in (tmp_path / "fit.yaml").read_text()
    assert json.loads((tmp_path / "r.json").read_text())["fit"]["max_model_len"] == report.fit.max_model_len
    again = vllm_fit.search(str(fake_model), gpu_memory_utilization=0.9, max_len=8192, granularity=256)
    assert again.cache is not None and again.fit.max_model_len == report.fit.max_model_len  # the cache, 0 launches


@pytest.mark.parametrize("options, error, words", [
    ({"gpu_memory_utilization": 7}, vllm_fit.BadInput, "gpu_memory_utilization"),
    ({"max_len": "long"}, vllm_fit.BadInput, "max_len"),
    ({"colour": "blue"}, vllm_fit.BadInput, "unknown option 'colour'"),
    ({"python": "/nonexistent/python"}, vllm_fit.BadInput, "python"),
])
def test_bad_options_raise_the_commands_errors_before_a_launch(world_env, fake_model, options, error, words):
    with pytest.raises(error, match=words) as raised:
        vllm_fit.search(str(fake_model), **options)
    assert raised.value.exit_code == 2


def test_apply_and_verify_are_one_call_each(world_env, fake_model, tmp_path):
    fit = tmp_path / "fit.yaml"
    vllm_fit.search(str(fake_model), gpu_memory_utilization=0.9, max_len=8192, granularity=256, out=str(fit))
    deployment = tmp_path / "compose.yaml"
    deployment.write_text("services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: ['%s']\n" % fake_model)
    [result] = vllm_fit.apply(str(fit), to=[str(deployment)], check=True)
    assert result.after != result.before and deployment.read_text() == result.before  # check writes nothing
    vllm_fit.apply(str(fit), to=[str(deployment)])
    assert deployment.read_text() == result.after
    [verdict] = vllm_fit.verify([str(fit)], python=sys.executable)
    assert verdict["status"] == "ok", verdict["message"]
