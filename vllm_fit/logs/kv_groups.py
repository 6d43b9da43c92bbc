"""KV cache groups as vLLM V1 forms them, and how many pool blocks one request of L tokens needs.

vLLM 0.29+ (V1, the hybrid KV cache manager; `kv_cache_utils.py`): layers are bucketed by attention
type, each bucket split into groups of `group_size` layers; one pool block is one page for each layer
of a group, and every group takes its blocks from the one pool. A full-attention group needs
cdiv(L, block) blocks; a sliding-window group cdiv(min(window - 1 + in-flight tokens, L), block) + 1
(the in-flight tokens are max_num_batched_tokens, twice that with async scheduling); a chunked-local
group (Llama 4) cdiv(min(chunk + in-flight tokens, L), block); a group of mamba layers a fixed number
of blocks (their states, each padded to the attention page). The start-up
check (with the null block) and the admission gate both use these needs, so a pool of B blocks starts
and serves L exactly when the sum of the needs is at most B - 1.

The layout a model really gets depends on the installed vLLM and transformers (which layers slide,
whether the hybrid manager is on), so a layout from config.json is a candidate only: `calibrated`
keeps the candidates that reproduce vLLM's own figures of a started trial (its block count and its
"KV cache size: N tokens", N = int(blocks / need(L) x L) from 0.20.1; before, blocks // groups x block
beside the 2-decimal concurrency), and a length is read off them only where all that remain agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence, Tuple, Union

LONGEST = 1 << 24
"""No max_model_len beyond this is searched for (16M tokens)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Chunk:
    """The span of a chunked-local-attention layer (Llama 4's attention_chunk_size): it attends within
    its chunk only, so vLLM frees the blocks of earlier chunks."""

    size: int

    def __str__(self) -> str:
        return "chunk %d" % self.size


@dataclass(frozen=True)
class State:
    """A layer with a recurrent state instead of keys and values (mamba, gated DeltaNet): a request holds
    `blocks` pool blocks whatever its length. One; vLLM 0.32 keeps three for a mamba2 layer when prefix
    caching is on (its "align" mode: two states and a prefill checkpoint). 0: not known yet."""

    blocks: int = 0

    def __str__(self) -> str:
        return "state x%d" % self.blocks


Span = Union[None, int, Chunk, State]
"""What one layer keeps: every token (None), a sliding window of n tokens, its chunk, or a state."""


