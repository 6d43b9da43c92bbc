"""Checks that need the model, the interpreter or the devices, all before the first launch.

Each raises BadInput (exit 2) or EnvironmentProblem (exit 3) with one line naming the fix, or adds
a note the terminal shows and the report keeps.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import List, Mapping, Optional

from ..errors import BadInput, EnvironmentProblem
from ..gpu import Devices
from ..logs.regime import Regime
from ..strategies.base import LengthSpace
from .envcheck import Interpreter
from .modelinfo import ModelInfo, looks_local, read_model_info
from .request import ObjectiveKind, SearchRequest

LONG_LEN_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


MAX_MODEL_NAME = 4096
"""A --model longer than this is no path or hub id (PATH_MAX is 4096)."""


def check_model(model: str, env: Mapping[str, str]) -> ModelInfo:
    """The model's facts; a path that does not exist is an environment problem, a file is bad input."""
    if not isinstance(model, str) or not model.strip() or "\x00" in model:
        raise BadInput("--model is empty; pass a model directory or a hub id such as org/name")
    if len(model) > MAX_MODEL_NAME:
        raise BadInput("--model is %d characters long; a model directory or hub id is shorter than %d"
                       % (len(model), MAX_MODEL_NAME))
    if model.startswith("~") and os.path.expanduser(model) == model:
        raise EnvironmentProblem("--model %s: the user %s does not exist here; pass the model's full path"
                                 % (model, model.split("/")[0]))
    path = Path(os.path.expanduser(model))
    if looks_local(model) and not path.exists():
        near = _near_names(path)
        hint = " (did you mean %s?)" % near if near else ""
        raise EnvironmentProblem("model path %s does not exist%s; pass a model directory or a hub id"
                                 % (model, hint))
    if path.exists() and not path.is_dir():
        raise BadInput("--model %s is a file; pass the model's directory (the one with config.json)" % model)
    return read_model_info(model, dict(env))


def _near_names(path: Path) -> Optional[str]:
    """A sibling whose name is close to a mistyped model directory."""
    try:
        siblings = [p.name for p in path.parent.iterdir() if p.is_dir()] if path.parent.is_dir() else []
    except OSError:
        return None
    close = difflib.get_close_matches(path.name, siblings, n=1)
    return str(path.parent / close[0]) if close else None


def length_space(request: SearchRequest, model: ModelInfo, notes: List[str]) -> LengthSpace:
    """The candidate lengths: [min, max] from the request, max defaulting to the model's maximum."""
    derived = model.derived_max_len
    long_ok = request.env.get(LONG_LEN_ENV) in ("1", "true", "True")
    if request.target_len is not None:
        if derived is not None and request.target_len > derived and not long_ok:
            raise BadInput("--target-len %d is over the model's maximum %d (from %s); lower it (or set %s=1)"
                           % (request.target_len, derived, model.max_len_source, LONG_LEN_ENV))
        return LengthSpace(request.target_len, request.target_len, 1)
    max_len = request.max_len
    if max_len is None:
        if derived is None and model.path is not None:
            raise BadInput("--max-len is needed: %s/config.json names no maximum length (max_position_embeddings,"
                           " max_seq_len, ...); pass --max-len N" % model.path)
        if derived is None:
            raise BadInput("--max-len is needed: %s is not a local model directory and the hub cache has no"
                           " config.json for it; pass the model's directory, or --max-len N (e.g. 32768) for a"
                           " hub id vLLM downloads" % request.model)
        max_len = derived
    elif derived is not None and max_len > derived and not long_ok:
        notes.append("--max-len %d is over the model's maximum %d (from %s); searching up to %d"
                     % (max_len, derived, model.max_len_source, derived))
        max_len = derived
    min_len = request.min_len or 1
    if min_len > max_len:
        raise BadInput("--min-len %d is greater than the upper bound %d; lower --min-len" % (min_len, max_len))
    space = LengthSpace(min_len, max_len, request.granularity)
    if space.lowest > space.highest:
        raise BadInput("no multiple of --granularity %d lies in [%d, %d]; lower --granularity"
                       % (request.granularity, min_len, max_len))
    return space


def check_tensor_parallel(request: SearchRequest, model: ModelInfo, devices: Devices) -> None:
    """The heads must split evenly across the ranks, and there must be as many devices as ranks."""
    heads, tp = model.num_attention_heads, request.tensor_parallel_size
    if heads is not None and heads % tp:
        raise BadInput("--tensor-parallel-size %d does not divide the model's %d attention heads;"
                       " use a divisor of %d" % (tp, heads, heads))
    visible = devices.preflight.visible_count
    if visible is not None and visible < tp:
        raise BadInput("--tensor-parallel-size %d needs %d devices, but %d are visible (CUDA_VISIBLE_DEVICES=%s);"
                       " lower it or make more devices visible"
                       % (tp, tp, visible, request.env.get("CUDA_VISIBLE_DEVICES", "unset")))


