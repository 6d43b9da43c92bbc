"""What makes a fit reusable: the model, the software, the device, and every option that changes it.

Same fingerprint, same answer: a cached fit is returned without a launch. Left out on purpose:
the interpreter's path, timeouts, retries, output paths (they do not change the answer), and
secret-named engine arguments (they do not change memory use, and must not reach the cache).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Mapping

from .redact import is_secret_name, redacted

MEMORY_ENV = ("VLLM_USE_V1", "VLLM_ATTENTION_BACKEND", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
              "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "CUDA_DEVICE_ORDER",
              "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND")
"""Environment variables that change how much memory vLLM takes or which lengths it accepts."""
OUTSIDE_SEARCH = frozenset({"engine_args", "model", "tensor_parallel_size"})
"""Fingerprinted options recorded beside the search settings (engine arguments without secrets)."""


def fingerprint_inputs(prepared: Any) -> Dict[str, Any]:
    """The facts that decide the answer of one prepared search (prepare.Prepared).

    The search options are those the option table marks as changing the answer, and only where
    they apply to the objective; secret-named engine arguments are left out.
    """
    from .prepare.request import applied_options, fingerprinted_fields

    request, interpreter, preflight = prepared.request, prepared.interpreter, prepared.devices.preflight
    kind = prepared.objective
    search: Dict[str, Any] = {"objective": kind.value, "min_len": prepared.space.min_len,
                              "max_len": prepared.space.max_len, "granularity": prepared.space.granularity,
                              "utilization_cap": prepared.utilization_cap}
    search.update(applied_options(request, kind, sorted(fingerprinted_fields() - OUTSIDE_SEARCH)))
    engine_args = {key: redacted(value) for key, value in request.engine_args.items() if not is_secret_name(key)}
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
        "search": search,
        "env": {key: request.env.get(key) for key in MEMORY_ENV if request.env.get(key) is not None},
    }


def fingerprint(inputs: Mapping[str, Any]) -> str:
    """A stable hash of the inputs (SHA-256 of their canonical JSON)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
