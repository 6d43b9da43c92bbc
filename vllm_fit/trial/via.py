"""How a trial runs the engine (an option of the search, and of verify): the trial layer's own word."""

from __future__ import annotations

from enum import Enum


class Via(str, Enum):
    """How a trial runs the engine: vLLM's OpenAI server over HTTP, or `vllm.LLM(...)` in the probe."""

    SERVE = "serve"
    LLM = "llm"


VIA_ENV = "VLLM_FIT_VIA"
"""The environment variable that sets the default (the test doubles have LLM(...) and no server)."""
