"""A fake `vllm` package for tests: GPU memory accounting that cannot run on this CPU-only machine.

TEST DOUBLE, used only under tests/ by putting tests/fakes first on PYTHONPATH. The accounting is
fakegpu.plan_engine (vllm-strings.md 3a, 4c, 4d, 2b, 1d); this module renders it the way a V1
engine of 0.22+ prints it: 0.31+ log prefixes, the capacity line, the errors verbatim, and a torch
OOM on the full-length request when the budget leaves too little headroom (3c).
Modes (world file): normal, hang_start, hang_request, crash, flaky_start (the first
`flaky_failures` starts fail with an NCCL error, then it works), hang_on_start (the start numbered
`hang_on_start` hangs, the others work).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from typing import Optional

import fakegpu

_SPEC = fakegpu.world()
__version__ = _SPEC.get("version", "0.32.0")
GIB = fakegpu.GIB


def _log(level: str, message: str) -> None:
    sys.stdout.write(fakegpu.log_line(level, message) + "\n")
    sys.stdout.flush()


class SamplingParams:
    def __init__(self, max_tokens: int = 16, **kwargs):
        self.max_tokens = max_tokens


class _Obj:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LLM:
    """Enough of vllm.LLM for the probe: start-up memory checks, KV sizing, one request."""

    def __init__(self, model: str, max_model_len: Optional[int] = None, gpu_memory_utilization: Optional[float] = None,
                 kv_cache_memory_bytes: Optional[int] = None, tensor_parallel_size: int = 1, **kwargs):
        spec = _SPEC
        mode = spec.get("mode", "normal")
        if spec.get("gpu_lost_after"):
            fakegpu.bump_counter(spec, "engines")
        _log("INFO", "Initializing a V1 LLM engine (v%s) with config: model=%r, max_seq_len=%s"
             % (__version__, model, max_model_len))
        _log("INFO", "non-default args: %r" % (kwargs,))  # as vLLM 0.10+ logs them: secrets included
        for name in spec.get("echo_env", []):  # a library that prints its environment
            _log("INFO", "environment: %s=%s" % (name, os.environ.get(name)))
        # an engine-core-like grandchild (optionally deaf to SIGTERM), so that group cleanup is exercised
        deaf = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if spec.get("helper_ignores_sigterm") else ""
        self._helper = subprocess.Popen([sys.executable, "-c", "import signal, time; %stime.sleep(3600)" % deaf])
        _log("INFO", "Starting to load model %s..." % model)
        if mode == "hang_start" or (mode == "hang_on_start" and
                                    fakegpu.bump_counter(spec, "starts") == spec.get("hang_on_start", 1)):
            time.sleep(3600)
        if mode == "crash":
            os._exit(139)
        if mode == "flaky_start" and fakegpu.bump_counter(spec, "flaky") <= spec.get("flaky_failures", 1):
            raise RuntimeError("NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
        others = fakegpu.used_gib(spec, exclude_pid=os.getpid()) * GIB
        try:
            plan = fakegpu.plan_engine(spec, max_model_len, gpu_memory_utilization, kv_cache_memory_bytes, others)
        except fakegpu.EngineError as error:
            kind, message = fakegpu.render_error(error)
            raise {"ValueError": ValueError, "RuntimeError": RuntimeError}[kind](message) from None
        fakegpu.hold(spec, plan["weights"] / GIB)
        for line in fakegpu.start_log(plan, others, kv_cache_memory_bytes is not None):
            _log("INFO", line)
        length = plan["max_model_len"]
        fakegpu.hold(spec, plan["budget"] / GIB)
        self._plan = plan
        self.llm_engine = _Obj(
            vllm_config=_Obj(cache_config=_Obj(num_gpu_blocks=plan["num_blocks"], block_size=plan["block_size"],
                                               gpu_memory_utilization=plan["util"],
                                               kv_cache_memory_bytes=kv_cache_memory_bytes),
                             model_config=_Obj(max_model_len=length)))

    def generate(self, prompt, params=None, use_tqdm=True):
        if _SPEC.get("mode") == "hang_request":
            time.sleep(3600)
        plan = self._plan
        if not plan["request_ok"]:
            raise RuntimeError(fakegpu.request_oom_message(plan))
        prompts = prompt if isinstance(prompt, list) else [prompt]  # one prompt, or a list, as vLLM takes them
        return [_Obj(prompt_token_ids=p["prompt_token_ids"],
                     outputs=[_Obj(token_ids=[7] * params.max_tokens, finish_reason="length")]) for p in prompts]
