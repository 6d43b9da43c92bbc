"""Bad input is refused in one line with exit code 2 (3 for the environment), before any launch."""

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


@pytest.mark.parametrize("args, words", [
    (["--gpu-memory-utilization", "0"], "greater than 0"),
    (["--gpu-memory-utilization", "1.5"], "(0, 1]"),
    (["--gpu-memory-utilization", "lots"], "must be a number"),
    (["--min-len", "5000", "--max-len", "4000"], "greater than --max-len"),
    (["--max-len", "-5"], "at least 1"),
    (["--max-len", "abc"], "whole number"),
    (["--min-len", "0"], "at least 1"),
    (["--granularity", "0"], "at least 1"),
    (["--engine-arg", "enforce_eager"], "KEY=VALUE"),
    (["--engine-arg", "=3"], "KEY=VALUE"),
    (["--engine-arg", "max_model_len=5"], "--max-len"),
    (["--engine-arg", "a=1", "--engine-arg", "a=2"], "twice"),
    (["--kv-cache-memory", "12XB"], "unknown unit"),
    (["--kv-cache-memory", "-1"], "not a size"),
    (["--kv-cache-memory", "64MiB", "--gpu-memory-utilization", "0.9"], "only one"),
    (["--python", "/nonexistent/python"], "no such executable"),
    (["--trial-timeout", "0"], "greater than 0"),
    (["--tensor-parallel-size", "3"], "attention heads"),
    (["--strategy", "guess"], "guess"),
    (["--max-len", "64", "--granularity", "100"], "no multiple"),
])
def test_bad_input_exits_2_in_one_line_without_launching(args, words, model_dir, no_launch, capsys):
    code, err = run_cli(["search", "--model", str(model_dir), *args], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("vllm-fit: error:"), err
    assert words in err


def test_missing_model_option_is_bad_input(no_launch, capsys):
    code, err = run_cli(["search"], capsys)
    assert code == 2 and "--model" in err and err.count("\n") == 1


def test_missing_model_path_is_an_environment_problem(tmp_path, no_launch, capsys):
    code, err = run_cli(["search", "--model", str(tmp_path / "nope")], capsys)
    assert code == 3 and "does not exist" in err


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