@dataclass(frozen=True)
class KvLayout:
    """The KV cache groups of one model on V1: each group's span (None: full attention; a number: a
    sliding window; a Chunk: chunked local attention)."""

    windows: Tuple[Span, ...]
    """One entry per KV cache group."""
    layers_per_group: int
    """Layers in one group: one pool block is this many per-layer pages."""
    name: str
    """How the layout was read (for the report): "hybrid", "full-sized", "all-sliding",
    "all-chunked"."""
    scales: Tuple[int, ...] = ()
    """Per group, how many times its layers' page fits in the largest (empty: all alike). vLLM makes every
    page equal by raising the block of the smaller ones (`unify_kv_cache_spec_page_size`): Gemma 4's
    sliding layers, with half the page of its global ones, take blocks of twice the tokens."""

    @property
    def slides(self) -> bool:
        return any(window is not None for window in self.windows)

    @property
    def local(self) -> bool:
        """Some group keeps a window or a chunk: its need depends on the tokens in flight."""
        return any(isinstance(window, (int, Chunk)) for window in self.windows)

    def request_blocks(self, length: int, base_block_size: int, in_flight: int) -> int:
        """Pool blocks one request of `length` needs across all groups (the null block not counted)."""
        return sum(_group_blocks(window, length, self._block_size(index, base_block_size), in_flight)
                   for index, window in enumerate(self.windows))

    def _block_size(self, index: int, base_block_size: int) -> int:
        return base_block_size * (self.scales[index] if self.scales else 1)

    def running_blocks(self, prompt: int, base_block_size: int, in_flight: int) -> int:
        """Pool blocks a running request of `prompt` tokens holds at most (the null block not counted): as
        request_blocks, but a sliding group whose prompt fits in its window or in one step's tokens has freed
        nothing, so no block straddles the window's start (vLLM 0.26, tiny Gemma 2: a 3999-token prompt in
        32 blocks a group served where the start figure says 33)."""
        return sum(cdiv(prompt, self._block_size(index, base_block_size))
                   if isinstance(window, int) and prompt <= max(window, in_flight)
                   else _group_blocks(window, prompt, self._block_size(index, base_block_size), in_flight)
                   for index, window in enumerate(self.windows))

    def admission_blocks(self, prompt: int, base_block_size: int) -> int:
        """Blocks a scheduler that admits whole prompts wants free for a `prompt`-token request: every
        attention group counts every prompt token (nothing computed yet, so no window has freed any)."""
        return sum(window.blocks if isinstance(window, State)
                   else cdiv(prompt, self._block_size(index, base_block_size))
                   for index, window in enumerate(self.windows))

    def longest_held(self, blocks: int, block_size: int, in_flight: int, limit: int = LONGEST,
                     null_block_in_start_check: bool = True, whole_prompt_admission: bool = False) -> int:
        """The longest max_model_len a pool of `blocks` starts and serves, in the version's rules (least_blocks)."""
        if blocks <= 1:
            return 0
        return _longest(lambda length: self.least_blocks(length, block_size, in_flight, null_block_in_start_check,
                                                         whole_prompt_admission) <= blocks, limit)

    def admitted_within(self, estimate: int, block_size: int, in_flight: int) -> int:
        """The longest length whose whole prompt a pool that just starts `estimate` admits (the pool may be
        larger: a lower bound, for a too-long error that names no block count)."""
        free = self.request_blocks(estimate, block_size, in_flight) - 1  # the null block is taken
        return _longest(lambda length: self.admission_blocks(max(1, length - 1), block_size) <= free, estimate)

    def least_blocks(self, length: int, block_size: int, in_flight: int, null_block_in_start_check: bool = True,
                     whole_prompt_admission: bool = False) -> int:
        """The fewest pool blocks with which `length` starts and serves (one is the null block). From 0.29 the
        start check counts the request's blocks and the null block; before, it counts the length in all the
        blocks, while the full-length request (L - 1 prompt tokens) needs the null block beside what it holds.
        `whole_prompt_admission`: the request also waits until its whole prompt's blocks are free (0.19)."""
        if null_block_in_start_check:
            need = self.request_blocks(length, block_size, in_flight) + 1
        else:
            need = max(self.request_blocks(length, block_size, in_flight),
                       self.running_blocks(max(1, length - 1), block_size, in_flight) + 1)
        if whole_prompt_admission:
            need = max(need, self.admission_blocks(max(1, length - 1), block_size) + 1)
        return need


def _group_blocks(window: Span, length: int, block_size: int, in_flight: int) -> int:
    """Blocks one group's layers take for one request of `length` (vLLM's max_memory_usage_bytes per spec):
    full attention every token; a chunk or a window (plus one block it may straddle) with the tokens in
    flight, never more than the length; a state its fixed blocks."""
    if window is None:
        return cdiv(length, block_size)
    if isinstance(window, Chunk):
        return cdiv(min(window.size + in_flight, length), block_size)
    if isinstance(window, State):
        return window.blocks
    return cdiv(min(window - 1 + in_flight, length), block_size) + 1


