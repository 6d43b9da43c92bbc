"""vllm-fit against simulated GPUs of every vLLM version range (TEST DOUBLE: tests/fakegpu).

Each world of tests/simulator/worlds.py is searched by the real CLI, trial processes and all; the
answer must be the fake's ground truth (the highest utilization and then the longest length that
start and serve a full-length request), never a configuration that does not serve. Launch counts
are measured by scripts/benchmark.py --suite simulator, not asserted here beyond a loose bound.
"""

from __future__ import annotations

import functools
import json

import pytest
from simulator.harness import _fakeworld, prepare_world, run_tool, score, truth
from simulator.random_worlds import OLDEST_VERSIONS, random_cases
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


RANDOM_SEED, RANDOM_COUNT = 20261203, 10


@functools.lru_cache(maxsize=1)
def _random_worlds():
    return random_cases(RANDOM_SEED, RANDOM_COUNT)


@pytest.mark.parametrize("index", range(RANDOM_COUNT))
def test_random_worlds_are_answered_right(index, tmp_path):
    """Worlds nobody chose (versions, devices, models, memory, questions drawn with a fixed seed):
    right, never above the limit. scripts/benchmark.py --suite random runs 100 of them."""
    case = _random_worlds()[index]
    answer = run_tool(case, tmp_path)
    verdict = score(case, answer, truth(case))
    assert not verdict.above_limit, "%s: %s" % (case.name, verdict.verdict)
    assert verdict.right, "%s: %s (%d launches)" % (case.name, verdict.verdict, answer.launches)


OLDEST_SEED, OLDEST_COUNT = 404, 6


@functools.lru_cache(maxsize=1)
def _oldest_worlds():
    return random_cases(OLDEST_SEED, OLDEST_COUNT, versions=OLDEST_VERSIONS)


@pytest.mark.parametrize("index", range(OLDEST_COUNT))
def test_the_oldest_releases_are_answered_right(index, tmp_path):
    """vLLM 0.4.0-0.5.3 (no named world runs them): right, never above the limit. scripts/benchmark.py
    --suite oldest runs more (40 of seed 404: 40/40, BENCHMARKS.md)."""
    case = _oldest_worlds()[index]
    assert case.world["vllm_version"] in OLDEST_VERSIONS
    answer = run_tool(case, tmp_path)
    verdict = score(case, answer, truth(case))
    assert not verdict.above_limit, "%s: %s" % (case.name, verdict.verdict)
    assert verdict.right, "%s: %s (%d launches)" % (case.name, verdict.verdict, answer.launches)


def test_a_start_that_hangs_for_long_lengths_is_a_failure_of_that_length(tmp_path):
    """Class 4: hangs above 64k. Hangs cost the whole trial timeout (5 s here) until a start was measured,
    then a multiple of it (at least a tenth of 5 s); the boundary rests on a length that hung twice, and the
    report and the YAML say so (issue 31)."""
    case = next(c for c in CASES if c.name == "class4-hang-long-0.32")
    out = tmp_path / "fit.yaml"
    answer = run_tool(case, tmp_path, extra=["--trial-timeout", "5", "--out", str(out)])
    verdict = score(case, answer, truth(case))
    assert verdict.right and answer.exit_code == 0, verdict.verdict
    trials = json.loads((tmp_path / "report.json").read_text())["trials"]
    first_served = next(t["index"] for t in trials if t["outcome"] == "ok")
    later_hangs = [t for t in trials if t["outcome"] == "timeout" and t["index"] > first_served]
    assert later_hangs and all(t["timeout_s"] < 5 for t in later_hangs)
    boundary = "the boundary is a hang: max_model_len=65552 never finished starting, 2 times"
    assert any(boundary in note for note in json.loads((tmp_path / "report.json").read_text())["notes"])
    assert "# boundary: " + boundary in out.read_text()


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


def test_the_diagnosis_reckons_from_below_the_level_that_ran_out_of_memory(tmp_path):
    """Class 1: the request runs out of memory at 0.95, so the KV cache at the cap is not there to use:
    the diagnosis counts from 0.94 and says why."""
    case = next(c for c in CASES if c.name == "class1-headroom-0.32")
    run_tool(case, tmp_path)
    diagnosis = json.loads((tmp_path / "report.json").read_text())["diagnosis"]
    assert diagnosis["out_of_memory_from"] == 0.95
    assert diagnosis["lines"][0].startswith("at 0.95 and above the engine ran out of memory")
    assert "at the cap 0.94" in diagnosis["lines"][1]


