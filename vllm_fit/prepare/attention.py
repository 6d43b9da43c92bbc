"""The attention shape config.json gives: KV bytes per token and per layer, which layers slide.

Read as transformers and vLLM read the same keys, without importing either; `text_config` holds the
language model's numbers in multimodal configs.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Tuple

from ..logs.kv_groups import Chunk, Span, State
from ..logs.regime import Engine, Version, default_engine
from .config_basics import model_dtype_bytes, positive_int, text_config
from .hybrid_layers import (
    DELTANET,
    SHORT_CONV_MODEL_TYPES,
    chunked_layers,
    falcon_h1_layers,
    jamba_layers,
    mamba_state,
    nemotron_layers,
    short_conv_layers,
    state_family,
    zamba2_config,
    zamba2_layers,
)
from .layer_pages import GLOBAL_HEAD_DIM_MODEL_TYPES, kv_shared_layers, layer_overrides, layer_page_shapes


def sliding_window(config: Dict[str, Any]) -> Optional[int]:
    """The sliding window the model really uses: Qwen2 configs carry one with use_sliding_window false."""
    config = text_config(config)
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is False or isinstance(window, bool) or not isinstance(window, int):
        return None
    return window if window > 0 else None


def kv_bytes_per_token(config: Dict[str, Any]) -> Optional[int]:
    """KV cache bytes per token where every layer's cache has one shape (a model-wide sliding window
    included: its pages are full attention's, only fewer of them are needed; MLA's latent on every layer);
    None for layouts it cannot know (per-layer attention types, latents beside other caches)."""
    config = text_config(config)
    if not _all_full(config.get("layer_types")) or config.get("attention_chunk_size") \
            or any(config.get(key) is not None for key in HYBRID_MARKERS):
        return None  # per-layer types, chunked local layers (Llama 4), layers that are not attention
    per_layer = layer_kv_bytes_per_token(config)
    layers = config.get("num_hidden_layers")
    if per_layer is None or not isinstance(layers, int) or isinstance(layers, bool) or layers <= 0 \
            or layer_page_shapes(config) is not None:
        return None
    return (layers - kv_shared_layers(config)) * per_layer


LATENT_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe_lite", "pangu_ultra_moe",
                                "longcat_flash", "axk1"})
"""Model types vLLM runs with multi-head latent attention on every layer and nothing else in the cache
(`is_deepseek_mla`; LongCat-Flash's two attention sublayers per decoder layer counted by `text_config`);
DeepSeek V3.2's sparse indexer, V4's compression and the linear hybrids add caches of their own and are
not in it."""
FULL_KV_LATENT_MODEL_TYPES = frozenset({"minicpm3"})
"""Model types with MLA's projections (kv_lora_rank) whose cache vLLM's V1 engine keeps as full keys and
values per attention head, qk_nope_head_dim + qk_rope_head_dim wide (vLLM's minicpm3.py: an Attention of
that head size with as many KV heads as heads); V0 sized its blocks by the model's head_dim instead."""
MLA_SINCE = (0, 7, 1)
"""vLLM caches one latent per token and layer from 0.7.1 (VLLM_MLA_DISABLE=1 turns it off); before, full
keys and values."""
_SPARSE_KEYS = ("index_topk", "index_head_dim", "compress_ratios", "linear_attn_config")


def version_unmodelled(model_type: Optional[str], latent: bool, version: Optional[Version],
                       env: Mapping[str, str]) -> Optional[str]:
    """Why this vLLM version lays the KV cache out otherwise than config.json's costing assumes (None: it
    does not): full keys and values in place of MLA's latent before 0.7.1 or with VLLM_MLA_DISABLE=1;
    MiniCPM3's blocks sized by its head_dim on V0."""
    if latent and ((version is not None and version < MLA_SINCE)
                   or str(env.get("VLLM_MLA_DISABLE", "0")).strip() not in ("", "0")):
        return "multi-head attention in place of MLA's latent (vLLM before 0.7.1, or VLLM_MLA_DISABLE=1)"
    if model_type in FULL_KV_LATENT_MODEL_TYPES and default_engine(version, env) is Engine.V0:
        return "keys and values of model type %s at the V0 engine's head size" % model_type
    return None


def latent_attention(config: Dict[str, Any]) -> bool:
    """Whether every layer caches MLA's latent (kv_lora_rank + qk_rope_head_dim wide, keys and values
    in one): the DeepSeek V2/V3 layout, without a sparse indexer or linear layers beside it."""
    config = text_config(config)
    return (str(config.get("model_type", "")) in LATENT_MODEL_TYPES and positive_int(config.get("kv_lora_rank"))
            and positive_int(config.get("qk_rope_head_dim")) and config.get("is_causal", True) is not False
            and not any(config.get(key) for key in _SPARSE_KEYS) and _all_full(config.get("layer_types")))


def full_kv_latent(config: Dict[str, Any]) -> bool:
    """Whether the model has MLA's projections but caches full keys and values (`FULL_KV_LATENT_MODEL_TYPES`)."""
    config = text_config(config)
    return str(config.get("model_type", "")) in FULL_KV_LATENT_MODEL_TYPES and positive_int(
        config.get("qk_nope_head_dim")) and positive_int(config.get("qk_rope_head_dim"))


FALCON_MODEL_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
"""Where vLLM's get_total_num_kv_heads looks, in its order (Falcon, Falcon-40B/180B, Llama 2, ChatGLM)."""


def cached_kv_heads(config: Dict[str, Any]) -> Any:
    """The KV heads vLLM caches per layer, as config.json gives them (not checked), by vLLM's
    get_total_num_kv_heads: one for multi-query attention (GPTBigCode, Falcon-7B; not Falcon's new decoder
    architecture), MPT's and DBRX's attn_config.kv_n_heads, then n_head_kv, num_kv_heads,
    num_key_value_heads, multi_query_group_num; else one per attention head, as also where the model's
    attention ignores them (Zamba2, MiniCPM3)."""
    config = text_config(config)
    model_type = str(config.get("model_type", ""))
    if model_type == "zamba2" or full_kv_latent(config):
        return config.get("num_attention_heads")
    if config.get("multi_query") is True and not (model_type in FALCON_MODEL_TYPES
                                                  and config.get("new_decoder_architecture")):
        return 1
    if model_type in ("mpt", "dbrx"):
        attention = config.get("attn_config")
        found = attention.get("kv_n_heads") if isinstance(attention, dict) else None
        return found if found is not None else config.get("num_attention_heads")
    return next((config[key] for key in KV_HEAD_KEYS if config.get(key) is not None),
                config.get("num_attention_heads"))


def _all_full(types: Any) -> bool:
    return types is None or (isinstance(types, list) and all(kind == "full_attention" for kind in types))


def layer_kv_bytes_per_token(config: Dict[str, Any]) -> Optional[int]:
    """KV cache bytes one token takes in one layer (keys and values, or MLA's one latent); None for
    layouts it cannot cost or missing numbers."""
    config = text_config(config)
    if config.get("kv_lora_rank") and latent_attention(config):
        dtype = model_dtype_bytes(config)
        return None if dtype is None else (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * dtype
    if config.get("kv_lora_rank") and not full_kv_latent(config):
        return None
    if str(config.get("model_type", "")) == "zamba2":  # zamba2.py: as many KV heads as query heads
        config = zamba2_config(config)
        config = {**config, "head_dim": config.get("attention_head_dim")}
    heads, kv_heads = config.get("num_attention_heads"), cached_kv_heads(config)
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if isinstance(heads, int)
                                          and not isinstance(heads, bool) and heads > 0 else None)
    if full_kv_latent(config):
        head_dim = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    dtype = model_dtype_bytes(config)
    if not isinstance(kv_heads, int) or not isinstance(head_dim, int) or dtype is None:
        return None
    if not positive_int(kv_heads) or not positive_int(head_dim):
        return None
    return 2 * kv_heads * head_dim * dtype


def unmodelled_attention(config: Dict[str, Any]) -> Optional[str]:
    """The attention kind whose KV cache this tool does not cost from config.json, in words (None: every
    layer is full or sliding-window attention): MLA's latent pages, mamba and linear-attention state pages,
    chunked local attention, or layer types it does not know."""
    config = text_config(config)
    if config.get("kv_lora_rank") and not latent_attention(config) and not full_kv_latent(config):
        return "multi-head latent attention as model type %s lays it out (kv_lora_rank %s)" % (
            config.get("model_type") or "unknown", config.get("kv_lora_rank"))
    if layer_overrides(config) is None:
        return "per-layer attention settings of model type %s (per_layer_config)" % (
            config.get("model_type") or "unknown")
    shaped = [key for key in config if config.get(key) is not None and _PER_TYPE_SHAPE.search(str(key))
              and not (key in ("global_head_dim", "num_global_key_value_heads")
                       and str(config.get("model_type", "")) in GLOBAL_HEAD_DIM_MODEL_TYPES)]
    shaped += [key for key in SHAPE_MARKERS if config.get(key) is not None and key not in shaped]
    if shaped:
        return "layers of one kind with heads of their own (%s) of model type %s" % (
            ", ".join(shaped[:2]), config.get("model_type") or "unknown")
    values, head_dim = config.get("v_head_dim"), config.get("head_dim")
    if not config.get("kv_lora_rank") and values is not None and values != head_dim:
        return "values of another width than keys (v_head_dim %s, head_dim %s) of model type %s" % (
            values, head_dim, config.get("model_type") or "unknown")
    types = config.get("layer_types")
    known = {"full_attention", "sliding_attention", "chunked_attention"}
    if mamba_state(config) is not None:
        known |= {"conv"} if str(config.get("model_type", "")) in SHORT_CONV_MODEL_TYPES else {
            "mamba", "linear_attention", "attention"}
    kinds = sorted({str(kind) for kind in types} - known) if isinstance(types, list) else []
    if kinds:
        return "layer types %s" % ", ".join(kinds[:4])
    if config.get("attention_chunk_size") and layer_windows(config) is None:
        return "chunked local attention (attention_chunk_size %s) of model type %s" % (
            config.get("attention_chunk_size"), config.get("model_type") or "unknown")
    markers = [key for key in HYBRID_MARKERS if config.get(key) is not None]
    if markers and mamba_state(config) is None:
        return "state or hybrid layers (%s) of model type %s" % (", ".join(markers[:2]),
                                                                  config.get("model_type") or "unknown")
    spans = layer_windows(config)
    if spans is not None and any(isinstance(span, State) for span in spans) and mamba_state(config) is None:
        return "state layers of model type %s whose sizes config.json does not give" % config.get("model_type")
    if spans is None and state_family(config) is not None:
        return "state layers of model type %s placed in a way this tool does not read" % config.get("model_type")
    return None


SHAPE_MARKERS = ("hybrid_layer_pattern",)
"""Keys by which configs place their sliding-window layers by a pattern of their own (MiMo-V2-Flash)."""
_PER_TYPE_SHAPE = re.compile(r"(^|_)(swa|sliding|local|global|full)_(\w*_)?(key_value_heads|head_dim)$"
                             r"|^num_(swa|sliding|local|global|full)_key_value_heads$")
"""Keys that give one kind of layer heads of its own (MiMo-V2-Flash's swa_num_key_value_heads and
swa_head_dim, Gemma 4's global ones outside its model types): never costed from the model's one head shape."""
HYBRID_MARKERS = ("full_attention_interval", "hybrid_override_pattern", "layers_block_type", "attn_type_list",
                  "linear_attn_config", "mamba_d_state", "ssm_cfg", "attn_layer_indices", "linear_num_value_heads",
                  "state_size")
"""Keys by which hybrid configs (Qwen3-Next, Nemotron-H, Zamba2, MiniMax, Kimi Linear, Granite, Jamba,
Falcon-H1 ...) and attention-free ones (Mamba, Mamba2, FalconMamba: `state_size`) say that some layers are
not attention: never costed as plain attention."""


def layer_windows(config: Dict[str, Any]) -> Optional[Tuple[Span, ...]]:
    """Each cached layer's span as transformers and vLLM read config.json (`_declared_spans`); layers that
    reuse an earlier layer's KV cache (the last `num_kv_shared_layers`) keep none and are left out."""
    spans, shared = _declared_spans(config), kv_shared_layers(config)
    if spans is None or not shared:
        return spans
    if shared >= len(spans) or any(isinstance(span, State) for span in spans):
        return None
    return spans[:len(spans) - shared]


def _declared_spans(config: Dict[str, Any]) -> Optional[Tuple[Span, ...]]:
    """Each layer's span as transformers and vLLM read config.json: `layer_types`, else Llama 4's
    chunked layers (every layer but the NoPE ones), else Qwen2's `use_sliding_window` from
    `max_window_layers` on, else `sliding_window_pattern` (every n-th layer full, or its letters: L local,
    G global), else Gemma 2's even layers, else the one window on every layer. None when the config names
    an attention type this tool does not know."""
    config = text_config(config)
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 < layers <= 100000:
        return None
    window = config.get("sliding_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    chunk = Chunk(config["attention_chunk_size"]) if positive_int(config.get("attention_chunk_size")) else None
    spans: Dict[str, Span] = {"full_attention": None, "sliding_attention": window, "chunked_attention": chunk}
    family = state_family(config)
    if family is not None:  # Granite 4.0-H names them as its hub config does
        spans.update({"mamba": State(), "linear_attention": State(), "attention": None})
    types = config.get("layer_types")
    if str(config.get("model_type", "")) in SHORT_CONV_MODEL_TYPES:
        return short_conv_layers(config, layers)
    if isinstance(types, list) and len(types) == layers:
        if any(kind not in spans or (kind in ("sliding_attention", "chunked_attention") and spans[kind] is None)
               for kind in types):
            return None
        return tuple(spans[kind] for kind in types)
    if chunk is not None:
        return chunked_layers(config, layers, chunk)
    if str(config.get("model_type", "")) == "nemotron_h":
        return nemotron_layers(config, layers)
    if str(config.get("model_type", "")) == "falcon_h1":
        return falcon_h1_layers(config, layers)
    if str(config.get("model_type", "")) == "zamba2":
        return zamba2_layers(config, layers)
    if str(config.get("model_type", "")) == "jamba":
        return jamba_layers(config, layers)
    if family == DELTANET:  # transformers: full attention every n-th layer
        interval = config.get("full_attention_interval", 4)
        if not positive_int(interval):
            return None
        return tuple(None if (i + 1) % interval == 0 else State() for i in range(layers))
    if window is None or config.get("use_sliding_window") is False:
        return (None,) * layers
    if config.get("use_sliding_window") is True and isinstance(config.get("max_window_layers"), int):
        first = config["max_window_layers"]
        return tuple(window if i >= first else None for i in range(layers))
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    if isinstance(pattern, str):  # EXAONE 4's "LLLG": local, local, local, global, repeated
        if not pattern or set(pattern.upper()) - {"L", "G"}:
            return None
        return tuple(window if pattern[i % len(pattern)].upper() == "L" else None for i in range(layers))
    if str(config.get("model_type", "")) == "gemma2":
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    return (window,) * layers
