"""CLI checks that need a real environment (hub cache, an interpreter without vLLM) and --help.

The table of bad inputs is tests/test_bad_input.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from vllm_fit import cli
from vllm_fit.trial import run as trial_run


@pytest.fixture
def model_dir(tmp_path):
    """A model directory with only a config.json: enough for every check that precedes a launch."""
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "hidden_size": 128, "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16"}))
    return tmp_path


@pytest.fixture
def no_launch(monkeypatch):
    def launch(*args, **kwargs):
        raise AssertionError("a trial was launched")
    monkeypatch.setattr(trial_run, "run_probe", launch)


def run_cli(args, capsys, want_out=False):
    with pytest.raises(SystemExit) as exited:
        cli.main(args)
    captured = capsys.readouterr()
    return (exited.value.code, captured.out) if want_out else (exited.value.code, captured.err)


def test_hub_model_without_max_len_asks_for_it(no_launch, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    code, err = run_cli(["search", "--model", "some-org/some-model"], capsys)
    assert code == 2 and "--max-len is needed" in err


def test_interpreter_without_vllm_is_an_environment_problem(model_dir, no_launch, capsys):
    base_python = sys._base_executable  # the interpreter the test venv was made from: no vLLM
    code, err = run_cli(["search", "--model", str(model_dir), "--python", base_python], capsys)
    assert code == 3 and "cannot import vllm" in err


def test_help_lists_every_option(capsys):
    code, out = run_cli(["search", "--help"], capsys, want_out=True)
    assert code == 0
    for option in ("--max-len", "--min-len", "--granularity", "--gpu-memory-utilization", "--kv-cache-memory",
                   "--tensor-parallel-size", "--engine-arg", "--python", "--trial-timeout", "--strategy",
                   "--out", "--report"):
        assert option in out


def test_a_model_under_home_is_passed_to_vllm_expanded():
    """vLLM would take `~/models/x` for a hub id: the tool reads and launches the expanded path."""
    import os

    from vllm_fit.prepare.inputs import model_name

    assert model_name("--model", "~/models/x") == os.path.join(os.path.expanduser("~"), "models", "x")
    assert model_name("--model", "Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
