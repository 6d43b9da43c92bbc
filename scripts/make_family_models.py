"""Make tiny real models of the families people serve, each with its hub config's attention keys.

Random weights saved by transformers (so vLLM loads real weights, the path users take), the tiny
Llama's tokenizer, and per-layer KV pages of 32 KiB on the CPU backend (2 KV heads of dimension 32,
bfloat16, 128-token blocks), like the tiny Llama; DeepSeek-V2's MLA latent is 576 wide (the only
width the CPU MLA kernel takes), Granite 4.0-H adds mamba2 layers, Jamba mamba ones and Qwen3-Next gated
DeltaNet ones.
Run it with the vLLM environment's interpreter:
    python scripts/make_family_models.py OUT_DIR TOKENIZER_DIR [FAMILY ...]
A family whose folder holds a finished model is left as it is.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

_MARKER = "family-model-complete.json"
_SHAPE = dict(vocab_size=4096, hidden_size=128, intermediate_size=256, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, bos_token_id=0, eos_token_id=1, pad_token_id=2)
_LONGROPE = [1.0] * 16  # head_dim / 2

FAMILIES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    # Gemma 2: sliding on even layers, no layer_types in the hub's config
    "gemma2": ("Gemma2", dict(num_hidden_layers=2, sliding_window=4096, max_position_embeddings=8192 * 4,
                              query_pre_attn_scalar=32, attn_logit_softcapping=50.0,
                              final_logit_softcapping=30.0)),
    # Gemma 3 (text): 5 sliding layers to 1 full, named in layer_types
    "gemma3": ("Gemma3Text", dict(num_hidden_layers=6, sliding_window=512, max_position_embeddings=32768,
                                  query_pre_attn_scalar=32, rope_scaling=None,
                                  layer_types=["sliding_attention"] * 5 + ["full_attention"])),
    # Gemma 4 (text): 5 sliding layers to 1 full whose heads are twice as wide (global_head_dim), so its
    # page is twice the sliding ones' and vLLM gives the sliding groups blocks of twice the tokens
    "gemma4": ("Gemma4Text", dict(num_hidden_layers=6, sliding_window=512, max_position_embeddings=32768,
                                  global_head_dim=64, hidden_size_per_layer_input=0, vocab_size_per_layer_input=4096,
                                  layer_types=["sliding_attention"] * 5 + ["full_attention"])),
    # Gemma 4 as the small hub models: the last layers reuse earlier layers' KV cache (num_kv_shared_layers),
    # and with attention_k_eq_v the global layers have num_global_key_value_heads (here 1 of 64: one page)
    "gemma4_shared": ("Gemma4Text", dict(num_hidden_layers=8, sliding_window=512, max_position_embeddings=32768,
                                         global_head_dim=64, num_global_key_value_heads=1, attention_k_eq_v=True,
                                         num_kv_shared_layers=2, hidden_size_per_layer_input=0,
                                         vocab_size_per_layer_input=4096,
                                         layer_types=(["sliding_attention"] * 3 + ["full_attention"]) * 2)),
    # Gemma 3n (text): 4 sliding layers to 1 full, the last 5 of 10 reuse earlier layers' KV cache
    "gemma3n": ("Gemma3nText", dict(num_hidden_layers=10, sliding_window=512, max_position_embeddings=32768,
                                    num_kv_shared_layers=5, intermediate_size=[256] * 10,
                                    hidden_size_per_layer_input=16, vocab_size_per_layer_input=4096,
                                    laurel_rank=8, altup_num_inputs=2, activation_sparsity_pattern=[0.0] * 10,
                                    layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 2)),
    # Phi-3-mini-128k: LongRoPE, original 4096, a window longer than any length
    "phi3": ("Phi3", dict(num_hidden_layers=2, sliding_window=262144, max_position_embeddings=32768,
                          original_max_position_embeddings=4096,
                          rope_scaling={"type": "longrope", "short_factor": _LONGROPE, "long_factor": _LONGROPE})),
    # Mistral with a window on every layer
    "mistral": ("Mistral", dict(num_hidden_layers=2, sliding_window=1024, max_position_embeddings=32768)),
    # Mixtral: mixture of experts, full attention
    "mixtral": ("Mixtral", dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                                sliding_window=None, max_position_embeddings=32768)),
    # Qwen3: explicit head_dim, full attention
    "qwen3": ("Qwen3", dict(num_hidden_layers=2, max_position_embeddings=32768, use_sliding_window=False)),
    # Qwen2 with its window switched off
    "qwen2": ("Qwen2", dict(num_hidden_layers=2, max_position_embeddings=32768, sliding_window=4096,
                            use_sliding_window=False, max_window_layers=2)),
    # GPT-OSS: attention sinks, a window of 128 on every other layer
    "gpt_oss": ("GptOss", dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                               sliding_window=128, max_position_embeddings=32768,
                               layer_types=["sliding_attention", "full_attention"],
                               rope_scaling={"rope_type": "yarn", "factor": 1.0, "beta_fast": 32.0,
                                             "beta_slow": 1.0, "original_max_position_embeddings": 32768,
                                             "truncate": False})),
    # DeepSeek-V2-Lite's attention: MLA, a 512-wide latent and a 64-wide rope key (the CPU MLA kernel
    # takes only this 576-wide latent), one dense layer then experts
    "deepseek_v2": ("DeepseekV2", dict(num_hidden_layers=2, kv_lora_rank=512, q_lora_rank=None,
                                       qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                                       num_key_value_heads=4, head_dim=192, n_routed_experts=4,
                                       num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=64,
                                       first_k_dense_replace=1, n_group=1, topk_group=1,
                                       max_position_embeddings=32768,
                                       rope_scaling=None)),
    # GLM-4.7-Flash (glm4_moe_lite): MLA as DeepSeek-V2-Lite's, a wider value head, sigmoid-routed experts
    "glm4_moe_lite": ("Glm4MoeLite", dict(num_hidden_layers=2, kv_lora_rank=512, q_lora_rank=64, qk_rope_head_dim=64,
                                          qk_nope_head_dim=64, v_head_dim=128, num_key_value_heads=4, head_dim=64,
                                          n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                          moe_intermediate_size=64, n_group=1, topk_group=1,
                                          mlp_layer_types=["dense", "sparse"], max_position_embeddings=32768,
                                          rope_scaling=None)),
    # Llama 4 text: chunked local attention on three layers of four, NoPE on the fourth
    "llama4": ("Llama4Text", dict(num_hidden_layers=4, attention_chunk_size=512, intermediate_size_mlp=256,
                                  num_local_experts=2, num_experts_per_tok=1, interleave_moe_layer_step=2,
                                  max_position_embeddings=32768, rope_scaling=None)),
    # Granite 4.0-H: Mamba2 layers with one attention layer among them (layer_types as the hub names them)
    "granite4h": ("GraniteMoeHybrid", dict(num_hidden_layers=4, mamba_n_heads=8, mamba_d_head=32,
                                           mamba_d_state=16, mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2,
                                           num_local_experts=2, num_experts_per_tok=1, shared_intermediate_size=256,
                                           max_position_embeddings=32768, position_embedding_type="rope",
                                           layer_types=["mamba", "mamba", "attention", "mamba"])),
    # the same with a state of 67 KiB a layer: vLLM raises the attention block from 128 to 384 tokens
    "granite4h_wide": ("GraniteMoeHybrid", dict(num_hidden_layers=4, mamba_n_heads=8, mamba_d_head=32,
                                                mamba_d_state=128, mamba_n_groups=1, mamba_d_conv=4,
                                                mamba_expand=2, num_local_experts=2, num_experts_per_tok=1,
                                                shared_intermediate_size=256, max_position_embeddings=32768,
                                                position_embedding_type="rope",
                                                layer_types=["mamba", "mamba", "attention", "mamba"])),
    # Qwen3-Next: gated DeltaNet layers, full attention every fourth (the CPU GDN kernel takes head dim 128 only)
    "qwen3_next": ("Qwen3Next", dict(num_hidden_layers=4, linear_key_head_dim=128, linear_value_head_dim=128,
                                     linear_num_key_heads=1, linear_num_value_heads=2, linear_conv_kernel_dim=4,
                                     num_experts=2, num_experts_per_tok=1, moe_intermediate_size=64,
                                     shared_expert_intermediate_size=64, max_position_embeddings=32768)),
    # OLMo hybrid: gated DeltaNet layers named in layer_types, full attention on every fourth (its GDN kernel
    # calls Triton, which vLLM's CPU backend lacks: the real tests expect the environment problem named)
    "olmo_hybrid": ("OlmoHybrid", dict(num_hidden_layers=4, linear_key_head_dim=128, linear_value_head_dim=128,
                                       linear_num_key_heads=1, linear_num_value_heads=2, linear_conv_kernel_dim=4,
                                       max_position_embeddings=32768,
                                       layer_types=["linear_attention"] * 3 + ["full_attention"])),
    # Nemotron-H: mamba2, MLP and attention layers named by one pattern, the SSM state in float32
    "nemotron_h": ("NemotronH", dict(mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16, n_groups=1,
                                     conv_kernel=4, max_position_embeddings=32768,
                                     layers_block_type=["mamba", "mlp", "mamba", "attention"])),
    # Falcon-H1: attention and mamba2 side by side in every layer (mamba_d_ssm as tiiuae/Falcon-H1-* name it)
    "falcon_h1": ("FalconH1", dict(num_hidden_layers=4, mamba_d_ssm=256, mamba_n_heads=8, mamba_d_head=32,
                                   mamba_d_state=16, mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2,
                                   max_position_embeddings=32768)),
    # Zamba2: mamba2 layers, one with the shared attention block beside it
    "zamba2": ("Zamba2", dict(num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                              n_mamba_heads=8, mamba_headdim=32, mamba_d_state=16, mamba_ngroups=1, mamba_d_conv=4,
                              mamba_expand=2,
                              layers_block_type=["mamba", "hybrid", "mamba", "mamba"], num_mem_blocks=1,
                              use_shared_attention_adapter=False, max_position_embeddings=32768)),
    # Jamba: mamba (v1) layers, attention on every fourth from the third (attn_layer_period/offset, as
    # ai21labs/AI21-Jamba-* name them), experts on every other layer
    "jamba": ("Jamba", dict(num_hidden_layers=4, attn_layer_period=4, attn_layer_offset=2, expert_layer_period=2,
                            expert_layer_offset=1, num_experts=2, num_experts_per_tok=1, mamba_d_state=16,
                            mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8, use_mamba_kernels=False,
                            max_position_embeddings=32768)),
    # LFM2-MoE: LFM2's layers, hidden_size-wide convolutions, experts after the first dense layer
    "lfm2_moe": ("Lfm2Moe", dict(num_hidden_layers=4, layer_types=["conv", "conv", "full_attention", "conv"],
                                 num_dense_layers=1, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                 max_position_embeddings=32768)),
    # Mamba2 (Mamba-Codestral's architecture): attention-free, one state per request whatever its length
    "mamba2": ("Mamba2", dict(num_hidden_layers=4, num_heads=8, head_dim=32, expand=2, state_size=16, n_groups=1,
                              conv_kernel=4)),
    # MiniCPM3: MLA's projections, but vLLM caches full keys and values per head, qk_nope + qk_rope wide
    "minicpm3": ("MiniCPM3", dict(num_hidden_layers=2, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=64,
                                  qk_rope_head_dim=16, qk_nope_head_dim=48, v_head_dim=64,
                                  max_position_embeddings=32768)),
    # LongCat-Flash: two MLA sublayers in each decoder layer (num_layers), a softmax router with zero experts
    "longcat_flash": ("LongcatFlash", dict(num_layers=2, num_key_value_heads=4, kv_lora_rank=512, q_lora_rank=64,
                                           qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, head_dim=64,
                                           ffn_hidden_size=256, expert_ffn_hidden_size=64, n_routed_experts=4,
                                           zero_expert_num=2, moe_topk=2, max_position_embeddings=32768,
                                           rope_scaling=None)),
    # Bamba: mamba2 layers, attention at attn_layer_indices (vLLM implemented it up to 0.23 only)
    "bamba": ("Bamba", dict(num_hidden_layers=4, attn_layer_indices=[2], mamba_n_heads=8, mamba_d_head=32,
                            mamba_d_state=16, mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2,
                            max_position_embeddings=32768)),
    # LFM2: short-convolution layers and one attention layer
    "lfm2": ("Lfm2", dict(num_hidden_layers=4, layer_types=["conv", "conv", "full_attention", "conv"],
                          block_auto_adjust_ff_dim=False, block_ff_dim=256, max_position_embeddings=32768)),
    # Falcon-7B: multi-query attention (one KV head whatever num_kv_heads says), parallel attention and MLP
    "falcon": ("Falcon", dict(num_hidden_layers=2, multi_query=True, new_decoder_architecture=False,
                              parallel_attn=True, bias=False, alibi=False, max_position_embeddings=32768)),
    # StarCoder (GPTBigCode): multi-query attention, GPT-2's names (n_embd, n_head, n_layer, n_positions)
    "gpt_bigcode": ("GPTBigCode", dict(n_layer=2, multi_query=True, n_positions=32768)),
}


SHAPE_NOT_TAKEN: Dict[str, Tuple[str, ...]] = {"falcon": ("head_dim", "num_key_value_heads", "intermediate_size")}
"""The shared shape's keys a family's config class refuses (Falcon derives head_dim; its MLP is 4 x hidden)."""

HUB_STYLE: Dict[str, Dict[str, Any]] = {
    # what the hub's config.json files say where transformers 5 writes its own normal form
    "gemma2": {"layer_types": None, "sliding_window": 4096},
    "qwen2": {"sliding_window": 4096},  # with transformers 5's layer_types, all full attention
    "llama4": {"layer_types": None},  # the hub's Llama 4 configs name no_rope_layers only
    "granite4h": {"layer_types": ["mamba", "mamba", "attention", "mamba"]},  # ibm-granite/granite-4.0-h-*
    "granite4h_wide": {"layer_types": ["mamba", "mamba", "attention", "mamba"]},
    "qwen3_next": {"layer_types": None, "full_attention_interval": 4},  # Qwen/Qwen3-Next-80B-A3B-*
    "nemotron_h": {"layers_block_type": None, "hybrid_override_pattern": "M-M*", "num_hidden_layers": 4},
    "zamba2": {"layers_block_type": ["mamba", "hybrid", "mamba", "mamba"]},  # Zyphra/Zamba2-*: mamba, hybrid
    "mamba2": {"num_attention_heads": None, "num_key_value_heads": None, "intermediate_size": None},
    "lfm2": {"conv_dim": 128, "block_dim": 128},  # LiquidAI/LFM2-*: both = hidden_size; vLLM 0.32 reads them
    "gemma4": {"per_layer_config": None, "global_head_dim": 64},  # google/gemma-4-*: global_head_dim
    "gemma4_shared": {"per_layer_config": None, "global_head_dim": 64, "num_global_key_value_heads": 1},
    "glm4_moe_lite": {"first_k_dense_replace": 1},  # zai-org/GLM-4.7-Flash: vLLM 0.32 reads it, not mlp_layer_types
    "minicpm3": {"head_dim": None, "qk_head_dim": None},  # openbmb/MiniCPM3-4B names neither
    # meituan-longcat/LongCat-Flash-Chat: vLLM's longcat_flash.py reads these three, transformers writes none
    "longcat_flash": {"mla_scale_q_lora": True, "mla_scale_kv_lora": True, "zero_expert_type": "identity"},
    # tiiuae/falcon-7b: num_attention_heads 71, multi_query true, no KV head count
    "falcon": {"num_kv_heads": None},
    # bigcode/starcoder: n_embd, n_head, n_layer, multi_query true, no KV head count
    "gpt_bigcode": {"num_key_value_heads": None, "head_dim": None, "intermediate_size": None, "hidden_size": None,
                    "num_attention_heads": None, "num_hidden_layers": None},
    "phi3": {"rope_parameters": None, "rope_scaling": {"type": "longrope", "short_factor": _LONGROPE,
                                                       "long_factor": _LONGROPE}},
}
"""Keys rewritten after saving (None: removed), so that the config is the one users download."""


def make_family_model(family: str, out_dir: Path, tokenizer_dir: Path) -> Path:
    """Write one family's tiny model to out_dir unless a finished one is there; return out_dir."""
    if (out_dir / _MARKER).exists():
        return out_dir
    import torch
    import transformers

    prefix, keys = FAMILIES[family]
    config_class = getattr(transformers, prefix + "Config")
    model_class = getattr(transformers, prefix.replace("Text", "") + "ForCausalLM")
    config = config_class(**{key: value for key, value in {**_SHAPE, **keys}.items()
                             if key not in SHAPE_NOT_TAKEN.get(family, ())})
    config.dtype = torch.bfloat16
    torch.manual_seed(0)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = model_class(config).to(torch.bfloat16)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if family == "longcat_flash":
        _drop_zero_experts(out_dir / "model.safetensors", keys["n_routed_experts"])
    path = out_dir / "config.json"
    saved = json.loads(path.read_text())
    for key, value in HUB_STYLE.get(family, {}).items():
        saved.pop(key, None)
        if value is not None:
            saved[key] = value
    path.write_text(json.dumps(saved, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tokenizer_dir / name).exists():
            shutil.copy(tokenizer_dir / name, out_dir / name)
    (out_dir / _MARKER).write_text(json.dumps({"family": family}) + "\n")
    return out_dir


def _drop_zero_experts(weights: Path, routed: int) -> None:
    """transformers saves projections for LongCat's zero (identity) experts too; vLLM loads routed ones only."""
    import re

    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    expert = re.compile(r"\.experts\.(\d+)\.")
    kept = {name: tensor for name, tensor in tensors.items()
            if not (match := expert.search(name)) or int(match.group(1)) < routed}
    save_file(kept, str(weights), metadata={"format": "pt"})


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: make_family_models.py OUT_DIR TOKENIZER_DIR [FAMILY ...]")
    root, tokenizer = Path(sys.argv[1]), Path(sys.argv[2])
    for name in sys.argv[3:] or list(FAMILIES):
        print(make_family_model(name, root / name, tokenizer))
