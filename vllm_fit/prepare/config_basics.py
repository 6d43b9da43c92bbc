"""The config.json basics every reader of the attention shape shares: the language model's section, the
dtype's element size, whole positive numbers."""

from __future__ import annotations

from typing import Any, Dict, Optional

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float32": 4, "float": 4}


PAIRED_ATTENTION_MODEL_TYPES = frozenset({"longcat_flash"})
"""Model types with two attention sublayers in each of their `num_layers` decoder layers (LongCat-Flash:
vLLM's longcat_flash.py caches both; transformers counts 2 x num_layers hidden layers)."""


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The language model's numbers (multimodal configs keep them under text_config), with the attention
    layers counted as transformers counts them where config.json names decoder layers only (LongCat-Flash)."""
    text = config.get("text_config")
    text = text if isinstance(text, dict) else config
    if str(text.get("model_type", "")) in PAIRED_ATTENTION_MODEL_TYPES and positive_int(text.get("num_layers")) \
            and text["num_layers"] <= 50000 and text.get("num_hidden_layers") is None:
        return {**text, "num_hidden_layers": 2 * text["num_layers"]}
    return text


def model_dtype_bytes(config: Dict[str, Any]) -> Optional[int]:
    """The element size of the dtype config.json names (float16 when it names none); None when unknown."""
    return DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float16"))


def positive_int(value: Any) -> bool:
    """A whole number above zero (a JSON true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
