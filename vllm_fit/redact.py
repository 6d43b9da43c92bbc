"""Keep secrets (tokens, keys, passwords) out of everything the tool writes."""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

REDACTED = "***"
_SECRET_NAME = re.compile(r"(?:^|_)(?:token|secret|password|passwd|api_key|apikey|credentials?)$",
                          re.IGNORECASE)
_MIN_SECRET_LEN = 6
"""Shorter environment values are not scrubbed from logs (they would match everywhere)."""


def is_secret_name(name: str) -> bool:
    """True for names like HF_TOKEN, hf_token, OPENAI_API_KEY, db_password (not max_num_batched_tokens)."""
    return bool(_SECRET_NAME.search(name.replace("-", "_")))


def public_args(args: Mapping[str, Any]) -> Dict[str, Any]:
    """Engine arguments with secret values replaced by ***."""
    return {key: (REDACTED if is_secret_name(key) else value) for key, value in args.items()}


def scrub(text: str, env: Mapping[str, str]) -> str:
    """Replace the values of secret-named environment variables wherever they appear in text."""
    for name, value in env.items():
        if is_secret_name(name) and len(value) >= _MIN_SECRET_LEN:
            text = text.replace(value, REDACTED)
    return text
