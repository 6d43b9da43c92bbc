"""Layers whose KV pages differ from the model's one head shape, and layers that keep no KV cache: Gemma 4's
global layers (global_head_dim, num_global_key_value_heads), transformers' per_layer_config, and the last
num_kv_shared_layers layers of Gemma 3n and Gemma 4 (read from config.json without importing transformers)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .config_basics import model_dtype_bytes, positive_int, text_config


def kv_shared_layers(config: Dict[str, Any]) -> int:
    """How many of the last layers reuse an earlier layer's keys and values and keep no cache of their own
    (Gemma 3n's and Gemma 4's `num_kv_shared_layers`; vLLM's kv_sharing_target_layer_name)."""
    shared = text_config(config).get("num_kv_shared_layers")
    return shared if isinstance(shared, int) and not isinstance(shared, bool) and shared > 0 else 0


GLOBAL_HEAD_DIM_MODEL_TYPES = frozenset({"gemma4_text", "gemma4_unified_text"})
"""Gemma 4: its full-attention layers take `global_head_dim` (512 where config.json names none) and, with
`attention_k_eq_v`, `num_global_key_value_heads` (transformers' Gemma4TextConfig, which vLLM's gemma4.py
reads as per_layer_config)."""
_PAGE_OVERRIDES = frozenset({"head_dim", "num_key_value_heads"})


def layer_overrides(config: Dict[str, Any]) -> Optional[Dict[int, Dict[str, Any]]]:
    """Per layer index, the attention numbers that differ from the model's: transformers' per_layer_config,
    or Gemma 4's global layers as transformers fills them in ({}: none differ; None: per-layer settings
    this tool does not read)."""
    per_layer = config.get("per_layer_config")
    if per_layer is not None:
        if not isinstance(per_layer, dict):
            return None
        found: Dict[int, Dict[str, Any]] = {}
        for key, value in per_layer.items():
            if not str(key).isdigit() or not isinstance(value, dict) or set(value) - _PAGE_OVERRIDES:
                return None
            found[int(key)] = value
        return found
    if str(config.get("model_type", "")) not in GLOBAL_HEAD_DIM_MODEL_TYPES:
        return {}
    types = config.get("layer_types")
    if not isinstance(types, list):
        return None
    override: Dict[str, Any] = {"head_dim": config.get("global_head_dim", 512)}
    if config.get("attention_k_eq_v") and config.get("num_global_key_value_heads") is not None:
        override["num_key_value_heads"] = config["num_global_key_value_heads"]
    return {index: override for index, kind in enumerate(types) if kind == "full_attention"}


def layer_page_shapes(config: Dict[str, Any]) -> Optional[Tuple[Tuple[int, int], ...]]:
    """Per cached layer (as `layer_windows` lists them), its KV heads and the bytes one token takes per KV
    head, where some layer's attention numbers differ from the model's (Gemma 4's global layers,
    transformers' per_layer_config); None where every layer is alike, or a number is missing."""
    config = text_config(config)
    overrides, layers, dtype = layer_overrides(config), config.get("num_hidden_layers"), model_dtype_bytes(config)
    if not overrides or not isinstance(layers, int) or not positive_int(layers) or dtype is None:
        return None
    heads = config.get("num_attention_heads")
    base = {"num_key_value_heads": config.get("num_key_value_heads", heads),
            "head_dim": config.get("head_dim") or (config.get("hidden_size", 0) // heads
                                                   if isinstance(heads, int) and positive_int(heads) else None)}
    shapes = []
    for index in range(layers - kv_shared_layers(config)):
        numbers = {**base, **overrides.get(index, {})}
        kv_heads, head_dim = numbers["num_key_value_heads"], numbers["head_dim"]
        if not isinstance(kv_heads, int) or not isinstance(head_dim, int) or not positive_int(kv_heads) \
                or not positive_int(head_dim):
            return None
        shapes.append((kv_heads, 2 * head_dim * dtype))
    return tuple(shapes)
