"""Worlds for the simulator: every accounting regime of vllm-strings.md section 4 and each failure class.

A world is the fakegpu's world.json (device, model, vLLM version, adversity); a question is what
`vllm-fit search` is asked there (the fakegpu's truth() answers the same dict). Figures are per GPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

GIB, MIB = 1 << 30, 1 << 20

GPUS: Dict[str, Dict[str, Any]] = {
    "H100": {"name": "NVIDIA H100 80GB HBM3", "total_bytes": 85520809984, "compute_capability": "9.0",
             "sm_count": 132},
    "A100-40": {"name": "NVIDIA A100-SXM4-40GB", "total_bytes": 42298834944, "compute_capability": "8.0",
                "sm_count": 108},
    "L4": {"name": "NVIDIA L4", "total_bytes": 23580639232, "compute_capability": "8.9", "sm_count": 58},
    "A10G": {"name": "NVIDIA A10G", "total_bytes": 23836229632, "compute_capability": "8.6", "sm_count": 80},
    "4090": {"name": "NVIDIA GeForce RTX 4090", "total_bytes": 25386352640, "compute_capability": "8.9",
             "sm_count": 128},
}

DEEPSEEK_MLA: Dict[str, Any] = {"num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 1,
                                "hidden_size": 2048, "head_dim": 288, "dtype_bytes": 2}
"""The fakegpu costs 2 x KV heads x head_dim a token and layer, so one KV head of 288 stands for vLLM's one MLA
latent of kv_lora_rank + qk_rope_head_dim = 576, whole on every tensor-parallel rank (one head replicates)."""
DEEPSEEK_MLA_HUB: Dict[str, Any] = {"num_key_value_heads": 16, "head_dim": None, "kv_lora_rank": 512,
                                    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                                    "v_head_dim": 128, "moe_intermediate_size": 1408, "n_routed_experts": 64,
                                    "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1}
"""The hub's config.json keys of DeepSeek V2/V3-shaped models where they differ from the stand-in (vllm-fit reads
the file, the fakegpu the stand-in; None drops a key)."""

GRANITE_TINY_TYPES = (["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9
                      + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 4)
"""ibm-granite/granite-4.0-h-tiny's `layer_types` (36 mamba2 layers, 4 of attention), as its config.json spells it."""
NEMOTRON_NANO_PATTERN = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
"""nvidia/NVIDIA-Nemotron-Nano-9B-v2's `hybrid_override_pattern` (M mamba2, * attention, - MLP)."""


def _fake_types(hub_types: List[str]) -> List[str]:
    """The fakegpu's spelling of a hybrid's layers: "mamba" for a state layer, else full attention."""
    return ["mamba" if kind in ("mamba", "M", "linear_attention") else "full_attention" for kind in hub_types]


