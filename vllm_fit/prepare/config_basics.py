"""The config.json basics every reader of the attention shape shares: the language model's section, the
dtype's element size, whole positive numbers."""

from __future__ import annotations

from typing import Any, Dict, Optional

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float32": 4, "float": 4}


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """Multimodal configs keep the language model's numbers under text_config."""
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def model_dtype_bytes(config: Dict[str, Any]) -> Optional[int]:
    """The element size of the dtype config.json names (float16 when it names none); None when unknown."""
    return DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float16"))


def positive_int(value: Any) -> bool:
    """A whole number above zero (a JSON true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
