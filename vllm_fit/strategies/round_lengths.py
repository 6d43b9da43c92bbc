"""Where a boundary carries one bit a launch (a start that hangs, a request that fails far below its pool):
the probe that halves a prior on where the boundary is, round lengths likeliest.

Such a boundary is not where vLLM's memory numbers point; it is a length some code path cannot take,
and those sit on round numbers: powers of two and their multiples (batched-token budgets, graph capture
sizes, kernel limits, rope lengths) or round decimals (lengths people configure), at any scale. So the
last length that serves, x, gets the prior weight (1 + ROUND_WEIGHT x 2^(1.25 roundness)) / max(x,
4096): no scale preferred above 4096 tokens, a round length far likelier than its neighbours, and a
little of that weight on the length just below a round one. Each probe splits the prior mass of the
boundaries still possible in half; once a round length that served holds half of it, the probe is the
length just above it. A boundary on a round number is proven where a plain bisection pays one launch per
halving down to the granularity; one on no round number costs a few launches more
(tests/test_indirect_numbers.py; BENCHMARKS.md).
"""

from __future__ import annotations

import math
from typing import Optional

DECIMAL_ZERO_BITS = 3
"""A trailing decimal zero counts as this many bits of roundness (8192: 13; 6000: 9; 20480: 12)."""
ROUND_WEIGHT = 1.0
"""How much likelier a round length is than its neighbours: a length with r bits of roundness weighs
1 + ROUND_WEIGHT x 2^(ROUND_EXPONENT x r). On 600 boundaries drawn from round, plain and log-uniform
lengths (a pure simulation of the search, 2026-12-05), 0.3 to 3 give the same mean launches within a tenth."""
ROUND_EXPONENT = 1.25
"""Each bit of roundness makes a length 2^1.25 times likelier: on boundaries drawn like the simulated
worlds' hangs (powers of two and round thousands) 8.8 launches on average where 1.0 gives 9.2 and 1.5
8.7; boundaries on no round number cost 13.3 (1.0: 13.0, 1.5: 13.8; a plain bisection about 12)."""
BELOW_ROUND = 0.2
"""The share of a round length's weight given to the candidate just below it (a limit tested as "X or
more" rather than "above X"): it keeps a boundary at 65535 from costing more than a plain bisection."""
SCALE_FLOOR = 4096
"""Below this many tokens every length weighs as one at it: boundaries below it are rare, and a prior
that spread as much mass over 16-4096 as over 4096-1M would climb from the shortest length one scale at
a time (a hang above 65536 over 16-131072: 7 launches with no floor, 6 with it)."""
_EULER = 0.5772156649015329
_EXACT_HARMONIC = 32


def roundness(length: int) -> int:
    """Trailing zero bits, or DECIMAL_ZERO_BITS per trailing decimal zero, whichever is more."""
    if length <= 0:
        return 0
    bits = (length & -length).bit_length() - 1
    decimal, rest = 0, length
    while rest % 10 == 0:
        rest //= 10
        decimal += 1
    return int(max(bits, DECIMAL_ZERO_BITS * decimal))


def _harmonic(n: int) -> float:
    """1 + 1/2 + ... + 1/n (0 for n <= 0), exactly for small n, else by its asymptotic series."""
    if n <= 0:
        return 0.0
    if n < _EXACT_HARMONIC:
        return sum(1.0 / i for i in range(1, n + 1))
    return math.log(n) + _EULER + 1.0 / (2 * n) - 1.0 / (12 * n * n)


def _inverse_sum(step: int, low: int, high: int) -> float:
    """The sum of 1/max(x, SCALE_FLOOR) over the multiples x of `step` in [low, high] (low >= 1): flat below
    the floor, harmonic above it."""
    flat_last = min(high, SCALE_FLOOR - 1) // step
    first = -(-low // step)
    flat = max(0, flat_last - first + 1) / SCALE_FLOOR
    first = max(first, -(-SCALE_FLOOR // step))
    last = high // step
    return flat + ((_harmonic(last) - _harmonic(first - 1)) / step if last >= first else 0.0)


def _round_sum(low: int, high: int, granularity: int) -> float:
    """The sum of 2^(e roundness(x)) / max(x, SCALE_FLOOR) over the multiples x of `granularity` in [low,
    high] (low >= 1, e
    being ROUND_EXPONENT), from harmonic sums over the multiples of each power of two and ten (2^(e r) is 1
    plus the sum of 2^(e k) - 2^(e (k - 1)) for k = 1..r), so without visiting every candidate."""
    total = _inverse_sum(granularity, low, high)
    bits = 1
    while (1 << bits) <= high or 10 ** -(-bits // DECIMAL_ZERO_BITS) <= high:
        binary = granularity * (1 << bits) // math.gcd(granularity, 1 << bits)
        decimal_power = 10 ** -(-bits // DECIMAL_ZERO_BITS)
        decimal = granularity * decimal_power // math.gcd(granularity, decimal_power)
        both = binary * decimal // math.gcd(binary, decimal)
        at_least = _inverse_sum(binary, low, high) + _inverse_sum(decimal, low, high) - _inverse_sum(both, low, high)
        total += (2.0 ** (ROUND_EXPONENT * bits) - 2.0 ** (ROUND_EXPONENT * (bits - 1))) * at_least
        bits += 1
    return total


def prior_mass(low: int, high: int, granularity: int) -> float:
    """The prior weight of the boundaries in [low, high] (multiples of `granularity` g, low >= 1): the last
    length that serves is x with weight (1 + w (1 - b) 2^(e r(x))) / s(x) + w b 2^(e r(x + g)) / s(x + g), r
    being the roundness, s(x) = max(x, SCALE_FLOOR), w ROUND_WEIGHT, e ROUND_EXPONENT and b BELOW_ROUND (a
    limit tested as "above X", now and then as "X or more")."""
    if high < low:
        return 0.0
    return _inverse_sum(granularity, low, high) + ROUND_WEIGHT * (
        (1 - BELOW_ROUND) * _round_sum(low, high, granularity)
        + BELOW_ROUND * _round_sum(low + granularity, high + granularity, granularity))


def round_probe(known_ok: Optional[int], top: int, lowest: int, granularity: int) -> int:
    """The next probe between the longest length that served (None: nothing yet) and the highest candidate
    not ruled out: the candidate p for which "the boundary is below p" and "p serves" weigh the same."""
    start = known_ok + granularity if known_ok is not None and known_ok >= lowest else lowest
    start = max(start, granularity)
    if start >= top:
        return max(lowest, top)
    served_weight = prior_mass(known_ok, known_ok, granularity) if known_ok is not None and known_ok >= lowest \
        else 1.0 / max(lowest, 1)

    def below(probe: int) -> float:
        return served_weight + prior_mass(start, probe - granularity, granularity)

    half = (served_weight + prior_mass(start, top, granularity)) / 2
    low_index, high_index = -(-start // granularity), top // granularity
    while low_index < high_index:  # the first probe whose mass below reaches half the total
        middle = (low_index + high_index) // 2
        if below(middle * granularity) >= half:
            high_index = middle
        else:
            low_index = middle + 1
    nearest = {max(-(-start // granularity), low_index - 1) * granularity, low_index * granularity}
    return min(nearest, key=lambda probe: (abs(below(probe) - half), probe))
