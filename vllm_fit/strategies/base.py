"""What every search strategy shares: the length space, observations, and what they prove about lengths.

Lengths are monotone: a length that fails makes every longer one fail. A measured KV pool bounds
the lengths at or above the one it was measured at (a longer max_model_len never gets a larger
pool); below it the pool may be larger (profiling can grow with the length), so it bounds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Iterable, List, Optional, Sequence

from ..logs.regime import Engine
from ..outcome import OomStage, Outcome

AUTO = -1
"""A requested max_model_len of -1 asks vLLM (0.14+) to fit the length to memory itself."""

LENGTH_FAILURES = frozenset({Outcome.KV_TOO_SMALL, Outcome.TOO_LONG_FOR_MODEL, Outcome.REQUEST_FAILED,
                             Outcome.TIMEOUT, Outcome.OOM, Outcome.NO_KV_MEMORY})
"""Outcomes that rule a length out (and every longer one) at the memory they ran with."""
GLOBAL_LENGTH_FAILURES = frozenset({Outcome.TOO_LONG_FOR_MODEL, Outcome.TIMEOUT})
"""Length failures that hold at every memory level: over the model's maximum, a start that hangs."""
FAR_BELOW_POOL = 2
"""A request that fails though its pool holds this many full-length sequences did not fail for want of KV
cache: the length itself fails, at every memory level."""
ROOM_BLOCKS = 4
"""A request that fails though its pool holds its length and this many blocks more did not fail at the
edge of the KV cache (vLLM reserves at most a block or two beyond the tokens): its pool does not say
where the failure begins."""
CONCURRENCY_ROUNDING = 0.005
"""vLLM prints its concurrency with two decimals: the true figure may be this much lower."""
LEVEL_OOM = frozenset({OomStage.KV_ALLOCATION, OomStage.REQUEST})
"""Out-of-memory stages that say the memory knob is too high (not the weights, not the profile)."""


