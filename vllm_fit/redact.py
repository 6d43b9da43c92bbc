"""Keep secrets (tokens, keys, passwords, credentials) out of everything the tool writes.

A name is secret when one of its words (split at `_`, `-`, `.` and case changes) is a secret word:
HF_TOKEN, hf_token, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, AZURE_OPENAI_KEY, GITHUB_PAT, api-key,
db_password, GOOGLE_APPLICATION_CREDENTIALS. `max_num_batched_tokens` or `tokenizer` are not.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, Mapping

REDACTED = "***"
SECRET_WORDS = frozenset({
    "token", "secret", "password", "passwd", "pwd", "passphrase", "key", "apikey", "credential",
    "credentials", "pat", "auth", "authorization", "cookie", "signature", "sas", "privatekey",
})
NOT_SECRET = frozenset({"PWD", "OLDPWD"})
"""The shell's working directories: "pwd" is a secret word (DB_PWD), these two are paths."""
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_MIN_SECRET_LEN = 6
"""Shorter values are not scrubbed from free text (they would match everywhere)."""


def is_secret_name(name: str) -> bool:
    """True for names whose words include a secret word (see the module docstring)."""
    if str(name) in NOT_SECRET:
        return False
    words = [w.lower() for part in re.split(r"[_\-.\s]+", str(name)) for w in _WORD.findall(part)]
    return any(word in SECRET_WORDS for word in words)


def redacted(value: Any) -> Any:
    """A value with every secret-named entry, at any depth of mappings and lists, replaced by ***."""
    if isinstance(value, Mapping):
        return {key: (REDACTED if is_secret_name(key) else redacted(item)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(item) for item in value]
    return value


def _has_secret_key(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(is_secret_name(key) or _has_secret_key(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_secret_key(item) for item in value)
    return False


def is_secret_arg(key: str, value: Any) -> bool:
    """An engine argument that is a secret or carries one at any depth (`hf_overrides={"api_key": ...}`,
    redacted or not): it never reaches a file, only the trial's environment and command line."""
    return is_secret_name(key) or _has_secret_key(value)


def public_args(args: Mapping[str, Any]) -> Dict[str, Any]:
    """Engine arguments with secret values replaced by ***, at any depth."""
    return {key: (REDACTED if is_secret_name(key) else redacted(value)) for key, value in args.items()}


def _secrets_in(value: Any, secret: bool, found: set) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _secrets_in(item, secret or is_secret_name(key), found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _secrets_in(item, secret, found)
    elif secret and value is not None and len(str(value)) >= _MIN_SECRET_LEN:
        found.add(str(value))


def secret_values(*mappings: Mapping[str, Any]) -> list:
    """The values of secret-named entries at any depth, longest first, worth scrubbing from free text."""
    found: set = set()
    for mapping in mappings:
        _secrets_in(mapping, False, found)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret value wherever it appears in text."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text
