"""The attention shape config.json gives: KV bytes per token and per layer, which layers slide.

Read as transformers and vLLM read the same keys, without importing either; `text_config` holds the
language model's numbers in multimodal configs.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float32": 4, "float": 4}


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """Multimodal configs keep the language model's numbers under text_config."""
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def sliding_window(config: Dict[str, Any]) -> Optional[int]:
    """The sliding window the model really uses: Qwen2 configs carry one with use_sliding_window false."""
    config = text_config(config)
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is False or isinstance(window, bool) or not isinstance(window, int):
        return None
    return window if window > 0 else None


def kv_bytes_per_token(config: Dict[str, Any]) -> Optional[int]:
    """KV cache bytes per token where every layer's cache has one shape (a model-wide sliding window
    included: its pages are full attention's, only fewer of them are needed); None for layouts it
    cannot know (MLA, per-layer attention types)."""
    config = text_config(config)
    types = config.get("layer_types")
    if types is not None and (not isinstance(types, list) or any(kind != "full_attention" for kind in types)):
        return None
    per_layer = layer_kv_bytes_per_token(config)
    layers = config.get("num_hidden_layers")
    if per_layer is None or not isinstance(layers, int) or isinstance(layers, bool) or layers <= 0:
        return None
    return layers * per_layer


def layer_kv_bytes_per_token(config: Dict[str, Any]) -> Optional[int]:
    """KV cache bytes one token takes in one layer (keys and values); None for MLA or missing numbers."""
    config = text_config(config)
    if config.get("kv_lora_rank"):
        return None
    heads = config.get("num_attention_heads")
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if isinstance(heads, int)
                                          and not isinstance(heads, bool) and heads > 0 else None)
    dtype = DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float16"))
    if not isinstance(kv_heads, int) or not isinstance(head_dim, int) or dtype is None:
        return None
    if not _positive_int(kv_heads) or not _positive_int(head_dim):
        return None
    return 2 * kv_heads * head_dim * dtype


def unmodelled_attention(config: Dict[str, Any]) -> Optional[str]:
    """The attention kind whose KV cache this tool does not cost from config.json, in words (None: every
    layer is full or sliding-window attention): MLA's latent pages, mamba and linear-attention state pages,
    chunked local attention, or layer types it does not know."""
    config = text_config(config)
    if config.get("kv_lora_rank"):
        return "multi-head latent attention (MLA: kv_lora_rank %s)" % config.get("kv_lora_rank")
    types = config.get("layer_types")
    kinds = sorted({str(kind) for kind in types} - {"full_attention", "sliding_attention"}) \
        if isinstance(types, list) else []
    if kinds:
        return "layer types %s" % ", ".join(kinds[:4])
    if config.get("attention_chunk_size"):
        return "chunked local attention (attention_chunk_size %s)" % config.get("attention_chunk_size")
    return None


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def layer_windows(config: Dict[str, Any]) -> Optional[Tuple[Optional[int], ...]]:
    """Each layer's sliding window as transformers and vLLM read config.json: `layer_types`, else
    Qwen2's `use_sliding_window` from `max_window_layers` on, else `sliding_window_pattern` (every
    n-th layer full), else Gemma 2's even layers, else the one window on every layer. None when the
    config names an attention type this tool does not know."""
    config = text_config(config)
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 < layers <= 100000:
        return None
    window = config.get("sliding_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        if any(kind not in ("full_attention", "sliding_attention") for kind in types):
            return None
        if window is None and "sliding_attention" in types:
            return None
        return tuple(window if kind == "sliding_attention" else None for kind in types)
    if window is None or config.get("use_sliding_window") is False:
        return (None,) * layers
    if config.get("use_sliding_window") is True and isinstance(config.get("max_window_layers"), int):
        first = config["max_window_layers"]
        return tuple(window if i >= first else None for i in range(layers))
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    if str(config.get("model_type", "")) == "gemma2":
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    return (window,) * layers


_BOUNDS = {"num_hidden_layers": 100000, "num_attention_heads": 100000, "num_key_value_heads": 100000,
           "head_dim": 1 << 20, "hidden_size": 1 << 24, "intermediate_size": 1 << 26, "vocab_size": 1 << 26,
           "sliding_window": 1 << 40, "max_window_layers": 100000}
"""The numbers the accounting reads, with the largest value any real model comes near."""
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
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= bound:
                raise ValueError("%s must be a whole number from 1 to %d, got %r" % (key, bound, value))
        for key in ("torch_dtype", "dtype"):
            value = section.get(key)
            if value is not None and (not isinstance(value, str) or value not in KNOWN_DTYPES):
                raise ValueError("%s %r is not a dtype vLLM loads (%s)" % (key, value, ", ".join(sorted(DTYPE_BYTES))))
        for key in ("rope_scaling", "rope_parameters"):
            value = section.get(key)
            if value is not None and not isinstance(value, dict):
                raise ValueError("%s must be a mapping, got %s" % (key, type(value).__name__))
    text = text_config(config)
    heads, kv_heads = text.get("num_attention_heads"), text.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv_heads, int) and heads % kv_heads:
        raise ValueError("num_key_value_heads %d does not divide num_attention_heads %d (each KV head serves a"
                         " whole group of query heads)" % (kv_heads, heads))