def check_devices(request: SearchRequest, devices: Devices, notes: List[str]) -> None:
    """Warn (or, with --require-idle, refuse) when other processes hold device memory."""
    preflight = devices.preflight
    if not preflight.available:
        return  # the view shows the reason; the report keeps it in `preflight`
    others = preflight.held_by_others
    if others:
        held = ", ".join("%s (pid %d, %s MiB)" % (p.name, p.pid, (p.used_bytes or 0) >> 20) for p in others)
        if request.require_idle:
            raise EnvironmentProblem("the device is not idle: %s; stop them or drop --require-idle" % held)
        notes.append("warning: memory on the device is held by %s" % held)
    total = preflight.total_bytes
    if request.kv_cache_memory is not None and total is not None and request.kv_cache_memory >= total:
        raise BadInput("--kv-cache-memory %d bytes is not below the device's total memory (%d bytes); lower it"
                       % (request.kv_cache_memory, total))


def check_knob(request: SearchRequest, regime: Regime, version: Optional[str], notes: List[str]) -> None:
    """The KV-bytes knob exists only from vLLM 0.10.2, and the CPU backend ignores it before 0.20."""
    uses_kv_bytes = request.kv_cache_memory is not None or request.objective is ObjectiveKind.LEAST_KV_MEMORY
    if not uses_kv_bytes:
        return
    if not regime.since(0, 10, 2):
        raise BadInput("kv_cache_memory_bytes needs vLLM 0.10.2 or newer (this is %s); use"
                       " --gpu-memory-utilization, or on the CPU backend VLLM_CPU_KVCACHE_SPACE" % version)
    if regime.kv_from_environment:
        raise BadInput("vLLM %s on the CPU backend ignores kv_cache_memory_bytes (honoured from 0.20); size the"
                       " KV cache with VLLM_CPU_KVCACHE_SPACE=<GiB> and search without --kv-cache-memory" % version)


def is_cpu_backend(interpreter: Interpreter) -> bool:
    """The interpreter runs vLLM's CPU backend (vllm-cpu, or a +cpu torch)."""
    return (interpreter.torch_version or "").endswith("+cpu") or interpreter.vllm_distribution == "vllm-cpu"


def utilization_cap(request: SearchRequest, devices: Devices, regime: Regime, notes: List[str]) -> float:
    """--max-utilization, lowered to what is free where a budget above it cannot serve.

    V1 from 0.9.1 refuses a start whose budget exceeds the free memory. V0 (but 0.6.4) budgets its
    own memory only, so above the free memory its KV cache or its first request runs out of memory.
    V1 0.6.5-0.9.0 and V0 0.6.4 count other processes' memory inside the budget, and 0.34's
    extensible cache sizes itself to what is free: there the cap stays --max-utilization
    (vllm-strings.md section 4).
    """
    cap = request.max_utilization
    free_cap = devices.preflight.utilization_cap()
    if free_cap is not None and free_cap < cap and regime.foreign_memory_outside_budget:
        notes.append("utilization capped at %.2f: that is what is free on the device" % free_cap)
        cap = free_cap
    if cap < 0.01:
        raise EnvironmentProblem("the device has less than 1% of its memory free; free it first")
    return cap


def guess_block_size(request: SearchRequest, regime: Regime, model: ModelInfo) -> int:
    """vLLM's default block size before a launch reports it (vllm-strings.md 4g)."""
    size = request.engine_args.get("block_size")
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    size = regime.default_block_size(mla=model.latent_attention)
    per_token = model.layer_kv_bytes_per_rank(request.tensor_parallel_size)
    if model.mamba_state and per_token:
        # vLLM raises the attention block until one attention page holds a mamba state, in whole multiples of
        # the kernel's block (platforms/interface.py `_align_hybrid_block_size`); a state on one rank is a share
        # of its heads, with mamba2's groups raised to the ranks where they do not divide (mamba2_state_shape)
        conv, ssm = model.mamba_state
        ranks, (groups, group_conv) = request.tensor_parallel_size, model.mamba_groups
        conv += (ranks - groups) * group_conv if groups and groups % ranks else 0
        state = (conv + ssm * _ssm_element_bytes(request, regime, model)) // ranks
        size = max(size, size * -(-state // (size * per_token)))
    return size


def _ssm_element_bytes(request: SearchRequest, regime: Regime, model: ModelInfo) -> int:
    """The SSM state's element size: --engine-arg mamba_ssm_cache_dtype, else the model's own (Nemotron-H),
    else float32 on a CPU with AVX-512 BF16 (vLLM 0.32's CPU platform resets it for its accelerated
    kernels), else the model's dtype."""
    given = str(request.engine_args.get("mamba_ssm_cache_dtype") or "auto")
    if given != "auto":
        return {"float32": 4}.get(given, 2)
    if model.ssm_dtype_bytes:
        return model.ssm_dtype_bytes
    if regime.cpu and cpu_flag("avx512_bf16"):
        return 4
    return model.dtype_bytes or 2


def cpu_flag(flag: str) -> bool:
    """Whether this machine's CPU has the flag (/proc/cpuinfo; False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            return any(line.startswith("flags") and flag in line.split() for line in info)
    except OSError:
        return False


def check_concurrency(request: SearchRequest) -> None:
    """--concurrency N needs vLLM to admit N sequences: an explicit max_num_seqs below N cannot."""
    seqs = request.engine_args.get("max_num_seqs")
    if request.concurrency > 1 and isinstance(seqs, int) and not isinstance(seqs, bool) and seqs < request.concurrency:
        raise BadInput("--engine-arg max_num_seqs=%d is below --concurrency %d: vLLM would never run %d sequences"
                       " at once; raise it or drop it (vllm-fit then sets max_num_seqs=%d)"
                       % (seqs, request.concurrency, request.concurrency, request.concurrency))
