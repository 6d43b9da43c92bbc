"""Refuse a config.json whose numbers the accounting cannot use, before any launch: counts that are not
whole numbers in range (a few may be 0, or one per layer, as real configs give them), an unknown dtype, a
misshapen architectures, rope or text_config entry."""

from __future__ import annotations

from typing import Any, Dict

from .config_basics import DTYPE_BYTES, text_config

_BOUNDS = {"kv_lora_rank": 1 << 20, "qk_rope_head_dim": 1 << 20, "qk_nope_head_dim": 1 << 20,
           "num_hidden_layers": 100000, "num_attention_heads": 100000, "num_key_value_heads": 100000,
           "head_dim": 1 << 20, "hidden_size": 1 << 24, "intermediate_size": 1 << 26, "vocab_size": 1 << 26,
           "sliding_window": 1 << 40, "max_window_layers": 100000, "attention_chunk_size": 1 << 40,
           "no_rope_layer_interval": 100000, "mamba_n_heads": 1 << 20, "mamba_d_head": 1 << 20,
           "mamba_d_state": 1 << 20, "mamba_n_groups": 1 << 20, "mamba_d_conv": 1 << 10, "mamba_expand": 1 << 10,
           "mamba_num_heads": 1 << 20, "mamba_head_dim": 1 << 20, "linear_num_key_heads": 1 << 20,
           "linear_num_value_heads": 1 << 20, "linear_key_head_dim": 1 << 20, "linear_value_head_dim": 1 << 20,
           "linear_conv_kernel_dim": 1 << 10, "mamba_d_ssm": 1 << 24, "attn_layer_period": 100000,
           "global_head_dim": 1 << 20, "num_global_key_value_heads": 100000, "n_mamba_heads": 1 << 20,
           "mamba_headdim": 1 << 20, "attention_head_dim": 1 << 20, "mamba_ngroups": 1 << 20, "conv_L_cache": 1 << 10,
           "conv_dim": 1 << 24, "n_head_kv": 100000, "num_kv_heads": 100000, "multi_query_group_num": 100000}
"""The numbers the accounting reads, with the largest value any real model comes near."""
ZERO_MEANS_NONE = frozenset({"max_window_layers", "sliding_window", "attention_chunk_size", "no_rope_layer_interval",
                             "qk_rope_head_dim"})
"""Numbers real configs set to 0 (Mellum's and Qwen-style configs' max_window_layers 0: every layer from the
first; a window or chunk of 0: none)."""
PER_LAYER_KEYS = frozenset({"intermediate_size"})
"""Numbers a config may give per layer as a list (Gemma 3n's intermediate_size)."""
KNOWN_DTYPES = frozenset({*DTYPE_BYTES, "auto", "float8_e4m3fn", "float8_e5m2", "fp8"})


def check_config(config: Dict[str, Any]) -> None:
    """Refuse (ValueError) a config.json whose numbers the accounting cannot use: counts that are not
    whole numbers in range, an unknown dtype, a misshapen architectures, rope or text_config entry."""
    if "text_config" in config and config["text_config"] is not None and not isinstance(config["text_config"], dict):
        raise ValueError("text_config must be a mapping, got %s" % type(config["text_config"]).__name__)
    if isinstance(config.get("text_config"), dict) and config["text_config"].get("text_config") is not None:
        raise ValueError("text_config holds another text_config; vLLM reads the language model's numbers from one"
                         " level only")
    for section in (config, text_config(config)):
        quantization = section.get("quantization_config")
        if quantization is not None and not isinstance(quantization, dict):
            raise ValueError("quantization_config must be a mapping (with quant_method), got %s"
                             % type(quantization).__name__)
    architectures = config.get("architectures")
    if architectures is not None and (not isinstance(architectures, list)
                                      or not all(isinstance(a, str) for a in architectures)):
        raise ValueError("architectures must be a list of names, got %r" % (architectures,))
    for section in (config, text_config(config)):
        for key, bound in _BOUNDS.items():
            value = section.get(key)
            if value is None or (key in ("sliding_window", "max_window_layers") and value is False):
                continue
            if key in PER_LAYER_KEYS and isinstance(value, list) and value:
                values = value  # Gemma 3n: one per layer
            else:
                values = [value]
            least = 0 if key in ZERO_MEANS_NONE else 1
            if any(not isinstance(one, int) or isinstance(one, bool) or not least <= one <= bound for one in values):
                raise ValueError("%s must be a whole number from %d to %d%s, got %r" % (
                    key, least, bound, " (or a list of them, one per layer)" if key in PER_LAYER_KEYS else "", value))
        for key in ("torch_dtype", "dtype"):
            value = section.get(key)
            if value is not None and (not isinstance(value, str) or value not in KNOWN_DTYPES):
                raise ValueError("%s %r is not a dtype vLLM loads (%s)" % (key, value, ", ".join(sorted(DTYPE_BYTES))))
        for key in ("rope_scaling", "rope_parameters"):
            value = section.get(key)
            if value is not None and not isinstance(value, dict):
                raise ValueError("%s must be a mapping, got %s" % (key, type(value).__name__))
    text = text_config(config)
    shared, layers = text.get("num_kv_shared_layers"), text.get("num_hidden_layers")
    if shared is not None and (not isinstance(shared, int) or isinstance(shared, bool) or shared < 0
                               or (isinstance(layers, int) and shared >= layers)):
        raise ValueError("num_kv_shared_layers must be a whole number below num_hidden_layers, got %r"
                         % (shared,))
    heads, kv_heads = text.get("num_attention_heads"), text.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv_heads, int) and heads % kv_heads:
        raise ValueError("num_key_value_heads %d does not divide num_attention_heads %d (each KV head serves a"
                         " whole group of query heads)" % (kv_heads, heads))
