"""vllm-fit against simulated GPUs of every vLLM version range (TEST DOUBLE: tests/fakegpu).

Each world of tests/simulator/worlds.py is searched by the real CLI, trial processes and all; the
answer must be the fake's ground truth (the highest utilization and then the longest length that
start and serve a full-length request), never a configuration that does not serve. Launch counts
are measured by scripts/benchmark.py --suite simulator, not asserted here beyond a loose bound.
"""

from __future__ import annotations

import json

import pytest
from simulator.harness import prepare_world, run_tool, score, truth
from simulator.worlds import Case, cases, question, world

CASES = cases()
SLOW = {"class4-hang-long-0.32"}


def test_there_are_enough_worlds_across_versions():
    assert len(CASES) >= 30
    versions = {case.world["vllm_version"].split(".post")[0] for case in CASES}
    minors = {tuple(int(p) for p in v.split(".")[:2]) for v in versions}
    assert {(0, 5), (0, 6), (0, 8), (0, 9), (0, 10), (0, 14), (0, 20), (0, 29), (0, 31), (0, 34)} <= minors


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in SLOW], ids=lambda c: c.name)
def test_the_answer_is_the_truth(case: Case, tmp_path):
    expected = truth(case)
    answer = run_tool(case, tmp_path)
    verdict = score(case, answer, expected)
    assert not verdict.above_limit, verdict.verdict
    assert verdict.right, "%s (%d launches)" % (verdict.verdict, answer.launches)
    assert answer.launches <= 8, "%d launches" % answer.launches


def test_a_start_that_hangs_for_long_lengths_is_a_failure_of_that_length(tmp_path):
    """Class 4: hangs above 64k. Each hang costs the trial timeout (5 s here); shorter lengths work."""
    case = next(c for c in CASES if c.name == "class4-hang-long-0.32")
    answer = run_tool(case, tmp_path, extra=["--trial-timeout", "5"])
    verdict = score(case, answer, truth(case))
    assert verdict.right, verdict.verdict


def test_no_gpu_is_an_environment_problem_before_a_search(tmp_path):
    """Class 5: vLLM cannot infer a device and NVML fails: one line, exit 3, no length verdicts."""
    case = Case("no-gpu", dict(world("0.32.0", "L4", "llama-8b", adversarial={"no_gpu": True}), name="no-gpu"),
                question(131072), "no GPU visible")
    answer = run_tool(case, tmp_path)
    assert answer.exit_code == 3 and answer.length is None, answer
    report = tmp_path / "report.json"
    assert not report.exists() or not json.loads(report.read_text()).get("fit")


def test_worlds_are_written_with_a_config_the_tool_reads(tmp_path):
    path = prepare_world(CASES[0], tmp_path)
    config = json.loads((path.parent / "model" / "config.json").read_text())
    assert config["num_hidden_layers"] == CASES[0].world["model"]["num_hidden_layers"]


def test_a_short_fit_comes_with_a_diagnosis_in_numbers(tmp_path):
    """Issue 11: the memory missing for the model's maximum, TP 2 and 4, fp8, from the trials' figures."""
    case = next(c for c in CASES if c.name == "v1-0.32-l4")
    answer = run_tool(case, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    diagnosis = report["diagnosis"]
    per_token = 2 * 32 * 8 * 128 * 2  # llama-8b: layers x KV heads x head_dim x K,V x bf16
    assert diagnosis["wanted_len"] == 131072 and diagnosis["kv_bytes_per_token"] == per_token
    capacity = report["fit"]["kv_cache_tokens"]
    assert abs(diagnosis["missing_bytes"] - (131072 - capacity) * per_token) < 0.02 * (1 << 30)
    assert [t["tensor_parallel_size"] for t in diagnosis["tensor_parallel"]] == [2, 4]
    assert diagnosis["tensor_parallel"][0]["kv_tokens_per_device"] > 131072  # TP 2 would hold the full context
    assert abs(diagnosis["fp8_kv_tokens"] - 2 * capacity) < 200
    assert answer.length == report["fit"]["max_model_len"]


def test_a_full_context_fit_needs_no_diagnosis(tmp_path):
    case = next(c for c in CASES if c.name == "v1-0.10.1-h100-qwen")
    run_tool(case, tmp_path)
    assert "diagnosis" not in json.loads((tmp_path / "report.json").read_text())
