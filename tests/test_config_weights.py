"""config.json's weights estimate (used where no weight files are on disk): close for the dense and Mixtral
shapes it covers, unknown for shapes it does not (narrow or shared experts, MLA), never several times off.
The configs are the hub's numbers of each model (config.json on huggingface.co); the parameter counts are the
ones their model cards state."""

from __future__ import annotations

import pytest

from vllm_fit.prepare.config_weights import config_weights_bytes

LLAMA_31_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
               "torch_dtype": "bfloat16", "tie_word_embeddings": False}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
                "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                "num_local_experts": 8, "num_experts_per_tok": 2, "torch_dtype": "bfloat16"}
QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "intermediate_size": 6144,
                 "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "head_dim": 128,
                 "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
                 "torch_dtype": "bfloat16"}
DEEPSEEK_V2_LITE = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
                    "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 64,
                    "n_shared_experts": 2, "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": None,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_attention_heads": 16,
                    "num_hidden_layers": 27, "num_key_value_heads": 16, "vocab_size": 102400,
                    "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("config, parameters", [(LLAMA_31_8B, 8.03e9), (MIXTRAL_8X7B, 46.7e9)])
def test_the_shapes_it_covers_come_within_a_few_percent(config, parameters):
    assert config_weights_bytes(config) == pytest.approx(2 * parameters, rel=0.03)


@pytest.mark.parametrize("config", [QWEN3_30B_A3B, DEEPSEEK_V2_LITE], ids=["qwen3-moe", "deepseek-v2-lite"])
def test_experts_of_another_width_and_mla_leave_it_unknown(config):
    """Qwen3-30B-A3B came to about 8 times its 61 GB (its experts are 768 wide, not 6144), DeepSeek-V2-Lite to
    5.4 GB of its 31 GB (64 routed and 2 shared experts counted as one dense MLP)."""
    assert config_weights_bytes(config) is None
