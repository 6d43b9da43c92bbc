"""From one trial's facts to the longest max_model_len its KV pool starts and serves (the search's hint).

vLLM's own numbers, read through the version's rules (regime.py): a too-long error carries an
estimate (0.9.1+; before 0.29 it ignores the null block, so up to one block too long to serve),
the token capacity (V0), or only the needed and available GiB (0.7-0.9.0); a successful start
carries its block count and, with auto-fit, the length vLLM chose.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

from ..outcome import CapacityFacts, Outcome
from .kv_groups import KvLayout, agreed_longest, calibrated, in_flight_options, tokens_line
from .regime import Engine, Regime

GIB = 1 << 30
PRINTED_GIB = 0.005 * GIB
"""vLLM prints GiB with two decimals: a printed size is off by up to this much."""


def pool_blocks(facts: CapacityFacts, regime: Regime, block_size: Optional[int]) -> Optional[int]:
    """The KV blocks of a started engine: the engine's own count, else what its capacity line implies."""
    if facts.num_blocks is not None:
        return facts.num_blocks
    if block_size and facts.kv_cache_tokens is not None and not regime.since(0, 20, 1):
        return facts.kv_cache_tokens // block_size  # tokens = blocks x block size up to 0.20.0
    return None


def no_token_fits(facts: CapacityFacts, regime: Regime) -> bool:
    """A V1 too-long error without its estimate, on a version that prints one whenever a token fits."""
    return facts.error_max_model_len is not None and facts.estimated_max_len is None \
        and regime.estimate_printed_when_any_fits