@dataclass(frozen=True)
class Observation:
    """One finished trial as the search sees it.

    `length` is the max_model_len the engine actually ran with (for AUTO, the one vLLM chose; None
    when it never said). `hint` is the longest max_model_len that the KV pool measured by this trial
    starts and serves, from vLLM's own numbers (its estimate, its capacity, its block count), or None.
    """

    requested: int
    length: Optional[int]
    outcome: Outcome
    hint: Optional[int] = None
    derived_max: Optional[int] = None
    memory: Optional[float] = None
    """The memory knob's value for this trial (utilization or KV bytes), for memory searches."""
    blocks: Optional[int] = None
    block_size: Optional[int] = None
    kv_bytes: Optional[float] = None
    """KV cache memory as vLLM logged it (2-decimal GiB on GPUs; exact when the knob set it)."""
    total_bytes: Optional[float] = None
    """Device (or NUMA node) memory as vLLM logged it, when it did."""
    oom_shortfall_bytes: Optional[float] = None
    """From an out-of-memory error: how much more the failed allocation needed than was free."""
    oom_stage: Optional[OomStage] = None
    free_fraction: Optional[float] = None
    """From a free-memory error: free / total device memory at start-up."""
    transient: bool = False
    engine: Optional[Engine] = None
    autofit_reduced: Optional[bool] = None
    pool_at: Optional[int] = None
    """The max_model_len configured when the pool was sized, where it differs from `length` (auto-fit)."""
    request_blocks: Optional[int] = None
    """Blocks one request of `length` takes in this pool, by vLLM's own figures (0.20.1+)."""
    fixed_pool_bound: Optional[int] = None
    """With the KV size fixed (the same pool at every length): the pool's own limit, exact from vLLM's
    numbers; nothing longer starts and serves at this memory."""
    kv_fixed: bool = False
    """kv_cache_memory_bytes (or, on the CPU backend before 0.20, VLLM_CPU_KVCACHE_SPACE) sized the pool: the
    same at every length, so it never shrinks with it."""
    hint_from_layout: bool = False
    """The hint was read off the KV cache groups the tool foresaw, not off vLLM's own estimate."""
    layouts_unexplained: bool = False
    """This trial's pool figures match none of the foreseen KV cache groups: hints read off them at the
    same memory are in doubt (a model laid out in a way the tool did not foresee)."""
    held: Optional[float] = None
    """How many requests of `length` vLLM said the pool holds at once (its "Maximum concurrency" line at
    this length), where it printed one: 0.20.1+ prints no block count, so a request that failed has no hint."""

    @property
    def started(self) -> bool:
        """The engine came up and sized its KV cache (the request may still have failed)."""
        return self.outcome is Outcome.OK or self.outcome is Outcome.REQUEST_FAILED or (
            self.outcome is Outcome.OOM and self.oom_stage is OomStage.REQUEST)

    def pool_holds(self, sequences: float, spare_blocks: int = 0) -> bool:
        """The pool holds `sequences` requests of `length` and `spare_blocks` blocks more: by the hint, or
        where vLLM printed no block count, by its concurrency (2 decimals, so half a hundredth less)."""
        if self.length is None:
            return False
        size = self.block_size or 16
        if self.hint is not None:
            return self.hint >= sequences * self.length + spare_blocks * size
        if self.held is None:
            return False
        return self.held - CONCURRENCY_ROUNDING >= sequences + spare_blocks / -(-self.length // size)

    @property
    def fails_below_pool(self) -> bool:
        """The engine started and its pool holds the length, yet the full-length request failed (not out
        of memory): the pool is not what limits the length, so its hint points nowhere."""
        return self.outcome is Outcome.REQUEST_FAILED and self.pool_holds(1)

    @property
    def fails_with_room(self) -> bool:
        """A request failure below the pool with blocks to spare: not the KV cache's edge (see ROOM_BLOCKS)."""
        return self.fails_below_pool and self.pool_holds(1, ROOM_BLOCKS)

    @property
    def fails_everywhere(self) -> bool:
        """A length failure that holds at every memory level: over the model's maximum, a start that hangs,
        a request that fails far below what the pool holds."""
        return self.length is not None and (self.outcome in GLOBAL_LENGTH_FAILURES or (
            self.fails_below_pool and self.pool_holds(FAR_BELOW_POOL)))

    def no_memory_at_or_below(self, lowest: int) -> bool:
        """No memory at all for the KV cache, at a length no longer than `lowest`: no length can help.
        An auto-fit start sized its profile at the model's full length, so its failure says nothing
        about shorter ones (a profile that grows with the length leaves them memory)."""
        tried = self.length if self.length is not None else (None if self.requested == AUTO else self.requested)
        return self.outcome is Outcome.NO_KV_MEMORY and tried is not None and tried <= lowest

    @property
    def fails_length(self) -> bool:
        return self.outcome in LENGTH_FAILURES and not (self.outcome is Outcome.OOM and
                                                         self.oom_stage is OomStage.LOAD)


def lowest_length(min_len: int, granularity: int) -> int:
    """The shortest candidate: the first multiple of the granularity at or above min_len."""
    return -(-min_len // granularity) * granularity


@dataclass(frozen=True)
class LengthSpace:
    """The candidate lengths: multiples of `granularity` in [min_len, max_len]."""

    min_len: int
    max_len: int
    granularity: int

    @property
    def lowest(self) -> int:
        return lowest_length(self.min_len, self.granularity)

    @property
    def highest(self) -> int:
        return self.max_len // self.granularity * self.granularity

    def floor(self, length: int) -> int:
        """The largest multiple of the granularity at or below `length`."""
        return length // self.granularity * self.granularity

    def contains(self, length: Optional[int]) -> bool:
        return length is not None and self.lowest <= length <= self.highest and length % self.granularity == 0


@dataclass(frozen=True)
class Bracket:
    """What the observations prove about lengths at one memory level.

    `allowed(x)` is False when a length at or below x failed, or a pool measured at or below x
    holds less than x. `proven_ok` is the longest verified length.
    """

    proven_ok: Optional[int]
    failures: FrozenSet[int]
    ceilings: FrozenSet[tuple]
    """(measured at length, holds at most) pairs."""
    tried: FrozenSet[int]
    no_memory: bool = False
    """A trial at the shortest candidate found no memory at all for the KV cache: no length can work at
    this memory level (at a longer length it rules out only that length and longer ones: a profile that
    grows with max_model_len leaves more memory to a shorter one)."""

    def allowed(self, length: int) -> bool:
        if any(failed <= length for failed in self.failures):
            return False
        return not any(at <= length and length > holds for at, holds in self.ceilings)


def bracket(history: Iterable[Observation], use_hints: bool = True, ceiling: Optional[int] = None,
            lowest: int = 0) -> Bracket:
    """Fold the observations into a Bracket; `ceiling` is a limit from elsewhere (other levels), `lowest`
    the shortest candidate."""
    proven_ok = None
    failures, ceilings, tried = set(), set(), set()
    if ceiling is not None:
        failures.add(ceiling + 1)
    history = list(history)
    doubted = {obs.memory for obs in history if obs.layouts_unexplained}
    for obs in history:
        if obs.length is not None:
            tried.add(obs.length)
        if obs.requested != AUTO:
            tried.add(obs.requested)
        if obs.derived_max is not None:
            failures.add(obs.derived_max + 1)
        in_doubt = obs.hint_from_layout and obs.memory in doubted  # read off groups another trial contradicts
        if obs.fixed_pool_bound is not None and not in_doubt:
            failures.add(obs.fixed_pool_bound + 1)
        if obs.length is None:
            continue
        if obs.outcome is Outcome.OK:
            proven_ok = max(proven_ok or 0, obs.length)
        elif obs.fails_length:
            failures.add(obs.length)
        if use_hints and obs.hint is not None and obs.started and not in_doubt:
            ceilings.add((max(obs.pool_at or 0, obs.length),
                          max(obs.hint, obs.length if obs.outcome is Outcome.OK else 0)))
    no_memory = any(obs.no_memory_at_or_below(lowest) for obs in history)
    return Bracket(proven_ok, frozenset(failures), frozenset(ceilings), frozenset(tried), no_memory)


def top_candidate(space: LengthSpace, state: Bracket) -> Optional[int]:
    """The highest candidate not ruled out, or None when nothing in the space can work."""
    if state.no_memory:
        return None
    limit = space.highest
    for failed in state.failures:
        limit = min(limit, failed - 1)
    top = space.floor(limit)
    while top >= space.lowest and not state.allowed(top):
        # a pool sized at or below `top` holds less; it rules out [max(sized at, holds + 1), ...)
        bound = min(max(at, holds + 1) for at, holds in state.ceilings if at <= top and top > holds)
        top = space.floor(bound - 1)
    return top if top >= space.lowest else None


def weights_do_not_fit(history: Sequence[Observation]) -> Optional[Observation]:
    """A trial that ran out of memory loading the weights: no length and no knob value can help."""
    return next((o for o in history if o.outcome is Outcome.OOM and o.oom_stage is OomStage.LOAD), None)


def profile_does_not_fit(history: Sequence[Observation], lowest: int) -> Optional[Observation]:
    """A trial at the shortest candidate ran out of memory in the profiling run.

    The profile comes before the KV cache and does not depend on the memory knob, so no knob value
    helps; a shorter length is not a candidate.
    """
    return next((o for o in history if o.outcome is Outcome.OOM and o.oom_stage is OomStage.PROFILE
                 and o.length is not None and o.length <= lowest), None)


def _short(obs: Observation) -> str:
    lacked = obs.oom_shortfall_bytes
    return " (its failing allocation lacked %.2f GiB)" % (lacked / (1 << 30)) if lacked else ""


def why_nothing_fits(history: Sequence[Observation]) -> Optional[str]:
    """The proof, in vLLM's numbers, that nothing in the range can work (None when it is not that simple)."""
    load = weights_do_not_fit(history)
    if load is not None:
        return "the weights do not fit on the device%s: out of memory while loading them" % _short(load)
    profile = next((o for o in history if o.outcome is Outcome.OOM and o.oom_stage is OomStage.PROFILE), None)
    if profile is not None and not any(o.started for o in history):
        return ("the profiling run does not fit on the device%s, at the shortest length tried (%s): no"
                " memory setting changes the activation peak" % (_short(profile), min(
                    o.length for o in history if o.length is not None and o.oom_stage is OomStage.PROFILE)))
    if any(o.outcome is Outcome.NO_KV_MEMORY for o in history):
        return "no memory is left for the KV cache after the weights and the activation peak, at the highest" \
            " memory tried"
    return None


def best_verified(space: LengthSpace, history: Sequence[Observation]) -> Optional[int]:
    """The longest candidate length that a trial verified (started and served), or None."""
    lengths: List[int] = [obs.length for obs in history
                          if obs.outcome is Outcome.OK and space.contains(obs.length) and obs.length is not None]
    return max(lengths) if lengths else None


@dataclass(frozen=True)
class Candidate:
    """One configuration to launch: a length (or AUTO) and at most one memory knob."""

    max_model_len: int
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None

    def engine_args(self) -> dict:
        """The LLM keyword arguments this candidate sets."""
        args: dict = {"max_model_len": self.max_model_len}
        if self.gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.kv_cache_memory_bytes is not None:
            args["kv_cache_memory_bytes"] = self.kv_cache_memory_bytes
        return args