def _longest(held: Callable[[int], bool], limit: int) -> int:
    """The longest length in [1, limit] that `held` accepts (it accepts every shorter one too), or 0."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if held(middle):
            low = middle
        else:
            high = middle - 1
    return low


def hybrid_layout(layer_windows: Sequence[Span], page_scales: Optional[Sequence[int]] = None) -> KvLayout:
    """Group layers as vLLM 0.29+ does (`_get_kv_cache_groups_uniform_page_size`): one bucket per
    attention type (and page, where pages differ: `page_scales`, one per layer); the group size is the
    smallest bucket, or the largest where it is under 1.5 times the smallest; each bucket is split into
    cdiv(its layers, group size) groups."""
    scales = list(page_scales) if page_scales else [1] * len(layer_windows)
    buckets: dict = {}
    for window, scale in zip(layer_windows, scales):
        buckets[(window, scale)] = buckets.get((window, scale), 0) + 1
    if len(buckets) == 1:  # one attention type, one page (the largest page's scale is 1)
        [(window, _)] = buckets
        return KvLayout((window,), len(layer_windows), _all_name(window))
    smallest, largest = min(buckets.values()), max(buckets.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    windows: Tuple[Span, ...] = ()
    group_scales: Tuple[int, ...] = ()
    for (window, scale), count in buckets.items():
        windows += (window,) * cdiv(count, group_size)
        group_scales += (scale,) * cdiv(count, group_size)
    return KvLayout(windows, group_size, "hybrid", group_scales if set(scales) != {1} else ())


def _all_name(span: Span) -> str:
    return "full" if span is None else "all-chunked" if isinstance(span, Chunk) else "all-sliding"


def candidate_layouts(layer_windows: Optional[Sequence[Span]], state_blocks: Sequence[int] = (1, 3, 2),
                      page_scales: Optional[Sequence[int]] = None) -> Tuple[KvLayout, ...]:
    """The layouts vLLM may give a model whose config.json names these per-layer spans: the hybrid
    groups first (vLLM's default), then every layer sized as full attention (no hybrid manager, or a
    span the installed vLLM ignores), then every layer local (a span it applies to all). A model with
    state layers is always hybrid: one layout per count of state blocks a request may hold, the likely
    one first. Layers whose pages differ (`page_scales`) get the hybrid groups only."""
    if not layer_windows:
        return ()
    if page_scales and set(page_scales) != {1}:
        return (hybrid_layout(layer_windows, page_scales),)
    if any(isinstance(span, State) for span in layer_windows):
        return tuple(hybrid_layout([State(count) if isinstance(span, State) else span for span in layer_windows])
                     for count in state_blocks)
    layers = len(layer_windows)
    windows = {w for w in layer_windows if w is not None}
    found = [hybrid_layout(layer_windows), KvLayout((None,), layers, "full-sized")]
    if len(windows) == 1:
        span = next(iter(windows))
        found.append(KvLayout((span,), layers, _all_name(span)))
    unique: list = []
    for layout in found:
        if all(layout.windows != other.windows or layout.layers_per_group != other.layers_per_group
               for other in unique):
            unique.append(layout)
    return tuple(unique)


def in_flight_options(max_num_batched_tokens: Optional[int], cpu: bool) -> Tuple[int, ...]:
    """The tokens a sliding-window group may hold beyond its window: max_num_batched_tokens, or twice
    that with async scheduling (on by default on GPUs in recent vLLM; never on the CPU backend).
    Unknown: the defaults of vLLM's two entry points on either device."""
    if max_num_batched_tokens:
        return (max_num_batched_tokens,) if cpu else (max_num_batched_tokens, 2 * max_num_batched_tokens)
    defaults = (2048, 4096) if cpu else (2048, 4096, 8192, 16384)
    return tuple(sorted({t * k for t in defaults for k in ((1,) if cpu else (1, 2))}))


def tokens_line(blocks: int, need: int, length: int) -> int:
    """vLLM 0.20.1+'s "KV cache size: N tokens": int(max_concurrency x max_model_len)."""
    return int(blocks / need * length)


def grouped_tokens_line(blocks: int, layout: KvLayout, block_size: int) -> int:
    """vLLM 0.9.1-0.20.0's "KV cache size: N tokens": the pool's blocks split evenly over the groups, times
    the smallest block (`_report_kv_cache_config`: num_blocks // len(groups) * min_block_size)."""
    return blocks // len(layout.windows) * block_size * (min(layout.scales) if layout.scales else 1)


def calibrated(layouts: Iterable[KvLayout], in_flight: Iterable[int], block_size: int, blocks: int, length: int,
               tokens: Optional[int], concurrency: Optional[float], tokens_by_groups: bool = False
               ) -> Tuple[Tuple[KvLayout, int], ...]:
    """The (layout, in-flight tokens) pairs whose need at `length` reproduces what vLLM printed for a
    pool of `blocks`: the token figure (0.20.1+, exact), else the 2-decimal concurrency. `tokens_by_groups`:
    the token figure is the older one (0.9.1-0.20.0), which pins the number of groups, and the concurrency
    the request's need."""
    kept = []
    for layout in layouts:
        if tokens_by_groups and (tokens is None or grouped_tokens_line(blocks, layout, block_size) != tokens):
            continue
        for tokens_in_flight in in_flight:
            need = layout.request_blocks(length, block_size, tokens_in_flight)
            if tokens is not None and not tokens_by_groups:
                if tokens_line(blocks, need, length) == tokens:
                    kept.append((layout, tokens_in_flight))
            elif concurrency is not None and abs(blocks / need - concurrency) <= 0.0051:
                kept.append((layout, tokens_in_flight))
    return tuple(kept)


def agreed_longest(pairs: Sequence[Tuple[KvLayout, int]], block_size: int, blocks: int,
                   limit: int = LONGEST, null_block_in_start_check: bool = True,
                   whole_prompt_admission: bool = False) -> Optional[int]:
    """The longest length a pool of `blocks` holds, where every calibrated pair agrees (else None)."""
    answers = {layout.longest_held(blocks, block_size, tokens_in_flight, limit, null_block_in_start_check,
                                   whole_prompt_admission)
               for layout, tokens_in_flight in pairs}
    return answers.pop() if len(answers) == 1 else None
