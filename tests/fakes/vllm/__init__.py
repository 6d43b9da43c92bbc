"""A fake `vllm` package for tests: GPU memory accounting that cannot run on this CPU-only machine.

TEST DOUBLE, used only under tests/ by putting tests/fakes first on PYTHONPATH. It follows
../shared/reference/vllm-strings.md for a V1 engine of the version named in the world file:
  * requested = total x gpu_memory_utilization (0.9.1+: refuse when free < requested, section 3a);
  * KV bytes = requested - weights - activation peak (section 4c), or kv_cache_memory_bytes (4d);
  * blocks = KV bytes // (block_size x bytes per token); one null block is reserved (0.29+);
  * the too-long error carries the estimated maximum length (2b); auto-fit with max_model_len=-1 (1d);
  * a request needs `request_overhead_gib` beyond the budget: too high a utilization OOMs on it (3c).
Log lines use the 0.31+ format with the process prefix. Modes: normal, hang_start, hang_request,
crash, flaky_start (the first `flaky_failures` starts fail with an NCCL error, then it works).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fakegpu  # noqa: E402

_SPEC = fakegpu.world()
__version__ = _SPEC.get("version", "0.32.0")
GIB = fakegpu.GIB


def _log(level: str, message: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    sys.stdout.write("(EngineCore pid=%d) %s %s [fake_engine.py:1] %s\n" % (os.getpid(), level, stamp, message))
    sys.stdout.flush()


def _gib(value: float) -> str:
    return str(round(value / GIB, 2))


class SamplingParams:
    def __init__(self, max_tokens: int = 16, **kwargs):
        self.max_tokens = max_tokens


class _Obj:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LLM:
    """Enough of vllm.LLM for the probe: start-up memory checks, KV sizing, one request."""

    def __init__(self, model: str, max_model_len: int = None, gpu_memory_utilization: float = None,
                 kv_cache_memory_bytes: int = None, tensor_parallel_size: int = 1, **kwargs):
        spec = _SPEC
        mode = spec.get("mode", "normal")
        derived = spec.get("derived_max_len", 131072)
        util = 0.9 if gpu_memory_utilization is None else gpu_memory_utilization
        _log("INFO", "Initializing a V1 LLM engine (v%s) with config: model=%r, max_seq_len=%s"
             % (__version__, model, max_model_len))
        if max_model_len is not None and max_model_len > derived:
            raise ValueError("1 validation error for ModelConfig\n  Value error, User-specified max_model_len"
                             " (%d) is greater than the derived max_model_len (max_position_embeddings=%s.0 or"
                             " model_max_length=None in model's config.json). To allow overriding this maximum,"
                             " set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1." % (max_model_len, derived))
        if not 0 < util <= 1:
            raise ValueError("1 validation error for CacheConfig\ngpu_memory_utilization\n  Input should be less"
                             " than or equal to 1 [type=less_than_equal, input_value=%s]" % util)
        # an engine-core-like grandchild that even ignores SIGTERM, so that group cleanup is exercised
        self._helper = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                         "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
        if mode == "hang_start":
            _log("INFO", "Starting to load model %s..." % model)
            time.sleep(3600)
        if mode == "crash":
            _log("INFO", "Starting to load model %s..." % model)
            os._exit(139)
        if mode == "flaky_start" and fakegpu.bump_counter(spec, "flaky") <= spec.get("flaky_failures", 1):
            raise RuntimeError("NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
        total = spec["total_gib"] * GIB
        used = fakegpu.used_gib(spec, exclude_pid=os.getpid()) * GIB
        free = total - used
        requested = math.ceil(total * util)
        if free < requested:
            raise ValueError("Free memory on device cuda:0 (%s/%s GiB) on startup is less than desired GPU memory"
                             " utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU memory used"
                             " by other processes." % (_gib(free), _gib(total), util, _gib(requested)))
        weights = spec["weights_gib"] * GIB
        fakegpu.hold(spec, weights / GIB)
        _log("INFO", "Starting to load model %s..." % model)
        _log("INFO", "Model loading took %.4f GiB memory and 1.000000 seconds" % (weights / GIB))
        if weights > requested:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of"
                               " %s GiB of which 0 bytes is free." % _gib(total))
        block_size = spec.get("block_size", 16)
        page = block_size * spec["kv_bytes_per_token"]
        if kv_cache_memory_bytes is not None:
            available = kv_cache_memory_bytes
        else:
            available = requested - weights - spec.get("activation_gib", 0) * GIB
        _log("INFO", "Available KV cache memory: %s GiB" % _gib(available))
        if available <= 0:
            raise ValueError("No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
                             " when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/"
                             "conserving_memory/ for more details.")
        num_blocks = int(available // page)
        longest = max(0, num_blocks - 1) * block_size
        if max_model_len is None:
            max_model_len = derived
        if max_model_len == -1:
            if longest < 1:
                raise ValueError("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a"
                                 " single token. Try increasing `gpu_memory_utilization`.")
            max_model_len = min(derived, longest)
            _log("INFO", "Auto-fit max_model_len: reduced from %d to %d to fit in available KV cache memory"
                 " (%s GiB GPU)" % (derived, max_model_len, _gib(available)))
        needed_blocks = -(-max_model_len // block_size) + 1
        if needed_blocks > num_blocks:
            estimate = ("Based on the available memory, the estimated maximum model length is %d. " % longest
                        if longest > 0 else "")
            raise ValueError("To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is"
                             " needed, which is larger than the available KV cache memory (%s GiB). %sTry"
                             " increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing"
                             " the engine." % (max_model_len, _gib(needed_blocks * page), _gib(available), estimate))
        concurrency = num_blocks / (-(-max_model_len // block_size))
        _log("INFO", "GPU KV cache size: {:,} tokens, Maximum concurrency for {:,} tokens per request: {:.2f}x"
             .format(int(concurrency * max_model_len), max_model_len, concurrency))
        budget = requested if kv_cache_memory_bytes is None else weights + available
        fakegpu.hold(spec, budget / GIB)
        self._spec, self._total, self._budget = spec, total, budget
        self.llm_engine = _Obj(
            vllm_config=_Obj(cache_config=_Obj(num_gpu_blocks=num_blocks, block_size=block_size,
                                               gpu_memory_utilization=util,
                                               kv_cache_memory_bytes=kv_cache_memory_bytes),
                             model_config=_Obj(max_model_len=max_model_len)))

    def generate(self, prompt, params=None, use_tqdm=True):
        spec = self._spec
        if spec.get("mode") == "hang_request":
            time.sleep(3600)
        overhead = spec.get("request_overhead_gib", 0) * GIB
        others = fakegpu.used_gib(spec, exclude_pid=os.getpid()) * GIB
        if self._budget + overhead > self._total - others:
            raise RuntimeError("CUDA out of memory. Tried to allocate %s GiB. GPU 0 has a total capacity of %s GiB"
                               " of which 0 bytes is free." % (_gib(overhead), _gib(self._total)))
        ids = prompt["prompt_token_ids"]
        return [_Obj(prompt_token_ids=ids, outputs=[_Obj(token_ids=[7] * params.max_tokens, finish_reason="length")])]
