"""The model's maximum length as vLLM derives it from config.json (and the tokenizer's), by version."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..errors import BadInput, one_line
from ..files.reading import read_input_text
from .attention import text_config as _text_config

MAX_CONFIG_BYTES = 16 << 20
"""A config.json or tokenizer_config.json larger than this is no model's (they are kilobytes)."""

# The keys vLLM reads for the model's maximum length (_get_and_verify_max_len), smallest wins.
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")


YARN_KINDS = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")
"""RoPE scalings whose factor vLLM stopped applying to the derived maximum in 0.30 (vLLM #56446)."""
YARN_UNSCALED_SINCE = (0, 30)


def derived_max_len(config: Dict[str, Any], version: Optional[Tuple[int, ...]] = None,
                    tokenizer_max: Optional[float] = None) -> Optional[int]:
    """The model's maximum length as vLLM `version` derives it (`_get_and_verify_max_len`): the smallest
    length key (a boolean counts as the number it is in Python), but config.json's `model_max_length`
    where it is set (Command-R), then the tokenizer's `model_max_length` if smaller, then RoPE scaling
    (never for Gemma3, whose maximum is already scaled; from 0.30 a YaRN factor no longer multiplies it).
    No version: the rule before 0.30."""
    config = _text_config(config)
    values = [_length_key(config, key) for key in _MAX_LEN_KEYS if key in config and config[key] is not None]
    if not values:
        return None
    derived = float(min(values))
    if config.get("model_max_length"):
        derived = _length_key(config, "model_max_length")
    if tokenizer_max is not None:
        derived = min(derived, tokenizer_max)
    scaling = config.get("rope_scaling") or config.get("rope_parameters")
    if isinstance(scaling, dict) and "factor" in scaling and "gemma3" not in str(config.get("model_type", "")):
        rope_type = scaling.get("rope_type", scaling.get("type"))
        unscaled = version is not None and version >= YARN_UNSCALED_SINCE and rope_type in YARN_KINDS
        if rope_type not in ("su", "longrope", "llama3", "default", "mrope") and not unscaled:
            if rope_type == "yarn" and "original_max_position_embeddings" in scaling:
                derived = _number(scaling, "original_max_position_embeddings", "rope_scaling.")
            derived *= _number(scaling, "factor", "rope_scaling.")
    if not math.isfinite(derived) or derived < 1 or derived > 1 << 40:
        raise ValueError("the model's maximum length works out to %r" % derived)
    return int(derived)


def max_len_source(config: Dict[str, Any], tokenizer_max: Optional[float]) -> str:
    """Which key decided the model's maximum, in words (for the over-the-maximum message)."""
    text = _text_config(config)
    values = {key: _length_key(text, key) for key in _MAX_LEN_KEYS if key in text and text[key] is not None}
    if not values:
        return "config.json"
    key = "model_max_length" if text.get("model_max_length") else min(values, key=lambda k: values[k])
    source = "config.json's %s (%s)" % (key, text.get(key))
    if tokenizer_max is not None and tokenizer_max < values[key]:
        source = "tokenizer_config.json's model_max_length (%d)" % tokenizer_max
    scaling = text.get("rope_scaling") or text.get("rope_parameters")
    if isinstance(scaling, dict) and "factor" in scaling:
        source += ", with rope scaling %s by the version's rule" % (scaling.get("rope_type", scaling.get("type")))
    return source


def _length_key(mapping: Dict[str, Any], key: str) -> float:
    """A length key's value as vLLM compares it: true and false are 1 and 0."""
    value = mapping.get(key)
    return float(value) if isinstance(value, bool) else _number(mapping, key)


def tokenizer_max_len(folder: Path) -> Optional[float]:
    """tokenizer_config.json's `model_max_length` (vLLM takes the smaller of it and the config's)."""
    path = folder / "tokenizer_config.json"
    if not path.exists():
        return None
    text = read_input_text(path, "the model's tokenizer_config.json", MAX_CONFIG_BYTES)
    try:  # transformers writes Infinity for "no limit"; json (and vLLM) read it as float("inf")
        data = json.loads(text, parse_constant=lambda name: math.inf if name == "Infinity" else _no_nan(name))
    except ValueError as exc:
        raise BadInput("%s is not valid JSON (%s); fix or replace it" % (path, one_line(str(exc), 200))) from None
    value = data.get("model_max_length") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        return None  # absent, or no limit: the config's own maximum holds
    return float(value)


def _no_nan(name: str) -> float:
    raise ValueError("%s is not a length" % name)


def _number(mapping: Dict[str, Any], key: str, where: str = "") -> float:
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("%s%s must be a finite number, got %r" % (where, key, value))
    return float(value)
