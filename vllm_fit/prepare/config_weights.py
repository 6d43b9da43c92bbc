"""config.json's estimate of a model's weights, for when no weight files are on disk (a hub id not yet
downloaded, dummy weights): a dense decoder's parameters, or unknown where the shapes are not that."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .attention import text_config
from .config_basics import model_dtype_bytes

UNCOSTED_SHAPES = ("moe_intermediate_size", "n_routed_experts", "shared_expert_intermediate_size",
                   "first_k_dense_replace", "kv_lora_rank")
"""Keys of shapes the dense formula does not cover: experts narrower than intermediate_size (Qwen3-30B-A3B
came to about 8 times its weights), routed and shared experts and dense first layers counted as one dense MLP
(DeepSeek-V2-Lite: 5.4 GB where it holds 31 GB), MLA's projections. With these the estimate is unknown rather
than several times off."""


def config_weights_bytes(config: Dict[str, Any]) -> Optional[int]:
    """Parameters x dtype bytes of a dense decoder with a gated MLP (Llama, Qwen, Mistral, Mixtral);
    None when a number is missing, the weights are quantized, or the model has shapes the formula does not
    cover (UNCOSTED_SHAPES)."""
    if config.get("quantization_config"):
        return None
    text = text_config(config)
    if any(text.get(key) for key in UNCOSTED_SHAPES):
        return None
    intermediates = text.get("intermediate_size")
    if isinstance(intermediates, list) and intermediates and all(isinstance(n, int) for n in intermediates):
        intermediates = sum(intermediates) // len(intermediates)  # per layer (Gemma 3n): their mean
    raw = [text.get(key) for key in ("num_hidden_layers", "num_attention_heads", "hidden_size")]
    raw += [intermediates, text.get("vocab_size")]
    dtype = model_dtype_bytes(text)
    numbers = [n for n in raw if isinstance(n, int) and not isinstance(n, bool) and n > 0]
    if dtype is None or len(numbers) != len(raw):
        return None
    layers, heads, hidden, intermediate, vocab = numbers
    counts = [_count(text.get("num_key_value_heads"), heads), _count(text.get("head_dim"), hidden // heads),
              _count(text.get("num_local_experts") or text.get("num_experts"), 1)]
    known = [n for n in counts if n is not None]
    if len(known) < len(counts):
        return None
    kv_heads, head_dim, experts = known
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)  # q and o, k and v
    mlp = 3 * hidden * intermediate * experts
    embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings") else 2)
    return int((layers * (attention + mlp) + embeddings) * dtype)


def _count(value: Any, default: int) -> Optional[int]:
    """A count config.json may leave out (the default then); None where it is there but not a count."""
    if value is None or value == 0:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
