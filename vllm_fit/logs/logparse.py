"""Pure parsing of vLLM's output: log text in, capacity facts and error facts out.

Formats follow ../shared/reference/vllm-strings.md (vLLM 0.4.0 to 0.34.0): log prefixes with or
without brackets, `(ProcName pid=N)` and `[rank0]:` prefixes, ANSI colours, and `\\r\\n`
continuation lines. Nothing here guesses a number: a fact is set only when a line states it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Pattern, Tuple

from ..outcome import CapacityFacts
from .patterns import (
    AUTOFIT_FULL,
    AUTOFIT_REDUCED,
    AVAILABLE_KV,
    BANNER,
    BATCHED_TOKENS,
    BLOCK_OVERRIDE,
    BLOCKS,
    CONCURRENCY,
    CPU_KV_DEFAULT,
    CPU_KV_SET,
    DERIVED_MAX,
    EXTENDED_BLOCKS,
    FREE_MEMORY_INFO,
    FREE_MEMORY_SHORT,
    KV_BYTES_SET,
    KV_IN_USE_BYTES,
    OOM,
    OOM_ALLOC,
    OOM_FREE,
    OPENVINO_BLOCKS,
    UNIT_BYTES,
    USAGE_INFO,
    USAGE_INFO_034,
    USING_MAX_LEN,
    V0_064_PROFILE,
    V0_FALLBACK,
    V0_PROFILE_KV,
    V0_PROFILE_PARTS,
    V0_PROFILE_TOTAL,
    V0_TOO_LONG,
    V1_TOKENS,
    V1_TOO_LONG,
    WEIGHTS_LOADED,
)
from .regime import Engine

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PROC_PREFIX = re.compile(r"^\s*(?:\[rank\d+\]:\s*|\([^()]*?\bpid=\d+[^()]*\)\s*)")
_HEADER = re.compile(
    r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?\s+"
    r"\[?[^\]\s]+:\d+\]\s?"
)
MAX_LINE = 20000
"""Longer physical lines are cut (a runaway line must not cost the parser minutes)."""


@dataclass(frozen=True)
class LogLine:
    """One physical line of output: as printed (raw) and with prefixes and colours removed (msg)."""

    raw: str
    msg: str


def _strip_prefixes(line: str) -> str:
    """Remove process prefixes and the log header, in any order and any number of times."""
    while True:
        before = line
        line = _PROC_PREFIX.sub("", line, count=1)
        line = _HEADER.sub("", line, count=1)
        if line == before:
            return line


def log_lines(text: str) -> List[LogLine]:
    """Split output into lines (\\n, \\r\\n and bare \\r all end a line) with prefixes stripped."""
    lines = []
    for raw in re.split(r"\r\n|\n|\r", text):
        plain = _ANSI.sub("", raw[:MAX_LINE])
        if plain.strip():
            lines.append(LogLine(raw=plain.rstrip(), msg=_strip_prefixes(plain.strip()).strip()))
    return lines


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


# --- capacity and memory lines (section 1) ---------------------------------------------------------

def find_all(pattern: Pattern[str], lines: Iterable[LogLine]) -> List[Tuple[LogLine, re.Match[str]]]:
    """Every line whose message matches, with its match object."""
    found = []
    for line in lines:
        match = pattern.search(line.msg)
        if match:
            found.append((line, match))
    return found


def first_group(match: re.Match[str]) -> Optional[str]:
    """The first group that took part in the match (for alternations of equivalent forms)."""
    return next((group for group in match.groups() if group is not None), None)


def read_capacity(lines: List[LogLine]) -> Tuple[CapacityFacts, List[str]]:
    """Capacity and memory facts from a trial's output, with the lines they came from.

    With several workers (tensor parallel) a capacity line can appear once per rank: the minimum
    is taken. For auto-fit the last line wins (0.34 fits twice, the second one is final).
    """
    facts = CapacityFacts()
    evidence: List[str] = []

    def take(pattern: Pattern[str]) -> List[Tuple[LogLine, re.Match[str]]]:
        hits = find_all(pattern, lines)
        evidence.extend(line.raw for line, _ in hits)
        return hits

    tokens = take(V1_TOKENS)
    if tokens:
        facts.kv_cache_tokens = min(_int(m.group(1)) for _, m in tokens)
    concurrency = take(CONCURRENCY)
    if concurrency:
        lowest = min(concurrency, key=lambda hit: _number(hit[1].group(2)))[1]
        facts.concurrency_len, facts.max_concurrency = _int(lowest.group(1)), _number(lowest.group(2))
    blocks = [int(m.group(1)) for _, m in take(BLOCKS) + take(OPENVINO_BLOCKS)]
    blocks += [int(first_group(m) or 0) for _, m in take(BLOCK_OVERRIDE)]
    extended = take(EXTENDED_BLOCKS)
    if extended:
        blocks = [int(extended[-1][1].group(1))]
    if blocks:
        facts.num_blocks = min(blocks)
    _read_kv_memory(facts, take)
    if extended:  # 0.34: the KV cache as extended after warm-up is the final one
        facts.available_kv_gib = _number(extended[-1][1].group(2))
    _read_usage(facts, take)
    autofit = take(AUTOFIT_REDUCED)
    full = take(AUTOFIT_FULL)
    if autofit or full:
        reduced_last = bool(autofit) and (not full or lines.index(autofit[-1][0]) > lines.index(full[-1][0]))
        facts.autofit_reduced = reduced_last
        if reduced_last:
            numbers = [int(g) for g in autofit[-1][1].groups() if g is not None]
            facts.autofit_from, facts.autofit_len = numbers[0], numbers[1]
        else:
            facts.autofit_from = facts.autofit_len = int(full[-1][1].group(1))
    batched = find_all(BATCHED_TOKENS, lines)
    if batched:
        facts.max_num_batched_tokens = int(batched[-1][1].group(1))
    using = find_all(USING_MAX_LEN, lines)
    if using:
        facts.effective_max_model_len = int(using[-1][1].group(1))
    banner = find_all(BANNER, lines)
    if banner:
        engine, facts.engine_version = banner[-1][1].group(1), banner[-1][1].group(2)
        # before 0.7.1 the banner names no engine: the version's default and VLLM_USE_V1 decide (record.py)
        facts.engine = Engine(engine.lower()) if engine else None
    if find_all(V0_FALLBACK, lines):
        facts.engine = Engine.V0
    return facts, evidence


def _read_kv_memory(facts: CapacityFacts, take) -> None:
    """The KV cache's size in GiB (and exact bytes where printed), from whichever line this version prints."""
    kv_gib = [_number(m.group(1)) for _, m in take(AVAILABLE_KV) + take(V0_PROFILE_KV) + take(KV_BYTES_SET)]
    for _, match in take(CPU_KV_SET):
        kv_gib.append(_number(match.group(1)))
        facts.total_memory_gib = _number(match.group(2))
    kv_gib += [_number(m.group(1)) for _, m in take(CPU_KV_DEFAULT)]
    for _, match in take(V0_064_PROFILE):
        facts.total_memory_gib = _number(match.group(1))
        facts.weights_gib = _number(match.group(2))
        facts.activation_gib = round(_number(match.group(3)) - facts.weights_gib, 2)
        facts.non_torch_gib = _number(match.group(4))
        kv_gib.append(_number(match.group(5)))
        facts.gpu_memory_utilization = _number(match.group(6))
    if kv_gib:
        facts.available_kv_gib = min(kv_gib)
    exact = take(KV_IN_USE_BYTES)
    if exact:
        facts.kv_cache_bytes = min(int(m.group(1)) for _, m in exact)
    for _, match in take(V0_PROFILE_TOTAL):
        facts.total_memory_gib = _number(match.group(1))
        facts.gpu_memory_utilization = _number(match.group(2))
        facts.requested_memory_gib = _number(match.group(3))
    for _, match in take(FREE_MEMORY_INFO):
        facts.free_memory_gib, facts.total_memory_gib = _number(match.group(1)), _number(match.group(2))
        facts.gpu_memory_utilization = _number(match.group(3))
        facts.requested_memory_gib = _number(match.group(4))


