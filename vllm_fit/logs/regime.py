"""What one vLLM version (and engine) does with memory: its rules, from vllm-strings.md sections 2 and 4.

Pure facts by version range, in one place, so that the capacity rules, the memory search and the
pre-launch checks agree: how many blocks one sequence needs (the null block), whether other
processes' memory counts inside the budget, whether free memory is checked at start-up, which
knobs exist, and the defaults. The verification request is the probe's: a prompt of L - 1 tokens
and 1 generated token, so a sequence of L tokens needs L - 1 KV slots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Optional, Tuple

Version = Tuple[int, int, int]

V0_WATERMARK = 0.01
"""V0's block manager refuses a prompt that leaves fewer than 1% of the blocks free."""


class Engine(str, Enum):
    """vLLM's two engines: V0 (up to 0.10.2) and V1 (the default from 0.8.0, the only one from 0.11)."""

    V0 = "v0"
    V1 = "v1"


def version_tuple(version: Optional[str]) -> Optional[Version]:
    """'0.32.0+cpu' -> (0, 32, 0); '0.9.0.1' -> (0, 9, 0); None when it does not start with a version."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def default_engine(version: Optional[Version], env: Mapping[str, str]) -> Engine:
    """The engine vLLM picks before any log says so (0.8-0.10.2 may still fall back to V0)."""
    use = env.get("VLLM_USE_V1")
    if version is None or version >= (0, 11, 0):
        return Engine.V1
    if version >= (0, 8, 0):
        return Engine.V0 if use == "0" else Engine.V1
    return Engine.V1 if version >= (0, 6, 4) and use == "1" else Engine.V0


@dataclass(frozen=True)
class Regime:
    """The accounting rules of one engine of one vLLM version. An unknown version is treated as current."""

    version: Optional[Version]
    engine: Engine = Engine.V1
    extensible_kv: bool = False
    """0.34's extensible KV cache: sized after warm-up, no free-memory check, default utilization 1.0."""
    cpu: bool = False
    """vLLM's CPU backend (KV sized in RAM; gpu_memory_utilization is a fraction of the NUMA node)."""
    whole_prompt_admission: bool = False
    """A request is admitted only where its whole prompt's blocks are free in every group, windows not
    capped (see envcheck.Interpreter): a sliding or chunked group counts every prompt token there."""

    @classmethod
    def of(cls, version: Optional[str], engine: Optional[Engine] = None, env: Optional[Mapping[str, str]] = None,
           kv_bytes_fixed: bool = False, cpu: bool = False, whole_prompt_admission: bool = False) -> Regime:
        """The regime of a version string, the engine seen (or expected) and the knob in use."""
        parsed = version_tuple(version)
        engine = engine or default_engine(parsed, env or {})
        extensible = (engine is Engine.V1 and parsed is not None and parsed >= (0, 34, 0) and not kv_bytes_fixed
                      and not cpu)
        return cls(parsed, engine, extensible, cpu, whole_prompt_admission and engine is Engine.V1)

    def since(self, *version: int) -> bool:
        """True when this version is at least `version` (an unknown version counts as new)."""
        return self.version is None or self.version >= tuple(version)

    @property
    def v1(self) -> bool:
        return self.engine is Engine.V1

    @property
    def kv_cache_groups(self) -> bool:
        """V1 from 0.9.1 lays a hybrid model's layers out in KV cache groups of equal pages in one pool, whose
        figures this tool reads (kv_groups.py); the start and request rules differ by version (longest_held)."""
        return self.v1 and self.since(0, 9, 1)

    @property
    def estimate_printed_when_any_fits(self) -> bool:
        """V1 0.9.1+ ends a too-long error with its estimate of the longest length whenever one token fits;
        its absence says none does with that pool (0.8.4-0.9.0 dropped the number by a bug; an unknown version
        may be one of those)."""
        return self.v1 and self.version is not None and self.version >= (0, 9, 1)

    @property
    def free_memory_check(self) -> bool:
        """V1 0.9.1+ refuses to start unless free memory >= total x utilization (not 0.34's extensible cache)."""
        return self.v1 and self.since(0, 9, 1) and not self.extensible_kv and not self.cpu

    @property
    def foreign_memory_in_budget(self) -> bool:
        """Other processes' memory is subtracted inside total x utilization (V0 0.6.4, V1 0.6.5-0.9.0)."""
        if self.version is None or self.cpu:
            return False
        if self.v1:
            return (0, 6, 5) <= self.version < (0, 9, 1)
        return (0, 6, 4) <= self.version < (0, 6, 5)

    @property
    def foreign_memory_outside_budget(self) -> bool:
        """Other processes' memory is not in total x utilization, so a budget above the free memory
        fails (at the free-memory check, or by running out of memory); not 0.34's extensible cache."""
        return not (self.cpu or self.extensible_kv or self.foreign_memory_in_budget)

    @property
    def null_block_in_start_check(self) -> bool:
        """From 0.29 the start-up check (and vLLM's estimate and auto-fit) count the reserved null block."""
        return self.v1 and self.since(0, 29, 0)

    @property
    def request_needs_null_block(self) -> bool:
        """V1 0.8+ keeps one block back from every sequence (before 0.29 a boundary request hangs)."""
        return self.v1 and self.since(0, 8, 0)

    @property
    def autofit(self) -> bool:
        """max_model_len=-1 (vLLM fits the length to memory itself) exists from 0.14 (V1)."""
        return self.v1 and self.since(0, 14, 0)

    @property
    def autofit_serves(self) -> bool:
        """Auto-fit's length also serves a full-length request (from 0.29; before, it hangs: vLLM #48724)."""
        return self.autofit and self.null_block_in_start_check

    @property
    def kv_from_environment(self) -> bool:
        """The CPU backend before 0.20 sizes the KV cache from VLLM_CPU_KVCACHE_SPACE (whole GiB), never from a
        profile: the pool is the same at every length."""
        return self.cpu and not self.since(0, 20, 0)

    @property
    def kv_bytes_knob(self) -> bool:
        """kv_cache_memory_bytes exists from 0.10.2; the CPU backend honours it only from 0.20."""
        if self.cpu:
            return not self.kv_from_environment
        return self.since(0, 10, 2)

    @property
    def ceil_requested(self) -> bool:
        """From 0.14 the budget is math.ceil(total x utilization)."""
        return self.since(0, 14, 0)

    @property
    def default_utilization(self) -> float:
        """vLLM's default gpu_memory_utilization: 0.9, 0.92 from 0.20, 1.0 with 0.34's extensible cache."""
        if self.extensible_kv:
            return 1.0
        return 0.92 if self.since(0, 20, 0) else 0.9

    def default_block_size(self, mla: bool = False) -> int:
        """The block size vLLM picks when none is set (section 4g); a launch reports the real one."""
        if self.cpu:  # V1 on CPU uses 128 in every version seen (0.9.2 too), 16 for MLA from 0.28; V0 16
            return 16 if not self.v1 or (mla and self.since(0, 28, 0)) else 128
        if self.since(0, 34, 0):
            return 64
        return 64 if mla and self.since(0, 8, 0) else 16

    def servable_len(self, blocks: int, block_size: int, sliding_window: Optional[int] = None,
                     sequences: int = 1) -> int:
        """The longest max_model_len whose start-up check passes with `blocks` KV blocks and whose
        full-length request (L - 1 prompt tokens, 1 generated) is served; with `sequences`, that
        many such requests at once.

        sliding_window: V0 keeps at most this many tokens' blocks per sequence.
        """
        bs = block_size
        window_blocks = sliding_window // bs if sliding_window and not self.v1 else None
        if blocks <= 0:
            return 0
        if not self.v1:
            prompt_limit = blocks - int(V0_WATERMARK * blocks)
            if window_blocks is not None and window_blocks <= prompt_limit:
                single = blocks * bs  # the window caps the prompt's blocks: the watermark never binds
            else:
                single = min(blocks * bs, prompt_limit * bs + 1)
        elif self.null_block_in_start_check:
            single = (blocks - 1) * bs
        elif self.request_needs_null_block:
            single = (blocks - 1) * bs + 1
        else:
            single = blocks * bs
        if sequences <= 1:
            return single
        return min(single, self.usable_blocks(blocks) // sequences * bs + 1)

    def usable_blocks(self, blocks: int) -> int:
        """The blocks requests can hold: less the null block (V1 0.8+), less the watermark (V0)."""
        if not self.v1:
            return blocks - int(V0_WATERMARK * blocks)
        return blocks - 1 if self.request_needs_null_block else blocks

    def sequences_held(self, blocks: int, block_size: int, length: int) -> int:
        """How many full-length requests of `length` the pool holds at once (each needs the blocks of
        its L - 1 prompt tokens; the generated token is never written)."""
        return self.usable_blocks(blocks) // max(1, cdiv(length - 1, block_size))

    def blocks_needed(self, length: int, block_size: int, sliding_window: Optional[int] = None,
                      sequences: int = 1) -> int:
        """The fewest KV blocks with which `length` starts and serves (the inverse of servable_len)."""
        blocks = max(1, cdiv(max(1, length - 1), block_size) * sequences)  # a lower bound in every regime
        while self.servable_len(blocks, block_size, sliding_window, sequences) < length:
            blocks += 1
        return blocks

    def estimate_blocks(self, estimate: int, block_size: int) -> int:
        """The pool behind vLLM's estimated maximum length (it is blocks x block_size, less the null
        block from 0.29)."""
        blocks = estimate // block_size
        return blocks + 1 if self.null_block_in_start_check else blocks