MODELS: Dict[str, Dict[str, Any]] = {
    "llama-8b": {"name": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "LlamaForCausalLM",
                 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                 "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
                 "max_position_embeddings": 131072, "dtype_bytes": 2, "weights_bytes": 16060522496,
                 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
    "qwen-7b": {"name": "Qwen/Qwen2.5-7B-Instruct", "architecture": "Qwen2ForCausalLM", "num_hidden_layers": 28,
                "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584, "head_dim": 128,
                "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 32768,
                "sliding_window": 131072, "use_sliding_window": False, "dtype_bytes": 2,
                "weights_bytes": 15231233024},
    "qwen-7b-yarn": {"name": "Qwen/Qwen2.5-7B-Instruct (YaRN x4)", "architecture": "Qwen2ForCausalLM",
                     "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
                     "hidden_size": 3584, "head_dim": 128, "intermediate_size": 18944, "vocab_size": 152064,
                     "max_position_embeddings": 32768, "dtype_bytes": 2, "weights_bytes": 15231233024,
                     "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "mistral-7b": {"name": "mistralai/Mistral-7B-v0.1", "architecture": "MistralForCausalLM",
                   "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "hidden_size": 4096, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 32000,
                   "max_position_embeddings": 32768, "sliding_window": 4096, "dtype_bytes": 2,
                   "weights_bytes": 14483464192},
    "llama-70b": {"name": "meta-llama/Llama-3.1-70B-Instruct", "architecture": "LlamaForCausalLM",
                  "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
                  "head_dim": 128, "intermediate_size": 28672, "vocab_size": 128256,
                  "max_position_embeddings": 131072, "dtype_bytes": 2, "weights_bytes": 141107412992,
                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
    "phi3-mini-128k": {"name": "microsoft/Phi-3-mini-128k-instruct", "architecture": "Phi3ForCausalLM",
                       "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                       "hidden_size": 3072, "head_dim": 96, "intermediate_size": 8192, "vocab_size": 32064,
                       "max_position_embeddings": 131072, "dtype_bytes": 2, "weights_bytes": 7642159104,
                       "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0],
                                        "original_max_position_embeddings": 4096}},
    # hybrid and sliding-window families: vLLM 0.29+ groups their layers by attention type (kv_groups.py)
    "gemma-2-9b": {"name": "google/gemma-2-9b-it", "architecture": "Gemma2ForCausalLM", "model_type": "gemma2",
                   "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "hidden_size": 3584, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
                   "max_position_embeddings": 8192, "sliding_window": 4096, "dtype_bytes": 2,
                   "weights_bytes": 18483000000,
                   "layer_types": ["sliding_attention", "full_attention"] * 21,
                   "config_omits": ["layer_types"]},  # the hub's config: Gemma 2 slides on even layers
    "gemma-3-12b": {"name": "google/gemma-3-12b-it", "architecture": "Gemma3ForCausalLM", "model_type": "gemma3_text",
                    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8,
                    "hidden_size": 3840, "head_dim": 256, "intermediate_size": 15360, "vocab_size": 262208,
                    "max_position_embeddings": 131072, "sliding_window": 1024, "dtype_bytes": 2,
                    "weights_bytes": 24370000000,
                    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 8},
    # MLA (issue 30): see DEEPSEEK_MLA below.
    "deepseek-v2-lite": dict(DEEPSEEK_MLA, name="deepseek-ai/DeepSeek-V2-Lite-Chat",
                             architecture="DeepseekV2ForCausalLM", intermediate_size=10944, vocab_size=102400,
                             max_position_embeddings=163840, weights_bytes=31414305792,
                             hub_config=dict(DEEPSEEK_MLA_HUB, model_type="deepseek_v2")),
    "moonlight-16b": dict(DEEPSEEK_MLA, name="moonshotai/Moonlight-16B-A3B-Instruct",
                          architecture="DeepseekV3ForCausalLM", intermediate_size=11264, vocab_size=163840,
                          max_position_embeddings=8192, weights_bytes=31926000000,
                          hub_config=dict(DEEPSEEK_MLA_HUB, model_type="deepseek_v3")),
    # state hybrids (issue 30): vLLM 0.29+ groups them; the fakegpu sizes their states as vLLM's
    # MambaStateShapeCalculator does, vllm-fit reads the hub's config.json (hub_config)
    "granite-4.0-h-tiny": {"name": "ibm-granite/granite-4.0-h-tiny", "architecture": "GraniteMoeHybridForCausalLM",
                           "num_hidden_layers": 40, "num_attention_heads": 12, "num_key_value_heads": 4,
                           "hidden_size": 1536, "head_dim": 128, "intermediate_size": 512, "vocab_size": 100352,
                           "max_position_embeddings": 131072, "dtype_bytes": 2, "weights_bytes": 13880000000,
                           "layer_types": _fake_types(GRANITE_TINY_TYPES),
                           "state": {"kind": "mamba2", "n_heads": 48, "head_dim": 64, "d_state": 128, "n_groups": 1,
                                     "d_conv": 4, "intermediate": 3072},
                           "hub_config": {"model_type": "granitemoehybrid", "layer_types": GRANITE_TINY_TYPES,
                                          "head_dim": None, "mamba_n_heads": 48, "mamba_d_head": 64,
                                          "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
                                          "mamba_expand": 2, "num_local_experts": 64, "num_experts_per_tok": 6,
                                          "shared_intermediate_size": 1024, "position_embedding_type": "nope"}},
    "nemotron-nano-9b": {"name": "nvidia/NVIDIA-Nemotron-Nano-9B-v2", "architecture": "NemotronHForCausalLM",
                         "num_hidden_layers": 31, "num_attention_heads": 40, "num_key_value_heads": 8,
                         "hidden_size": 4480, "head_dim": 128, "intermediate_size": 15680, "vocab_size": 131072,
                         "max_position_embeddings": 131072, "dtype_bytes": 2, "weights_bytes": 17770000000,
                         "layer_types": _fake_types([kind for kind in NEMOTRON_NANO_PATTERN if kind != "-"]),
                         "state": {"kind": "mamba2", "n_heads": 128, "head_dim": 80, "d_state": 128, "n_groups": 8,
                                   "d_conv": 4, "intermediate": 10240, "ssm_dtype_bytes": 4},
                         "hub_config": {"model_type": "nemotron_h", "layer_types": None, "num_hidden_layers": 56,
                                        "hybrid_override_pattern": NEMOTRON_NANO_PATTERN, "mamba_num_heads": 128,
                                        "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8,
                                        "conv_kernel": 4, "mamba_ssm_cache_dtype": "float32"}},
    "qwen3-next-80b": {"name": "Qwen/Qwen3-Next-80B-A3B-Instruct", "architecture": "Qwen3NextForCausalLM",
                       "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2,
                       "hidden_size": 2048, "head_dim": 256, "intermediate_size": 5120, "vocab_size": 151936,
                       "max_position_embeddings": 262144, "dtype_bytes": 2, "weights_bytes": 162700000000,
                       "layer_types": ["mamba", "mamba", "mamba", "full_attention"] * 12,
                       "state": {"kind": "deltanet", "k_heads": 16, "v_heads": 32, "k_dim": 128, "v_dim": 128,
                                 "conv_kernel": 4},
                       "hub_config": {"model_type": "qwen3_next", "layer_types": None, "full_attention_interval": 4,
                                      "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                                      "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                                      "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
                                      "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512}},
    "gpt-oss-20b": {"name": "openai/gpt-oss-20b", "architecture": "GptOssForCausalLM", "model_type": "gpt_oss",
                    "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "hidden_size": 2880, "head_dim": 64, "intermediate_size": 2880, "vocab_size": 201088,
                    "max_position_embeddings": 131072, "sliding_window": 128, "dtype_bytes": 2,
                    "weights_bytes": 13760000000,
                    "layer_types": ["sliding_attention", "full_attention"] * 12},
}

MEMORY = {"cuda_context_bytes": 500 * MIB, "non_torch_bytes": 300 * MIB, "nccl_bytes": 256 * MIB,
          "activation_peak_bytes": int(1.5 * GIB), "cudagraph_bytes": 600 * MIB, "runtime_headroom_bytes": 0}


@dataclass(frozen=True)
class Case:
    """One world and one question, with the failure class or regime it stands for."""

    name: str
    world: Dict[str, Any]
    question: Dict[str, Any]
    covers: str
    tags: List[str] = field(default_factory=list)


def world(version: str, gpu: str, model: str, *, count: int = 1, tp: int = 1, foreign_gib: float = 0.0,
          memory: Optional[Dict[str, Any]] = None, adversarial: Optional[Dict[str, Any]] = None,
          **extra: Any) -> Dict[str, Any]:
    """A world.json: `gpu` and `model` by name, memory figures as MEMORY with `memory` over them."""
    spec = {"vllm_version": version, "tensor_parallel_size": tp,
            "gpu": dict(GPUS[gpu], count=count, driver_version="550.54.15"),
            "foreign_bytes": int(foreign_gib * GIB), "model": dict(copy.deepcopy(MODELS[model]), dir="model"),
            "memory": dict(MEMORY, **(memory or {})), "adversarial": dict(adversarial or {}), "startup_s": 0.0}
    spec.update(extra)
    return spec


def question(max_len: int, granularity: int = 16, min_len: int = 1, **extra: Any) -> Dict[str, Any]:
    return dict({"min_len": min_len, "max_len": max_len, "granularity": granularity}, **extra)


def config_json(model: Dict[str, Any]) -> Dict[str, Any]:
    """The config.json a model with these numbers ships with."""
    keys = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
            "intermediate_size", "vocab_size", "max_position_embeddings", "rope_scaling", "sliding_window",
            "use_sliding_window", "model_type", "layer_types")
    config = {key: model[key] for key in keys if key in model and key not in model.get("config_omits", ())}
    config["architectures"] = [model["architecture"]]
    config["torch_dtype"] = {2: "bfloat16", 4: "float32", 1: "float8_e4m3fn"}[model.get("dtype_bytes", 2)]
    for key, value in model.get("hub_config", {}).items():  # the hub's keys where the fake's stand-ins differ
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def cases() -> List[Case]:
    """The simulator's worlds: at least one per accounting regime and per failure class of issue 8."""
    c: List[Case] = []

    def add(name: str, spec: Dict[str, Any], q: Dict[str, Any], covers: str, *tags: str) -> None:
        c.append(Case(name, dict(spec, name=name), q, covers, list(tags)))

    # --- accounting regimes, default objective (highest utilization, then the longest length)
    add("v0-0.5.5-l4-llama8b", world("0.5.5", "L4", "llama-8b"), question(131072), "V0 per-instance budget", "v0")
    add("v0-0.6.3-a10g-qwen7b", world("0.6.3", "A10G", "qwen-7b"), question(32768),
        "V0; Qwen2 sliding_window with use_sliding_window false", "v0")
    add("v0-0.6.4-l4-foreign", world("0.6.4.post1", "L4", "llama-8b", foreign_gib=1.0), question(131072),
        "V0 0.6.4 counts other processes inside the budget, no free-memory check", "v0", "foreign")
    add("v0-0.7.3-4090-mistral", world("0.7.3", "4090", "mistral-7b"), question(32768),
        "V0 with a sliding window (Mistral): the window caps a prompt's blocks", "v0")
    add("v1-0.8.5-l4-foreign", world("0.8.5", "L4", "llama-8b", foreign_gib=2.0), question(131072),
        "V1 before 0.9.1: everything resident counts inside the budget; no free-memory check", "v1", "foreign")
    add("v1-0.9.0.1-a10g", world("0.9.0.1", "A10G", "llama-8b"), question(131072),
        "V1 0.9.0: context inside the budget, null block hang at the capacity", "v1")
    add("v1-0.9.2-l4-foreign", world("0.9.2", "L4", "llama-8b", foreign_gib=3.0), question(131072),
        "V1 0.9.1+: free-memory check caps utilization at free/total", "v1", "foreign")
    add("v0-fallback-0.9.2", world("0.9.2", "A10G", "llama-8b", engine="v0",
                                   v0_fallback_reason="--kv-cache-dtype is not supported by the V1 Engine"),
        question(131072), "V0 fallback on 0.9.2 (V0 texts and accounting)", "v0")
    add("v1-0.10.1-h100-qwen", world("0.10.1.1", "H100", "qwen-7b"), question(32768),
        "V1 0.10.1: the whole context fits at the cap", "v1")
    add("v1-0.11-l4", world("0.11.0", "L4", "llama-8b"), question(131072), "V1 0.11, no auto-fit", "v1")
    add("v1-0.13-a10g-yarn", world("0.13.0", "A10G", "qwen-7b-yarn"), question(131072),
        "YaRN multiplies the original length up to 0.29", "v1", "rope")
    add("v1-0.14-l4-autofit", world("0.14.0", "L4", "llama-8b"), question(131072),
        "V1 0.14: max_model_len=-1 supported", "v1")
    add("v1-0.20-4090-graphs", world("0.20.0", "4090", "llama-8b"), question(131072),
        "0.20+: CUDA graphs inside the budget", "v1")
    add("v1-0.28-l4", world("0.28.0", "L4", "llama-8b"), question(131072),
        "0.28: start check without the null block (request hangs at the capacity)", "v1")
    add("v1-0.29-l4-nullblock", world("0.29.0", "L4", "llama-8b"), question(131072),
        "0.29+: the null block counted at the start", "v1")
    add("v1-0.30-a10g-yarn", world("0.30.0", "A10G", "qwen-7b-yarn"), question(32768),
        "0.30+: YaRN no longer multiplies the maximum", "v1", "rope")
    add("v1-0.31-l4-context", world("0.31.0", "L4", "llama-8b"), question(131072),
        "0.31+: the CUDA context inside the budget", "v1")
    add("v1-0.32-l4", world("0.32.0", "L4", "llama-8b"), question(131072), "0.32 reference version", "v1")
    add("v1-0.33-a100-phi3-longrope", world("0.33.0", "A100-40", "phi3-mini-128k"), question(131072),
        "LongRoPE: auto-fit's length is not a ceiling unless vLLM says it reduced it", "v1", "rope")
    add("v1-0.34-l4-extensible", world("0.34.0", "L4", "llama-8b"), question(131072),
        "0.34: the extensible KV cache, no free-memory check", "v1")

    # --- failure classes
    add("class1-headroom-0.32", world("0.32.0", "L4", "llama-8b", memory={"runtime_headroom_bytes": 1200 * MIB}),
        question(131072), "class 1: request OOM above some U; the answer must be proven one step up", "oom")
    add("class1-headroom-0.10", world("0.10.1.1", "A10G", "llama-8b",
                                      memory={"runtime_headroom_bytes": 900 * MIB}),
        question(131072), "class 1 on 0.10: the OOM message names one allocation", "oom")
    add("class2-foreign-0.6.4-cap", world("0.6.4.post1", "A10G", "llama-8b", foreign_gib=2.0), question(131072),
        "class 2: no free-memory check; 0.95 works though free/total is lower", "foreign")
    add("class3-weights-too-big", world("0.32.0", "L4", "llama-70b"), question(131072),
        "class 3: weights do not fit at the cap: nothing fits", "nothing")
    add("class3-min-len-too-long", world("0.32.0", "L4", "llama-8b"), question(131072, min_len=100000),
        "class 3: --min-len does not start at the cap", "nothing")
    add("class3-profile-too-big", world("0.11.0", "L4", "llama-8b", memory={"activation_peak_bytes": 7 * GIB}),
        question(131072), "class 3: the profile run does not fit", "nothing")
    add("class4-hang-long-0.32", world("0.32.0", "H100", "llama-8b",
                                       adversarial={"hang_when": {"max_model_len_gt": 65536, "at": "start"}}),
        question(131072), "class 4: starts hang above 64k; shorter works", "hang")
    add("flaky-first-start-0.32", world("0.32.0", "L4", "llama-8b", adversarial={"flaky_crash_once": True}),
        question(131072), "a flaky first start (NCCL/CUDA), retried", "flaky")
    add("slow-release-0.32", world("0.32.0", "L4", "llama-8b", adversarial={"slow_release_s": 2.0}),
        question(131072), "memory released slowly after each trial", "slow")
    add("len-dependent-activation-0.32", world("0.32.0", "L4", "llama-8b",
                                               adversarial={"capacity_depends_on_len": 16384}),
        question(131072), "the profile grows with max_model_len", "adversarial")
    add("tp2-0.32-l4x2", world("0.32.0", "L4", "llama-8b", count=2), question(131072, tensor_parallel_size=2),
        "tensor parallelism 2: weights split, NCCL buffers", "tp")
    add("tp4-0.20-a100x4-70b", world("0.20.0", "A100-40", "llama-70b", count=4),
        question(131072, tensor_parallel_size=4), "tensor parallelism 4 on a 70B model", "tp")

    # --- found by the random worlds (random_worlds.py), kept as named ones
    add("v0-0.5.5-a10g-foreign-request-oom", world("0.5.5", "A10G", "mistral-7b", foreign_gib=2.45, memory={
        "cuda_context_bytes": 489 * MIB, "non_torch_bytes": 724 * MIB, "activation_peak_bytes": 2831 * MIB,
        "cudagraph_bytes": 652 * MIB, "runtime_headroom_bytes": 227 * MIB}),
        question(32768, granularity=1, min_len=1024),
        "V0 budgets its own memory only: above the free memory the request runs out, and the OOM numbers"
        " name one small allocation (a walk of 0.01 steps from 0.95)", "v0", "foreign", "oom")
    add("v1-0.32-l4-yarn-request-oom", world("0.32.0", "L4", "qwen-7b-yarn", memory={
        "cuda_context_bytes": 331 * MIB, "non_torch_bytes": 857 * MIB, "activation_peak_bytes": 1961 * MIB,
        "cudagraph_bytes": 938 * MIB, "runtime_headroom_bytes": 1689 * MIB}), question(131072, granularity=128),
        "0.30+ no longer multiplies YaRN: the model's maximum is 32768; a too-long verdict at one level holds at"
        " every level", "v1", "rope", "oom")
    add("v0-0.6.4-l4-window-target", world("0.6.4.post1", "L4", "mistral-7b", memory={
        "cuda_context_bytes": 371 * MIB, "non_torch_bytes": 894 * MIB, "activation_peak_bytes": 3038 * MIB,
        "cudagraph_bytes": 1351 * MIB}), question(32768, granularity=128, min_len=1024, target_len=16384),
        "--target-len with a sliding window on V0: the page size still follows config.json", "v0", "target")
    add("class3-min-len-after-request-oom-0.17", world("0.17.1", "L4", "llama-8b", foreign_gib=3.47, memory={
        "cuda_context_bytes": 588 * MIB, "non_torch_bytes": 238 * MIB, "activation_peak_bytes": 1900 * MIB,
        "cudagraph_bytes": 879 * MIB}), question(65536, granularity=1024, min_len=4096),
        "class 3: where the request serves, the pool is too small for --min-len: nothing fits", "nothing")
    add("class3-fixed-util-foreign-0.11", world("0.11.0", "A100-40", "llama-8b", foreign_gib=2.8),
        question(32768, gpu_memory_utilization=0.92),
        "class 3: a fixed utilization above the free memory: vLLM refuses at any length", "nothing", "foreign")
    add("class3-fixed-util-request-oom-0.14", world("0.14.0", "4090", "qwen-7b-yarn", foreign_gib=4.27, memory={
        "cuda_context_bytes": 358 * MIB, "non_torch_bytes": 491 * MIB, "activation_peak_bytes": 819 * MIB,
        "cudagraph_bytes": 1044 * MIB, "runtime_headroom_bytes": 748 * MIB}),
        question(65536, granularity=128, min_len=1024, gpu_memory_utilization=0.76),
        "class 3: at a fixed utilization the request runs out of memory at every length: the shortest says so",
        "nothing", "oom")
    add("class3-kv-bytes-too-big-0.31", world("0.31.0", "A10G", "qwen-7b"), question(32768, kv_cache_memory=9 * GIB),
        "class 3: a fixed KV size that does not fit beside the weights: out of memory at any length", "nothing")

    # --- KV cache groups (issue 20): hybrid layers on 0.29+, a window the fake sizes as full attention
    add("v1-0.32-l4-gemma2-hybrid", world("0.32.0", "L4", "gemma-2-9b"), question(8192),
        "Gemma 2 (no layer_types): sliding and full groups; the pool's length from vLLM's own figures", "v1",
        "hybrid")
    add("v1-0.34-a100-gemma3-hybrid", world("0.34.0", "A100-40", "gemma-3-12b"), question(131072),
        "Gemma 3, five sliding groups to one full, on the extensible cache", "v1", "hybrid")
    add("v1-0.29-l4-gptoss-hybrid", world("0.29.0", "L4", "gpt-oss-20b", foreign_gib=5.0),
        question(131072, granularity=1, min_len=1024),
        "GPT-OSS, window 128 on every other layer, beside another process, exact length", "v1", "hybrid",
        "foreign")
    add("fixed-kv-0.32-gemma2-hybrid", world("0.32.0", "4090", "gemma-2-9b"),
        question(8192, granularity=1, min_len=1024, kv_cache_memory=1 * GIB),
        "a fixed KV size in pool blocks of 21 layers", "fixed", "hybrid")
    add("target-len-0.33-gemma3-hybrid", world("0.33.0", "A100-40", "gemma-3-12b"), question(131072, target_len=65536),
        "--target-len on a hybrid model: the least utilization", "target", "hybrid")
    add("v1-0.32-a10g-mistral-window", world("0.32.0", "A10G", "mistral-7b", foreign_gib=3.0), question(32768),
        "a window on every layer that this (simulated) vLLM sizes as full attention: the trial's figures say so",
        "v1", "hybrid")
    add("v1-0.28-l4-gemma2-upward", world("0.28.0", "L4", "gemma-2-9b"), question(8192, granularity=1, min_len=1024),
        "before 0.29 no group is read off the pool: after the verified fit, the next length up (not a"
        " bisection from the maximum)", "v1", "hybrid")

    # --- other objectives
    add("fixed-util-0.32", world("0.32.0", "L4", "llama-8b"), question(131072, gpu_memory_utilization=0.9),
        "memory knob fixed: utilization", "fixed")
    add("fixed-kv-0.10.2", world("0.10.2", "L4", "llama-8b"), question(131072, kv_cache_memory=3 * GIB),
        "memory knob fixed: kv_cache_memory_bytes (0.10.2 estimate ignores the null block)", "fixed")
    add("fixed-kv-0.32-granular", world("0.32.0", "A10G", "qwen-7b"),
        question(32768, granularity=256, kv_cache_memory=1536 * MIB), "fixed KV bytes, granularity 256", "fixed")
    add("target-len-0.32", world("0.32.0", "L4", "llama-8b"), question(131072, target_len=16384),
        "--target-len: least utilization", "target")
    add("target-len-0.8.5", world("0.8.5", "A10G", "llama-8b"), question(131072, target_len=8192),
        "--target-len on V1 0.8.5", "target")
    add("max-utilization-0.9-0.32", world("0.32.0", "L4", "llama-8b"), question(131072, max_utilization=0.9),
        "--max-utilization 0.9", "cap")
    return c
