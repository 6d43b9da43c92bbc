"""What makes a fit reusable: the model, the software, the device, and every option that changes it.

Same fingerprint, same answer: a cached fit is returned without a launch. Left out on purpose:
the interpreter's path, timeouts, retries, output paths (they do not change the answer), and
secret-named engine arguments (they do not change memory use, and must not reach the cache).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Mapping

from .redact import is_secret_name

MEMORY_ENV = ("VLLM_USE_V1", "VLLM_ATTENTION_BACKEND", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
              "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "CUDA_DEVICE_ORDER")
"""Environment variables that change how much memory vLLM takes or which lengths it accepts."""


def fingerprint_inputs(prepared: Any) -> Dict[str, Any]:
    """The facts that decide the answer of one prepared search (fitter.Prepared)."""
    request, interpreter, preflight = prepared.request, prepared.interpreter, prepared.devices.preflight
    engine_args = {key: value for key, value in request.engine_args.items() if not is_secret_name(key)}
    return {
        "model": request.model,
        "model_config_sha256": prepared.model.config_sha256,
        "model_revision": request.engine_args.get("revision"),
        "vllm": interpreter.vllm_version,
        "vllm_distribution": interpreter.vllm_distribution,
        "torch": interpreter.torch_version,
        "cuda": interpreter.cuda_version,
        "hip": interpreter.hip_version,
        "devices": [{"name": d.name, "total_bytes": d.total_bytes} for d in preflight.devices],
        "driver": preflight.driver,
        "tensor_parallel_size": request.tensor_parallel_size,
        "engine_args": engine_args,
        "search": {
            "objective": prepared.objective_name,
            "strategy": request.strategy,
            "min_len": prepared.space.min_len,
            "max_len": prepared.space.max_len,
            "granularity": prepared.space.granularity,
            "gpu_memory_utilization": request.gpu_memory_utilization,
            "kv_cache_memory_bytes": request.kv_cache_memory_bytes,
            "utilization_cap": prepared.utilization_cap,
            "target_len": request.target_len,
            "search_knob": request.search_knob if request.target_len is not None else None,
            "kv_granularity": request.kv_granularity if request.search_knob == "kv-cache-memory" else None,
        },
        "env": {key: request.env.get(key) for key in MEMORY_ENV if request.env.get(key) is not None},
    }


def fingerprint(inputs: Mapping[str, Any]) -> str:
    """A stable hash of the inputs (SHA-256 of their canonical JSON)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
