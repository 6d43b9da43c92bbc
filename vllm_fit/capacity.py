"""From one trial's facts to the longest max_model_len its KV pool holds (the search's hint).

The rules are vLLM's own (vllm-strings.md sections 1b and 2b): a too-long error carries an estimate
(0.9.1+) or the token capacity (V0); a successful start carries its block count. From 0.29.0 one
block is a reserved null block that no sequence can use.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from .outcome import Classification, Outcome

NULL_BLOCK_SINCE = (0, 29)


def version_tuple(version: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """'0.32.0+cpu' -> (0, 32, 0); None when it does not start with a version number."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def null_blocks(vllm_version: Optional[str]) -> int:
    """Blocks vLLM reserves and never gives to a sequence: 1 from 0.29.0 (V1), else 0.

    Unknown versions count 0: the hint is then at most one block too long, which costs a launch
    at worst, never a wrong answer.
    """
    version = version_tuple(vllm_version)
    return 1 if version is not None and version[:2] >= NULL_BLOCK_SINCE else 0


def max_len_for_blocks(num_blocks: int, block_size: int, vllm_version: Optional[str]) -> int:
    """The longest max_model_len a pool of num_blocks blocks starts with."""
    return max(0, num_blocks - null_blocks(vllm_version)) * block_size


def blocks_needed(length: int, block_size: int, vllm_version: Optional[str]) -> int:
    """Blocks a pool needs so that one sequence of `length` tokens fits (the inverse of the above)."""
    return -(-length // block_size) + null_blocks(vllm_version)


def max_len_hint(classification: Classification, length: Optional[int],
                 vllm_version: Optional[str], plain_attention: bool = True) -> Optional[int]:
    """The longest max_model_len this trial's numbers say fits, or None when they say nothing.

    For a start that succeeded: vLLM's own auto-fit length, else (only for plain full-attention
    models, where a sequence of L tokens takes ceil(L / block_size) blocks) the block count.
    """
    facts = classification.facts
    if classification.outcome is Outcome.KV_TOO_SMALL:
        if facts.estimated_max_len is not None:
            return facts.estimated_max_len
        if facts.error_capacity_tokens is not None:
            return facts.error_capacity_tokens
        checked = facts.error_max_model_len or length
        if checked and facts.needed_kv_gib and facts.error_available_kv_gib and facts.needed_kv_gib > 0 \
                and facts.error_available_kv_gib > 0:  # proportional: an approximation, verified later
            return int(checked * facts.error_available_kv_gib / facts.needed_kv_gib)
        return None
    if classification.outcome is not Outcome.OK:
        return None
    if facts.autofit_len is not None:
        return facts.autofit_len
    if plain_attention and facts.num_blocks is not None and facts.block_size:
        return max_len_for_blocks(facts.num_blocks, facts.block_size, vllm_version)
    return None
