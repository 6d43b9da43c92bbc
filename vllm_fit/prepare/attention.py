"""The attention shape config.json gives: KV bytes per token and per layer, which layers slide.

Read as transformers and vLLM read the same keys, without importing either; `text_config` holds the
language model's numbers in multimodal configs.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from ..logs.kv_groups import Chunk, Span, State
from .config_basics import DTYPE_BYTES, model_dtype_bytes, positive_int, text_config
from .hybrid_layers import (
    DELTANET_MODEL_TYPES,
    SHORT_CONV_MODEL_TYPES,
    STATE_MODEL_TYPES,
    chunked_layers,
    falcon_h1_layers,
    jamba_layers,
    mamba_state,
    nemotron_layers,
    short_conv_layers,
    zamba2_config,
    zamba2_layers,
)


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


LATENT_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe_lite", "pangu_ultra_moe"})
"""Model types vLLM runs with multi-head latent attention on every layer and nothing else in the cache
(`is_deepseek_mla`); DeepSeek V3.2's sparse indexer, V4's compression and the linear hybrids add caches
of their own and are not in it."""
MLA_SINCE = (0, 7, 1)
"""vLLM caches one latent per token and layer from 0.7.1 (VLLM_MLA_DISABLE=1 turns it off); before, full
keys and values."""
_SPARSE_KEYS = ("index_topk", "index_head_dim", "compress_ratios", "linear_attn_config")


def latent_attention(config: Dict[str, Any]) -> bool:
    """Whether every layer caches MLA's latent (kv_lora_rank + qk_rope_head_dim wide, keys and values
    in one): the DeepSeek V2/V3 layout, without a sparse indexer or linear layers beside it."""
    config = text_config(config)
    return (str(config.get("model_type", "")) in LATENT_MODEL_TYPES and positive_int(config.get("kv_lora_rank"))
            and positive_int(config.get("qk_rope_head_dim")) and config.get("is_causal", True) is not False
            and not any(config.get(key) for key in _SPARSE_KEYS) and _all_full(config.get("layer_types")))


def _all_full(types: Any) -> bool:
    return types is None or (isinstance(types, list) and all(kind == "full_attention" for kind in types))


def layer_kv_bytes_per_token(config: Dict[str, Any]) -> Optional[int]:
    """KV cache bytes one token takes in one layer (keys and values, or MLA's one latent); None for
    layouts it cannot cost or missing numbers."""
    config = text_config(config)
    if config.get("kv_lora_rank"):
        dtype = model_dtype_bytes(config)
        if not latent_attention(config) or dtype is None:
            return None
        return (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * dtype
    if str(config.get("model_type", "")) == "zamba2":  # zamba2.py: as many KV heads as query heads
        config = zamba2_config(config)
        config = {**config, "num_key_value_heads": config.get("num_attention_heads"),
                  "head_dim": config.get("attention_head_dim")}
    heads = config.get("num_attention_heads")
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if isinstance(heads, int)
                                          and not isinstance(heads, bool) and heads > 0 else None)
    dtype = model_dtype_bytes(config)
    if not isinstance(kv_heads, int) or not isinstance(head_dim, int) or dtype is None:
        return None
    if not positive_int(kv_heads) or not positive_int(head_dim):
        return None
    return 2 * kv_heads * head_dim * dtype


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


def _layer_overrides(config: Dict[str, Any]) -> Optional[Dict[int, Dict[str, Any]]]:
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
    overrides, layers, dtype = _layer_overrides(config), config.get("num_hidden_layers"), model_dtype_bytes(config)
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


def unmodelled_attention(config: Dict[str, Any]) -> Optional[str]:
    """The attention kind whose KV cache this tool does not cost from config.json, in words (None: every
    layer is full or sliding-window attention): MLA's latent pages, mamba and linear-attention state pages,
    chunked local attention, or layer types it does not know."""
    config = text_config(config)
    if config.get("kv_lora_rank") and not latent_attention(config):
        return "multi-head latent attention as model type %s lays it out (kv_lora_rank %s)" % (
            config.get("model_type") or "unknown", config.get("kv_lora_rank"))
    if _layer_overrides(config) is None:
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
    if spans is None and str(config.get("model_type", "")) in STATE_MODEL_TYPES:
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
    if str(config.get("model_type", "")) in STATE_MODEL_TYPES:  # Granite 4.0-H names them as its hub config does
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
    if str(config.get("model_type", "")) in DELTANET_MODEL_TYPES:  # transformers: full attention every n-th layer
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


_BOUNDS = {"kv_lora_rank": 1 << 20, "qk_rope_head_dim": 1 << 20,
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
           "conv_dim": 1 << 24}
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
