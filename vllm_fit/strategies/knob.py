"""The memory knob's grid and what is known about KV cost: the model the memory objectives reason with.

Grid: the knob's possible values (utilization in 0.01 steps, or KV bytes in granules). KvModel: bytes
per token and per block, the device's total memory, and the bounds a trial's numbers put on its pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..logs.kv_groups import KvLayout
from ..logs.regime import Regime
from ..outcome import Outcome
from .base import LEVEL_OOM, Candidate, Observation

_EPS = 1e-9
CONTEXT_AND_LEAST_ACTIVATIONS = 0.5 * (1 << 30)
"""The least a GPU engine holds beside its weights and KV cache (CUDA context, activation peak)."""


@dataclass(frozen=True)
class Grid:
    """The knob's possible values: index k means k x step (utilization 0.01, or KV bytes per granule)."""

    kind: str  # "gpu_memory_utilization" or "kv_cache_memory_bytes"
    step: float
    lowest: int
    highest: int

    def value(self, index: int) -> float:
        return round(index * self.step, 2) if self.kind == "gpu_memory_utilization" else int(index * self.step)

    def index(self, value: float) -> int:
        return round(value / self.step)

    def up(self, value: float) -> int:
        """The smallest index whose value is at least `value`."""
        return math.ceil(value / self.step - _EPS)

    def down(self, value: float) -> int:
        """The largest index whose value is at most `value`."""
        return math.floor(value / self.step + _EPS)

    def candidate(self, index: int, length: int) -> Candidate:
        if self.kind == "gpu_memory_utilization":
            return Candidate(length, gpu_memory_utilization=self.value(index))
        return Candidate(length, kv_cache_memory_bytes=int(self.value(index)))


def too_high(obs: Observation) -> bool:
    """The memory knob was too high for this trial: free memory short, or out of memory at the KV
    allocation or on the request (an OOM of the weights or the profile says nothing about the knob)."""
    return obs.outcome is Outcome.FREE_MEMORY_SHORT or (
        obs.outcome is Outcome.OOM and (obs.oom_stage is None or obs.oom_stage in LEVEL_OOM))


def squeezed_between(grid: Grid, history: Sequence[Observation], lowest_possible: Optional[int],
                     what: str) -> Optional[str]:
    """Why nothing fits when the knob is squeezed: too high from some value up, too small from
    some value down (None when the trials do not show both)."""
    levels = {grid.index(obs.memory) for obs in history if obs.memory is not None}
    high = [i for i in levels if any(too_high(o) for o in history
                                     if o.memory is not None and grid.index(o.memory) == i)]
    low = [i for i in levels if i not in high and any(
        o.outcome in (Outcome.KV_TOO_SMALL, Outcome.NO_KV_MEMORY) for o in history
        if o.memory is not None and grid.index(o.memory) == i)]
    if lowest_possible is not None:
        low.append(lowest_possible - 1)
    if not high or not low:
        return None
    knob = "gpu_memory_utilization" if grid.kind == "gpu_memory_utilization" else "kv_cache_memory_bytes"
    return ("at %s=%s and above the engine runs out of memory (or vLLM finds too little free memory); at %s"
            " and below the KV cache cannot hold %s" % (knob, grid.value(min(high)), grid.value(max(low)), what))


def utilization_grid(cap: float, floor: float = 0.01) -> Grid:
    """Utilization in 0.01 steps from `floor` up to `cap`."""
    return Grid("gpu_memory_utilization", 0.01, max(1, round(floor * 100)), math.floor(cap * 100 + _EPS))


