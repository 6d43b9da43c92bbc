"""The config.json basics every reader of the attention shape shares: the language model's section, the
dtype's element size, whole positive numbers."""

from __future__ import annotations

from typing import Any, Dict, Optional

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float32": 4, "float": 4}


PAIRED_ATTENTION_MODEL_TYPES = frozenset({"longcat_flash"})
"""Model types with two attention sublayers in each of their `num_layers` decoder layers (LongCat-Flash:
vLLM's longcat_flash.py caches both; transformers counts 2 x num_layers hidden layers)."""


KEY_ALIASES = (("hidden_size", ("n_embd", "d_model")), ("num_attention_heads", ("n_head", "n_heads")),
               ("num_hidden_layers", ("n_layer", "n_layers")))
"""The names older configs give these numbers (GPT-2, GPTBigCode, GPT-J, CodeGen, Bloom: n_embd, n_head,
n_layer; MPT and DBRX: d_model, n_heads, n_layers), which transformers' attribute_map (and so vLLM) reads
as the standard ones where those are absent."""
MODEL_TYPE_ALIASES = {"chatglm": (("num_hidden_layers", "num_layers"),)}
"""Per model type: ChatGLM's config (vLLM's configs/chatglm.py) counts its layers as num_layers."""
ALIAS_BOUND = 1 << 24


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The language model's numbers (multimodal configs keep them under text_config), under their standard
    names where the config uses an older one, with the attention layers counted as transformers counts them
    where config.json names decoder layers only (LongCat-Flash)."""
    text = config.get("text_config")
    text = text if isinstance(text, dict) else config
    model_type = str(text.get("model_type", ""))
    aliases = [*KEY_ALIASES, *((key, (alias,)) for key, alias in MODEL_TYPE_ALIASES.get(model_type, ()))]
    found = {key: next(text[name] for name in names if _whole(text.get(name)))
             for key, names in aliases if text.get(key) is None and any(_whole(text.get(name)) for name in names)}
    if found:
        text = {**text, **found}
    if model_type in PAIRED_ATTENTION_MODEL_TYPES and positive_int(text.get("num_layers")) \
            and text["num_layers"] <= 50000 and text.get("num_hidden_layers") is None:
        return {**text, "num_hidden_layers": 2 * text["num_layers"]}
    return text


def _whole(value: Any) -> bool:
    """A count an alias may stand for (a bad one is left out: the model then keeps the fallback)."""
    return positive_int(value) and value <= ALIAS_BOUND


def model_dtype_bytes(config: Dict[str, Any]) -> Optional[int]:
    """The element size vLLM serves the model in under `dtype=auto`: the dtype config.json names (float16 when
    it names none), 16 bits for a float32 checkpoint (vLLM casts it down: float16 before 0.10.1, bfloat16
    since; on the CPU too, measured on 0.32); None when unknown. `--engine-arg dtype=float32` is applied on top
    (modelinfo.kv_element_bytes)."""
    size = DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float16"))
    return 2 if size == 4 else size


def positive_int(value: Any) -> bool:
    """A whole number above zero (a JSON true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
