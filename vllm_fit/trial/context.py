"""What the hint of a trial depends on besides its own output, shared by every trial of a search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..logs.kv_groups import KvLayout


@dataclass(frozen=True)
class TrialContext:
    """What the hint of a trial depends on besides its own output: the expected vLLM and the model."""

    vllm_version: Optional[str]
    guess_block_size: int
    plain_attention: bool = True
    kv_bytes_fixed: bool = False
    cpu: bool = False
    sliding_window: Optional[int] = None
    """V0 keeps at most this many tokens' blocks per sequence (sliding-window models)."""
    sequences: int = 1
    """Full-length requests that must run at once (--concurrency)."""
    layouts: Tuple[KvLayout, ...] = ()
    """The KV cache groups vLLM may give a model that is not plain attention (checked against each
    trial's own figures before a length is read off them)."""
    interpreter: Optional[str] = None
    """The Python that runs the trials (named where a module is missing from it)."""
    whole_prompt_admission: bool = False
    """Its scheduler admits a request only where its whole prompt's blocks are free (Regime)."""


__all__ = ["TrialContext"]