@dataclass(frozen=True)
class KvModel:
    """What is known about KV cost before and across launches.

    bytes_per_token: per device (tensor-parallel rank), from config.json; None when unknown.
    total_bytes: device memory (NVML); None when unknown (a trial's log may still say it).
    guess_block_size: block size assumed before any launch has reported the real one.
    """

    bytes_per_token: Optional[int]
    total_bytes: Optional[float]
    regime: Regime
    guess_block_size: int = 16
    sequences: int = 1
    """Full-length sequences the pool must hold at once (--concurrency)."""
    sliding_window: Optional[int] = None
    """The model's window, where it uses one (V0 caps a prompt's blocks at it)."""
    plain: bool = True
    """Blocks translate into lengths (full attention, or a window on V0): the need is exact. Otherwise
    (a window on V1) the full-attention need is only an upper bound."""
    weights_bytes: Optional[float] = None
    """The weights on one device, from the files or config.json (None: unknown, or quantized)."""
    layout: Optional[KvLayout] = None
    """Not plain: the KV cache groups vLLM most likely forms (a guess before a launch; trials check it)."""
    layer_bytes_per_token: Optional[int] = None
    """KV bytes per token of one layer on one device (the page of one layer in a group)."""
    in_flight_guess: Optional[int] = None
    """The tokens a sliding-window group holds beyond its window, where the defaults are known."""

    def block_size(self, history: Sequence[Observation]) -> int:
        sizes = [obs.block_size for obs in history if obs.block_size]
        return sizes[-1] if sizes else self.guess_block_size

    def page_bytes(self, history: Sequence[Observation]) -> Optional[float]:
        """Bytes of one KV block on one device (for a model that is not plain attention, a block holds a
        page of each layer of one group: measured first)."""
        if self.config_page_holds(history):
            return float(self.bytes_per_token * self.block_size(history))  # type: ignore[operator]
        measured = self._measured_page(history)
        if measured:
            return measured
        if self.bytes_per_token:
            return float(self.bytes_per_token * self.block_size(history))
        return self._layout_page(history)

    def config_page_holds(self, history: Sequence[Observation]) -> bool:
        """Plain attention whose page of config.json's size reproduces the block count of the last start
        that sized its pool (within 10%, or 3 blocks: its KV bytes may be a rounded GiB figure), or no start
        did yet. Where it does not, vLLM caches the model otherwise than config.json was read, and the page is
        vLLM's own (KV bytes over blocks), too rough to bound a least KV size from below."""
        if not self.bytes_per_token or not self.plain:
            return False
        obs = _sized_start(history)
        if obs is None:
            return True
        held = obs.kv_bytes / (self.bytes_per_token * self.block_size(history))  # type: ignore[operator]
        return abs(held - obs.blocks) <= max(3.0, 0.1 * obs.blocks)  # type: ignore[operator]

    @staticmethod
    def _measured_page(history: Sequence[Observation]) -> Optional[float]:
        """KV bytes over blocks, from the last start that sized its pool."""
        obs = _sized_start(history)
        return obs.kv_bytes / obs.blocks if obs is not None else None  # type: ignore[operator]

    def _layout_page(self, history: Sequence[Observation]) -> Optional[float]:
        """One pool block of the likely KV cache groups: measured, else a page of each layer of a group."""
        measured = self._measured_page(history)
        if measured or self.layout is None or not self.layer_bytes_per_token:
            return measured
        return float(self.layout.layers_per_group * self.layer_bytes_per_token * self.block_size(history))

    def _in_flight(self) -> Optional[int]:
        """The tokens in flight the layout's needs are counted with: the guess, or none where no group's
        need depends on them (full attention and state layers only: Granite 4.0-H, Qwen3-Next on a GPU)."""
        if self.in_flight_guess is None and self.layout is not None and not self.layout.local:
            return 0
        return self.in_flight_guess

    def _layout_blocks(self, length: int, history: Sequence[Observation]) -> Optional[int]:
        """Pool blocks (the null block included) one request of `length` needs by the likely KV cache
        groups in the version's rules: V1 0.9.1+, one sequence, known tokens in flight; None otherwise."""
        in_flight = self._in_flight()
        if self.plain or self.layout is None or in_flight is None or self.sequences > 1 \
                or not self.regime.kv_cache_groups:
            return None
        return self.layout.least_blocks(length, self.block_size(history), in_flight,
                                        self.regime.null_block_in_start_check, self.regime.whole_prompt_admission)

    def measured_request_blocks(self, length: int, history: Sequence[Observation]) -> Optional[int]:
        """Blocks one request of `length` takes, as a trial at that length printed it (vLLM's own figure)."""
        if self.plain or self.sequences > 1:
            return None
        return next((obs.request_blocks for obs in reversed(history)
                     if obs.length == length and obs.request_blocks), None)

    def need_exact(self, length: int, history: Sequence[Observation]) -> bool:
        """Whether need_bytes is exact: plain attention whose page no start contradicts, or vLLM's own figure
        for this length."""
        return (self.plain and (not self.bytes_per_token or self.config_page_holds(history))) \
            or self.measured_request_blocks(length, history) is not None

    def need_bytes(self, length: int, history: Sequence[Observation]) -> Optional[float]:
        """KV bytes `sequences` sequences of `length` need at once, null block included."""
        page = self.page_bytes(history)
        if page is None:
            return None
        measured = self.measured_request_blocks(length, history)
        if measured is not None:
            return (measured + (1 if self.regime.request_needs_null_block else 0)) * page
        blocks, layout_page = self._layout_blocks(length, history), self._layout_page(history)
        if blocks is not None and layout_page:
            return blocks * layout_page
        return self.regime.blocks_needed(length, self.block_size(history), self.sliding_window,
                                         sequences=self.sequences) * page

    def length_for_bytes(self, kv_bytes: float, lowest: int, highest: int, granularity: int) -> Optional[int]:
        """The candidate a KV cache of `kv_bytes` holds, before any launch (None: blocks do not map to
        lengths, or the page size is unknown). Verified by the launch; its pool proves or corrects it."""
        page = self.page_bytes([])
        if not self.plain:
            return self._layout_length(kv_bytes, lowest, highest, granularity)
        if not page:
            return None
        length = self.regime.servable_len(int(kv_bytes // page), self.guess_block_size, self.sliding_window,
                                          self.sequences)
        return max(lowest, min(highest, length // granularity * granularity))

    def _layout_length(self, kv_bytes: float, lowest: int, highest: int, granularity: int) -> Optional[int]:
        """What a KV cache of `kv_bytes` holds by the likely KV cache groups in the version's rules (V1 0.9.1+,
        one sequence)."""
        page, in_flight = self._layout_page([]), self._in_flight()
        if self.layout is None or not page or in_flight is None or self.sequences > 1 \
                or not self.regime.kv_cache_groups:
            return None
        length = self.layout.longest_held(int(kv_bytes // page), self.guess_block_size, in_flight,
                                          highest, self.regime.null_block_in_start_check,
                                          self.regime.whole_prompt_admission)
        return max(lowest, min(highest, length // granularity * granularity))

    def prior_length(self, utilization: float, lowest: int, highest: int, granularity: int) -> Optional[int]:
        """A first length at this utilization before any pool was measured, on the side that starts.

        None where the longest candidate could plausibly fit (beside the weights, the CUDA context and
        the least activation peak): elsewhere the longest candidate would only fail, while a length
        that starts also says whether the request runs out of memory. The
        guess leaves room for the activations, CUDA graphs and the context (a tenth of the device
        and 2 GiB); a miss costs nothing, since a too-long start reports vLLM's estimate all the same.
        """
        page, total, weights = self.page_bytes([]), self.total_bytes, self.weights_bytes
        if not self.plain or not page or not total or not weights:
            return None
        size = self.guess_block_size
        beside = weights + CONTEXT_AND_LEAST_ACTIVATIONS
        plausible = self.regime.servable_len(int((utilization * total - beside) // page), size,
                                             self.sliding_window, self.sequences)
        if plausible >= highest:
            return None
        spare = utilization * total - 1.05 * weights - 0.1 * total - (2 << 30)
        length = self.regime.servable_len(int(max(spare, 0) // page), size, self.sliding_window, self.sequences)
        return max(lowest, min(highest, length // granularity * granularity))

    def total(self, history: Sequence[Observation]) -> Optional[float]:
        if self.total_bytes:
            return self.total_bytes
        logged = [obs.total_bytes for obs in history if obs.total_bytes]
        return logged[-1] if logged else None

    def kv_range(self, obs: Observation, history: Sequence[Observation]) -> Optional[tuple]:
        """(low, high) bounds on the KV bytes a trial really had (a start with no memory for it: the
        shortfall vLLM printed, below zero)."""
        if obs.outcome is Outcome.NO_KV_MEMORY and obs.kv_bytes is not None and obs.kv_bytes < 0:
            return obs.kv_bytes - 0.005 * (1 << 30), obs.kv_bytes + 0.005 * (1 << 30)  # 2-decimal GiB
        page = self.page_bytes(history)
        if obs.blocks is not None and page:
            return obs.blocks * page, (obs.blocks + 1) * page
        if obs.kv_bytes is not None:
            return obs.kv_bytes - 0.005 * (1 << 30), obs.kv_bytes + 0.005 * (1 << 30)  # 2-decimal GiB
        return None


PRINTED_GIB_ERROR = 0.02 * (1 << 30)
"""vLLM and torch print memory in 2-decimal GiB: two such numbers are off by up to this much."""


def _sized_start(history: Sequence[Observation]) -> Optional[Observation]:
    """The last trial that started and printed its pool's bytes and blocks."""
    return next((obs for obs in reversed(history) if obs.started and obs.blocks and obs.kv_bytes), None)


def oom_guesses(grid: Grid, total: Optional[float], history: Sequence[Observation]) -> List[Tuple[int, int]]:
    """(level that ran out of memory, the highest level its numbers allow), one per such trial.

    The allowed level is the budget less the shortfall the error printed (what the failing allocation
    asked for, less what was free). Within the 2-decimal rounding of the printed numbers the level above
    is allowed too (it is verified like every other).
    """
    out = []
    for obs in history:
        if obs.oom_shortfall_bytes is None or obs.memory is None or not total:
            continue
        limit = obs.memory * total - obs.oom_shortfall_bytes
        safe = grid.down(limit / total)
        if grid.value(safe + 1) * total - limit < PRINTED_GIB_ERROR:
            safe += 1
        out.append((grid.index(obs.memory), safe))
    return out