def _read_usage(facts: CapacityFacts, take) -> None:
    """What the weights, activations, non-torch memory and CUDA graphs took (V0 profile, V1 0.10.2+)."""
    for _, match in take(WEIGHTS_LOADED):
        facts.weights_gib = _number(match.group(1))
    for _, match in take(V0_PROFILE_PARTS):
        facts.weights_gib, facts.non_torch_gib = _number(match.group(1)), _number(match.group(2))
        facts.activation_gib = _number(match.group(3))
    for _, match in take(USAGE_INFO):
        facts.weights_gib, facts.activation_gib = _number(match.group(1)), _number(match.group(2))
        facts.non_torch_gib, facts.cudagraph_gib = _number(match.group(3)), _number(match.group(4))
    for _, match in take(USAGE_INFO_034):
        facts.activation_gib, facts.cudagraph_gib = _number(match.group(2)), _number(match.group(3))


def oom_sizes(text: str) -> Tuple[Optional[int], Optional[int]]:
    """torch's `Tried to allocate X` and `Y free` in an out-of-memory message, in bytes (None: not said)."""
    alloc, free = OOM_ALLOC.search(text), OOM_FREE.search(text)
    allocated = int(float(alloc.group(1)) * UNIT_BYTES[alloc.group(2)]) if alloc else None
    freed = None
    if free:
        number, unit = (free.group(1), free.group(2)) if free.group(1) else (free.group(3), free.group(4))
        freed = int(float(number) * UNIT_BYTES[unit])
    return allocated, freed


def read_error_facts(facts: CapacityFacts, match: re.Match[str]) -> None:
    """Copy the numbers of a too-long, derived-maximum, out-of-memory or free-memory error into facts."""
    pattern = match.re
    if pattern is V1_TOO_LONG:
        facts.error_max_model_len = int(match.group(1))
        facts.needed_kv_gib = _number(match.group(2))
        facts.error_available_kv_gib = _number(match.group(3))
        if match.group(4):
            facts.estimated_max_len = int(match.group(4))
    elif pattern is V0_TOO_LONG:
        facts.error_max_model_len = int(match.group(1))
        facts.error_capacity_tokens = int(match.group(2))
    elif pattern is DERIVED_MAX:
        derived = match.group(3)
        if derived != "None":
            facts.derived_max_len = int(float(derived))
    elif pattern is OOM:
        facts.oom_alloc_bytes, facts.oom_free_bytes = oom_sizes(match.string)
    elif pattern is FREE_MEMORY_SHORT:
        numbers = [g for g in match.groups() if g is not None]
        if len(numbers) >= 2:
            facts.free_memory_gib, facts.total_memory_gib = _number(numbers[0]), _number(numbers[1])
        if len(numbers) == 4:
            facts.gpu_memory_utilization = _number(numbers[2])
            facts.requested_memory_gib = _number(numbers[3])
