"""Small simulated GPUs for the fixtures and the in-process property tests, on the shared fakegpu.

TEST DOUBLE (tests/fakegpu: vLLM 0.4-0.34's memory accounting, log lines and errors on an NVIDIA
GPU, with `truth()`): one memory model and one world schema for every test that needs GPU memory
semantics, which cannot run on this CPU-only machine. `fixture_world` states a world in the few
numbers a test cares about (GiB, bytes per token of KV, a mode of misbehaviour) and writes the
fakegpu's world.json; `environment` is what makes the tool's trials and NVML use it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional

TESTS = Path(__file__).resolve().parent
FAKEGPU = TESTS / "fakegpu"
if str(FAKEGPU / "pkg") not in sys.path:
    sys.path.append(str(FAKEGPU / "pkg"))  # for _fakeworld; appended, so this process keeps its own pynvml

import _fakeworld as fakeworld  # noqa: E402, F401  (re-exported: the fake's memory model, works(), truth())

GIB, MIB = 1 << 30, 1 << 20
KV_BYTES_PER_LAYER_TOKEN = 2 * 8 * 128 * 2
"""K and V, 8 KV heads of 128, bf16: a layer's KV bytes per token (Llama 3.1 8B's shape)."""

MODES: Dict[str, Dict[str, Any]] = {
    "normal": {},
    "hang_start": {"hang_when": {"max_model_len_gt": -2, "at": "start"}},
    "hang_request": {"hang_when": {"max_model_len_gt": 0, "at": "request"}},
    "crash": {"crash_exit": 139},
    "flaky_start": {"flaky_crash_once": "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"},
    "hang_on_start": {},
}
"""Misbehaviours by name: every start hangs, every request hangs, a segfault, one NCCL crash, the Nth start
hangs (with `hang_on_start=N`)."""


def fixture_model(kv_bytes_per_token: int = 131072, derived_max_len: int = 131072,
                  weights_gib: float = 14.0) -> Dict[str, Any]:
    """A Llama-shaped model whose layer count gives the KV bytes per token."""
    return {"name": "fake/llama", "architecture": "LlamaForCausalLM", "dir": "fake-model",
            "num_hidden_layers": max(1, kv_bytes_per_token // KV_BYTES_PER_LAYER_TOKEN), "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_size": 4096, "head_dim": 128, "intermediate_size": 14336,
            "vocab_size": 128256, "max_position_embeddings": derived_max_len, "dtype_bytes": 2,
            "weights_bytes": int(weights_gib * GIB)}


def fixture_world(version: str = "0.32.0", total_gib: float = 80.0, weights_gib: float = 14.0,
                  activation_gib: float = 2.0, request_overhead_gib: float = 0.0, kv_bytes_per_token: int = 131072,
                  derived_max_len: int = 131072, release_delay_s: float = 0.0, devices: int = 1,
                  others: Iterable[Mapping[str, Any]] = (), mode: str = "normal", hang_on_start: Optional[int] = None,
                  helper_ignores_sigterm: bool = False, echo_env: Iterable[str] = (),
                  gpu_lost_after: Optional[int] = None, context_mib: int = 0, non_torch_mib: int = 0) -> Dict[str, Any]:
    """A fakegpu world.json in the numbers a test states: an 80 GiB device, 14 GiB of weights, 2 GiB of
    activations and 128 KiB of KV per token unless told otherwise; no CUDA context or non-torch memory
    (so the figures add up in the test's own arithmetic) unless asked."""
    adversarial: Dict[str, Any] = dict(MODES[mode], slow_release_s=release_delay_s, log_engine_args=True,
                                       echo_env=list(echo_env), holder_ignores_sigterm=helper_ignores_sigterm)
    if hang_on_start is not None:
        adversarial["hang_on_launch"] = hang_on_start
    if gpu_lost_after is not None:
        adversarial["gpu_lost_after_launches"] = gpu_lost_after
    return {
        "name": "fixture", "vllm_version": version, "tensor_parallel_size": 1, "startup_s": 0.0, "block_size": 16,
        "gpu": {"name": "NVIDIA Fake H100 80GB HBM3", "total_bytes": int(total_gib * GIB), "count": devices,
                "compute_capability": "9.0", "sm_count": 132, "driver_version": "550.54.15"},
        "foreign_processes": [{"pid": other["pid"], "name": other["name"], "bytes": int(other["gib"] * GIB)}
                              for other in others],
        "model": fixture_model(kv_bytes_per_token, derived_max_len, weights_gib),
        "memory": {"cuda_context_bytes": context_mib * MIB, "non_torch_bytes": non_torch_mib * MIB, "nccl_bytes": 0,
                   "activation_peak_bytes": int(activation_gib * GIB), "cudagraph_bytes": 0,
                   "runtime_headroom_bytes": int(request_overhead_gib * GIB)},
        "adversarial": adversarial,
    }


def write_world(world: Mapping[str, Any], folder: Path) -> Path:
    """world.json in `folder`, with a fresh state (no trial has run in it yet)."""
    path = folder / "world.json"
    path.write_text(json.dumps(world))
    for stale in (folder / "world.json.state", folder / "world.json.lock"):
        if stale.exists():
            stale.unlink()
    return path


def environment(world_path: Path, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The tool's environment in a world: the fake vllm, torch and pynvml first on the path, nvidia-smi on PATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKEGPU / "pkg"), str(TESTS.parent)])
    env["FAKEWORLD"] = str(world_path)
    env["PATH"] = os.pathsep.join([str(FAKEGPU / "bin"), env.get("PATH", "")])
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["VLLM_FIT_VIA"] = "llm"  # the fakegpu has LLM(...), no OpenAI server
    return env


def loaded(world: Mapping[str, Any]) -> Dict[str, Any]:
    """A world as _fakeworld reads it from its file (for truth() and works() in the test process)."""
    return dict(world, adversarial=dict(world.get("adversarial") or {}), _path="/nonexistent/world.json")