@pytest.mark.parametrize("at, outcome", [("start", "timeout"), ("request", "request_failed")])
def test_a_fit_bounded_by_a_hang_is_not_diagnosed_as_short_of_memory(tmp_path, at, outcome):
    """TEST DOUBLE: above 20480 tokens the engine hangs (at start, or at the full-length request) with the KV
    cache holding 65536 at 0.95. The diagnosis names the trials above the fit and offers no memory change (it
    said "0.00 GiB missing (a device of 39.39 GiB would hold it)", then tensor parallelism and fp8), and
    --explore searches neither."""
    case = Case("hang-" + at, dict(world("0.32.0", "A100-40", "llama-8b",
                                         adversarial={"hang_when": {"max_model_len_gt": 20480, "at": at}}),
                                   name="hang-" + at), question(65536, granularity=1024), "a hang above 20480")
    answer = run_tool(case, tmp_path, extra=["--trial-timeout", "6", "--out", str(tmp_path / "fit.yaml"), "--explore"])
    assert answer.length == 20480, answer  # (a short --trial-timeout: each hang costs it)
    boundary = [line for line in (tmp_path / "fit.yaml").read_text().splitlines() if line.startswith("# boundary: ")]
    assert len(boundary) == 1 and boundary[0].startswith("# boundary: " + (
        "the boundary is a hang: max_model_len=21504" if at == "start" else
        "what stops max_model_len=21504 is not the KV cache")), boundary
    report = json.loads((tmp_path / "report.json").read_text())
    assert not report.get("explore"), report.get("explore")  # --explore: fp8 and TP would not lift a hang
    diagnosis = report["diagnosis"]
    assert diagnosis["limited_by"]["max_model_len"] == 21504 and diagnosis["limited_by"]["outcome"] == outcome
    assert diagnosis["lines"][0].startswith("what stops max_model_len=21504 is not the KV cache: it ")
    assert diagnosis["missing_bytes"] == 0 and "tensor_parallel" not in diagnosis
    assert not any("tensor parallelism" in line or "fp8" in line or "device of" in line for line in diagnosis["lines"])
    if at == "request":  # the same failure at the pool's edge (it holds the length, no blocks to spare) is memory's
        from vllm_fit.advice.diagnosis import diagnose
        from vllm_fit.prepare.modelinfo import read_model_info
        from vllm_fit.report.search_report import SearchReport

        data = json.loads((tmp_path / "report.json").read_text())
        edge = next(t for t in data["trials"] if t["max_model_len"] == 21504)
        edge["max_len_hint"] = 21504
        again = diagnose(SearchReport.from_json(data), read_model_info(str(tmp_path / "model")), 1, 0.95, None)
        assert again is not None and "limited_by" not in again and "tensor_parallel" in again, again


@pytest.mark.parametrize("at, outcome", [("start", "timeout"), ("request", "request_failed")])
def test_nothing_fits_because_every_length_hangs_is_not_diagnosed_as_short_of_memory(tmp_path, at, outcome):
    """TEST DOUBLE: every start (or every full-length request) hangs: nothing fits, and the diagnosis says the
    shortest length hung, not "at least 0.00 GiB missing (a device of 15.88 GiB would hold it)"."""
    case = Case("all-hang-" + at, dict(world("0.32.0", "A100-40", "llama-8b",
                                             adversarial={"hang_when": {"max_model_len_gt": 0, "at": at}}),
                                       name="all-hang-" + at), question(65536, granularity=1024, min_len=1024), "")
    answer = run_tool(case, tmp_path, extra=["--trial-timeout", "4"])
    assert (answer.exit_code, answer.length) == (1, None), answer
    diagnosis = json.loads((tmp_path / "report.json").read_text())["diagnosis"]
    assert diagnosis["limited_by"]["max_model_len"] == 1024 and diagnosis["limited_by"]["outcome"] == outcome
    assert diagnosis["lines"][0].startswith("what stops max_model_len=1024 is not the KV cache: it ")
    assert not any("missing" in line or "tensor parallelism" in line for line in diagnosis["lines"]), diagnosis