def _from_estimate(facts: CapacityFacts, regime: Regime, block_size: int, plain_attention: bool,
                   window: Optional[int], sequences: int = 1, layouts: Sequence[KvLayout] = ()) -> Optional[int]:
    """What a too-long error's numbers allow, in the version's rules."""
    if facts.estimated_max_len is not None:
        estimate = facts.estimated_max_len
        if sequences > 1:  # the estimate's pool, shared by that many sequences
            if not plain_attention:
                return None
            return regime.servable_len(regime.estimate_blocks(estimate, block_size), block_size, sequences=sequences)
        if regime.null_block_in_start_check or not regime.request_needs_null_block:
            return estimate  # the estimate serves as it is
        if plain_attention:  # 0.8-0.28: the estimate fills every block; one is the null block
            return regime.servable_len(regime.estimate_blocks(estimate, block_size), block_size)
        # any layout: the estimate ends a block, and one block shorter the prompt (L - 1 tokens) needs at
        # least one block fewer, which is the null block's; the pool may hold more (measured on 0.28)
        pessimistic = max(0, estimate - block_size + 1)
        if regime.whole_prompt_admission and layouts:  # and the whole prompt must be admitted: the least of
            in_flight = in_flight_options(facts.max_num_batched_tokens, regime.cpu)  # what each layout allows
            return min([pessimistic] + [layout.admitted_within(estimate, block_size, tokens)
                                        for layout in layouts for tokens in in_flight])
        return pessimistic
    if facts.error_capacity_tokens is not None:  # V0: the capacity in tokens is blocks x block size
        regime = dataclasses.replace(regime, engine=Engine.V0)  # only V0 prints this error
        blocks = facts.num_blocks if facts.num_blocks else facts.error_capacity_tokens // block_size
        size = facts.error_capacity_tokens // blocks if blocks else block_size
        return regime.servable_len(blocks, size, window, sequences)
    if no_token_fits(facts, regime):
        return 0  # a shorter length is still launched to see: it may profile a larger pool
    checked = facts.error_max_model_len
    needed, available = facts.needed_kv_gib, facts.error_available_kv_gib
    if checked and needed and available and available > PRINTED_GIB / GIB:
        # 0.7-0.9.0 print no estimate: scale the length by the printed sizes, pessimistically
        tokens = int(checked * (available - PRINTED_GIB / GIB) / (needed + PRINTED_GIB / GIB))
        if plain_attention:
            return regime.servable_len(tokens // block_size, block_size, sequences=sequences)
        return tokens if sequences == 1 else None
    return None


def layout_len(facts: CapacityFacts, regime: Regime, block_size: int, layouts: Sequence[KvLayout]) -> Optional[int]:
    """The longest length a started trial's pool holds by vLLM's KV cache groups, where the candidate
    layouts that reproduce its printed figures agree; None otherwise.

    From 0.29 the start check and the admission gate count the same blocks (null block included);
    before (V1 from 0.9.1), the start check counts the length in every block and the request its prompt
    beside the null block (measured on vLLM 0.28 with mamba2, chunked local and sliding-window layers, and
    on 0.19.1 with Gemma 3's)."""
    pairs = _calibrated_pairs(facts, regime, block_size, layouts)
    if not pairs or not facts.num_blocks:
        return None
    return agreed_longest(pairs, block_size, facts.num_blocks,
                          null_block_in_start_check=regime.null_block_in_start_check,
                          whole_prompt_admission=regime.whole_prompt_admission)


def layouts_unexplained(facts: CapacityFacts, regime: Regime, block_size: int, layouts: Sequence[KvLayout]) -> bool:
    """A started trial printed its pool's figures, and none of the candidate layouts reproduces them: the
    model's KV cache is laid out in a way the tool did not foresee, so a length another trial read off
    those layouts is in doubt."""
    return _calibrated_pairs(facts, regime, block_size, layouts) == ()


def _calibrated_pairs(facts: CapacityFacts, regime: Regime, block_size: int, layouts: Sequence[KvLayout]
                      ) -> Optional[Tuple[Tuple[KvLayout, int], ...]]:
    """The (layout, in-flight tokens) pairs that reproduce the trial's printed figures; None where the
    figures or the version cannot tell (no layouts, V0, no block count or length, before 0.9.1). Up to
    0.20.0 the token figure counts the groups and the 2-decimal concurrency the request's need: both
    must match (vLLM 0.19.1, Gemma 3: "KV cache size: 2,688 tokens" for 128 blocks in 6 groups)."""
    blocks, length = facts.num_blocks, facts.concurrency_len
    if not layouts or not regime.kv_cache_groups or not blocks or not length:
        return None
    by_groups = not regime.since(0, 20, 1)
    tokens = facts.kv_cache_tokens
    if (tokens is None and facts.max_concurrency is None) or (by_groups and (
            tokens is None or facts.max_concurrency is None)):
        return None
    in_flight = (facts.in_flight_tokens,) if facts.in_flight_tokens else in_flight_options(
        facts.max_num_batched_tokens, regime.cpu)
    return calibrated(layouts, in_flight, block_size, blocks, length, tokens, facts.max_concurrency,
                      tokens_by_groups=by_groups)


def request_blocks(facts: CapacityFacts, regime: Regime) -> Optional[int]:
    """The blocks one request of the trial's length takes, by vLLM's own figures: the k with
    int(blocks / k x length) equal to the token figure (0.20.1+); None where they do not pin one."""
    blocks, length, tokens = facts.num_blocks, facts.concurrency_len, facts.kv_cache_tokens
    if not regime.v1 or not regime.since(0, 20, 1) or not blocks or not length or not tokens:
        return None
    guess = max(1, round(blocks * length / max(tokens, 1)))
    found = [k for k in range(max(1, guess - 2), guess + 3) if tokens_line(blocks, k, length) == tokens]
    return found[0] if len(found) == 1 else None


def hint_is_exact(outcome: Outcome, facts: CapacityFacts, regime: Regime, plain_attention: bool,
                  layouts: Sequence[KvLayout] = ()) -> bool:
    """Whether the hint is the pool's own limit (one token more does not start or serve with this
    pool), not a pessimistic reading of rounded numbers."""
    if outcome is Outcome.KV_TOO_SMALL:
        if facts.estimated_max_len is not None:
            return regime.null_block_in_start_check or not regime.request_needs_null_block or plain_attention
        return facts.error_capacity_tokens is not None and plain_attention
    if facts.num_blocks is None and facts.kv_cache_tokens is None:
        return False
    if plain_attention or not regime.v1:
        return not (facts.autofit_reduced and not regime.autofit_serves)
    size = facts.block_size or 0
    return bool(size) and layout_len(facts, regime, size, layouts) is not None


def max_len_hint(outcome: Outcome, facts: CapacityFacts, regime: Regime, block_size: int,
                 plain_attention: bool = True, sliding_window: Optional[int] = None,
                 sequences: int = 1, layouts: Sequence[KvLayout] = ()) -> Optional[int]:
    """The longest max_model_len this trial's numbers say starts and serves (`sequences` requests of
    it at once), or None when they say nothing.

    A too-long error says it through its estimate; any start that sized its KV cache (a success,
    a request that hung or ran out of memory) through its pool and auto-fit length.

    plain_attention: the model is full attention only, so block counts translate into lengths.
    block_size: the engine's (from facts when it printed it, else the best guess).
    layouts: for other models, the KV cache groups vLLM may give them (kv_groups.py): where the
    trial's figures pin one down, its pool's limit. An auto-fit that kept the model's length ("full
    model context length N fits") proves nothing above N: its pool speaks, or nothing does.
    """
    size = facts.block_size or block_size
    if outcome is Outcome.KV_TOO_SMALL:
        return _from_estimate(facts, regime, size, plain_attention, sliding_window, sequences, layouts)
    blocks = pool_blocks(facts, regime, size)  # any start that sized its KV cache measured the pool
    if sequences > 1:  # lengths from blocks only: auto-fit's length is for one sequence
        return regime.servable_len(blocks, size, sliding_window, sequences) if plain_attention and blocks else None
    if facts.autofit_len is not None and facts.autofit_reduced:
        if regime.autofit_serves or not plain_attention:
            return facts.autofit_len
        if blocks is not None:
            return min(facts.autofit_len, regime.servable_len(blocks, size))
        return max(0, facts.autofit_len - size)
    if (plain_attention or not regime.v1) and blocks is not None:
        pooled = regime.servable_len(blocks, size, sliding_window)
        return max(pooled, facts.autofit_len) if facts.autofit_len is not None else pooled
    return layout_len(facts, regime, size, layouts)