def test_a_v0_pool_in_blocks_is_reckoned_at_the_longest_length_measured(tmp_path):
    """TEST DOUBLE: vLLM 0.6.3 (V0, no chunked prefill: the pool shrinks as max_model_len grows) prints its pool
    in blocks. The diagnosis reads the pool measured at the longest length (it said "at least ... missing" from
    the weights, as if no pool had been measured, and "an fp8 KV cache would not help")."""
    case = Case("v0-shrinking", dict(world("0.6.3", "A10G", "phi3-mini-128k",
                                           adversarial={"capacity_depends_on_len": 65536}), name="v0-shrinking"),
                question(32768, granularity=256), "a V0 pool that shrinks with the length")
    answer = run_tool(case, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert answer.length is not None and answer.length < 32768, answer
    diagnosis = report["diagnosis"]
    assert "weights_bytes" not in diagnosis and diagnosis["fp8_kv_tokens"] > 0, diagnosis
    longest = max(report["trials"], key=lambda t: t["engine_args"]["max_model_len"])
    assert longest["outcome"] == "kv_too_small" and longest["engine_args"]["max_model_len"] == 32768, longest
    pool = longest["capacity"]["error_capacity_tokens"] * diagnosis["kv_bytes_per_token"]  # 0.6.3 prints no bytes
    assert longest["engine_args"]["gpu_memory_utilization"] == 0.95 and "out_of_memory_from" not in diagnosis
    assert diagnosis["kv_bytes_at_cap"] == pool and diagnosis["missing_bytes"] == 32768 * 393216 - pool, diagnosis


def test_a_full_context_fit_needs_no_diagnosis(tmp_path):
    case = next(c for c in CASES if c.name == "v1-0.10.1-h100-qwen")
    run_tool(case, tmp_path)
    assert "diagnosis" not in json.loads((tmp_path / "report.json").read_text())


def _least_device(case: Case) -> int:
    """The world's truth: the smallest device (total bytes, to 1 MiB) on which the question has a fit."""
    low, high = case.world["gpu"]["total_bytes"], 1 << 42
    while high - low > 1 << 20:
        middle = (low + high) // 2
        bigger = Case(case.name, dict(case.world, gpu=dict(case.world["gpu"], total_bytes=middle)), case.question,
                      case.covers)
        if truth(bigger)["fit"] is None:
            low = middle
        else:
            high = middle
    return high


@pytest.mark.parametrize("name", ["class3-weights-too-big", "class3-min-len-too-long"])
def test_nothing_fits_comes_with_the_missing_memory_in_numbers(name, tmp_path):
    """Issue 11: weights that do not fit, a minimum length that does not fit: the missing GiB within 5%
    of the world's truth (the device that would fit, less this one, at the cap), TP 2 and fp8 KV shown."""
    case = next(c for c in CASES if c.name == name)
    answer = run_tool(case, tmp_path)
    assert answer.exit_code == 1 and answer.length is None
    diagnosis = json.loads((tmp_path / "report.json").read_text())["diagnosis"]
    granularity = case.question["granularity"]  # the shortest candidate, not --min-len's 1 as given
    assert diagnosis["wanted_len"] == -(-case.question["min_len"] // granularity) * granularity
    missing = 0.95 * (_least_device(case) - case.world["gpu"]["total_bytes"])
    assert abs(diagnosis["missing_bytes"] - missing) <= 0.05 * missing, (diagnosis["missing_bytes"], missing)
    assert diagnosis["tensor_parallel"][0]["tensor_parallel_size"] == 2
    assert "fp8_kv_tokens" in diagnosis
    assert any("tensor parallelism 2" in line for line in diagnosis["lines"])
    assert any("fp8" in line for line in diagnosis["lines"])


def _longest(case: Case, utilization: float, **change) -> int:
    """The world's longest serving length at this utilization with one change (bisection: it is monotone)."""
    granularity, world_spec = case.question["granularity"], json.loads(json.dumps(case.world))
    world_spec["adversarial"] = {}
    low, high = 0, case.question["max_len"] // granularity
    while low < high:
        middle = (low + high + 1) // 2
        if _fakeworld.works(world_spec, middle * granularity, gpu_memory_utilization=utilization, **change):
            low = middle
        else:
            high = middle - 1
    return low * granularity


def test_explore_searches_fp8_kv_and_tensor_parallelism_each_verified(tmp_path):
    """Issue 11: --explore on a short fit with 4 devices: fp8 KV, TP 2 and TP 4 at the fit's utilization,
    each the world's truth and verified by a request, beside the fit (which stays the answer)."""
    case = Case("explore-l4x4", dict(world("0.32.0", "L4", "llama-8b", count=4), name="explore-l4x4"),
                question(131072), "--explore")
    answer = run_tool(case, tmp_path, extra=["--explore"])
    report = json.loads((tmp_path / "report.json").read_text())
    assert answer.exit_code == 0 and answer.length == truth(case)["fit"]["max_model_len"]
    rows = {row["alternative"]: row for row in report["explore"]}
    assert list(rows) == ["kv_cache_dtype=fp8", "tensor_parallel_size=2", "tensor_parallel_size=4"]
    utilization = report["fit"]["gpu_memory_utilization"]
    expected = {"kv_cache_dtype=fp8": _longest(case, utilization, kv_cache_dtype="fp8"),
                "tensor_parallel_size=2": _longest(case, utilization, tensor_parallel_size=2),
                "tensor_parallel_size=4": _longest(case, utilization, tensor_parallel_size=4)}
    for name, row in rows.items():
        assert row["verified"] and row["fit"]["max_model_len"] == expected[name], (name, row["fit"], expected)
        assert row["fit"]["request"]["total_tokens"] == expected[name] and row["launches"] <= 3
    assert rows["kv_cache_dtype=fp8"]["fit"]["engine_args"]["kv_cache_dtype"] == "fp8"
    assert expected["kv_cache_dtype=fp8"] > answer.length


def test_explore_reports_an_alternative_that_also_fails(tmp_path):
    """Weights that do not fit: fp8 KV cannot help, and the alternative says so with its own trial."""
    case = next(c for c in CASES if c.name == "class3-weights-too-big")
    answer = run_tool(case, tmp_path, extra=["--explore"])
    rows = json.loads((tmp_path / "report.json").read_text())["explore"]
    assert answer.exit_code == 1
    assert [row["alternative"] for row in rows] == ["kv_cache_dtype=fp8"]  # one device: no TP
    assert rows[0]["verified"] is False and rows[0]["stop"] == "nothing_fits" and rows[0]["launches"] >= 1


def test_at_a_fixed_utilization_the_first_launch_is_a_length_that_starts(tmp_path):
    """Without auto-fit (0.14) and with the weights leaving no room for 65536 tokens at 0.76, the first
    launch is a length that starts: its request runs out of memory at the shortest candidate, which
    proves nothing fits in that one launch (launching 65536 first took three)."""
    case = next(c for c in CASES if c.name == "class3-fixed-util-request-oom-0.14")
    answer = run_tool(case, tmp_path)
    assert score(case, answer, truth(case)).right and answer.launches == 1, answer


HYBRID_COUNT, LATENT_COUNT, STATE_COUNT = 6, 5, 6


@functools.cache
def _drawn(family: str, count: int):
    """`count` random worlds of one family (hybrid, latent, state), drawn with the suite's seed."""
    return random_cases(RANDOM_SEED, count, **{family: True})


@pytest.mark.parametrize("index", range(HYBRID_COUNT))
def test_random_sliding_and_hybrid_worlds_are_answered_right(index, tmp_path):
    """Issue 20: Gemma 2 and 3, GPT-OSS, Mistral and Phi-3 on V1 0.10-0.34 (the fakegpu groups layer_types
    models from 0.29), drawn with the same seed; scripts/benchmark.py --suite hybrid runs 100."""
    _answered_right(_drawn("hybrid", HYBRID_COUNT)[index], tmp_path, max_launches=6)


def _answered_right(case: Case, tmp_path, max_launches: int) -> None:
    """The real CLI gives the world's truth, never above the limit, in at most `max_launches`."""
    answer = run_tool(case, tmp_path)
    verdict = score(case, answer, truth(case))
    assert not verdict.above_limit, "%s: %s" % (case.name, verdict.verdict)
    assert verdict.right, "%s: %s (%d launches)" % (case.name, verdict.verdict, answer.launches)
    assert answer.launches <= max_launches, "%s: %d launches" % (case.name, answer.launches)


@pytest.mark.parametrize("index", range(LATENT_COUNT))
def test_random_mla_worlds_are_answered_right(index, tmp_path):
    """Issue 30's GPU side (TEST DOUBLE): DeepSeek V2 and V3 layouts (one 576-wide latent a token and layer,
    whole on every tensor-parallel rank, FlashMLA's 64-token blocks on an H100) on vLLM 0.8.5-0.34, the fixed
    knob, KV size and target-length questions among them; scripts/benchmark.py --suite latent runs 40."""
    _answered_right(_drawn("latent", LATENT_COUNT)[index], tmp_path, max_launches=3)


@pytest.mark.parametrize("index", range(STATE_COUNT))
def test_random_state_hybrid_worlds_are_answered_right(index, tmp_path):
    """Issue 30's GPU side for state layers (TEST DOUBLE): Granite 4.0-H Tiny, Nemotron Nano 9B and Qwen3-Next
    on vLLM 0.29-0.34, the attention block raised to hold a state (mamba2's groups raised to the ranks at
    tensor parallel 2), prefix caching's state blocks; scripts/benchmark.py --suite state runs 40."""
    _answered_right(_drawn("state", STATE_COUNT)[index], tmp_path, max_launches=3)


def test_nothing_fits_a_state_hybrid_in_two_launches(tmp_path):
    """TEST DOUBLE: Granite 4.0-H Tiny on vLLM 0.29+ at a fixed utilization that leaves 0.02 GiB of KV cache. The
    too-long error prints no estimate, which from 0.9.1 means not one token fits, so the shortest length is
    the next launch and the last (3 launches before: the printed sizes scaled to 512 tokens first)."""
    case = next(case for case in _drawn("state", STATE_COUNT)
                if truth(case).get("fit") is None and "gpu_memory_utilization" in case.question)
    answer = run_tool(case, tmp_path)
    assert (answer.exit_code, answer.length) == (1, None), answer
    assert answer.launches == 2, answer
    details = [trial["detail"] for trial in json.loads((tmp_path / "report.json").read_text())["trials"]]
    assert all("too small for one token" in detail for detail in details), details
