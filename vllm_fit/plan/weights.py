"""Dummy weights: where the exploration may use them, and the launch that verifies its fit with the real ones.

A search explores on dummy weights only where they take the memory the real ones take; its fit is
then launched once more with the real weights, and only that launch's record is the fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence

from ..outcome import Outcome
from ..prepare import Prepared
from ..prepare.request import ExploreWeights
from ..redact import is_secret_arg, public_args
from ..trial.record import TrialRecord
from ..trial.run import TrialPlan

DUMMY_UNSAFE_ARGS = ("load_format", "quantization")
"""Engine arguments after which dummy weights may not take the memory the real ones take."""
DUMMY_PAYS_BYTES = 4 << 30
"""--explore-weights auto: weights this large take long enough to read that skipping them pays for
the one extra launch that verifies the fit with them."""


def exploration_load_format(prepared: Prepared) -> Optional[str]:
    """"dummy" where dummy weights take the memory the real ones take (a config.json that was read,
    no quantization: bitsandbytes, GGUF and the other quantized formats may size dummy weights
    differently; no explicit load format) and, for auto, where it pays; None otherwise."""
    request, model = prepared.request, prepared.model
    wanted = request.explore_weights
    if wanted is ExploreWeights.REAL or model.config_sha256 is None or model.quantization is not None:
        return None
    if any(key in request.engine_args for key in DUMMY_UNSAFE_ARGS):
        return None
    if wanted is ExploreWeights.AUTO and (model.weights_bytes or 0) < DUMMY_PAYS_BYTES:
        return None
    return "dummy"


@dataclass(frozen=True)
class RealWeightsCheck:
    """The explored fit launched with the real weights: the record that is the fit, or why there is none."""

    record: TrialRecord
    note: str
    failure: Optional[str]
    """Why the fit found on dummy weights is no fit (None: the real weights serve the same length)."""


def verify_with_real_weights(plan: TrialPlan, explored: TrialRecord, records: Sequence[TrialRecord],
                             launch_one: Callable[[Dict[str, Any]], TrialRecord]) -> RealWeightsCheck:
    """Launch the fit explored on dummy weights with the real ones (unless a resumed search already
    did); `launch_one` launches and records one trial."""
    kwargs = plan.llm_kwargs({})  # the real secret values, which records never keep
    kwargs.update({key: value for key, value in explored.llm_kwargs.items()
                   if key != "load_format" and not is_secret_arg(key, value)})
    wanted = public_args(kwargs)
    done = next((r for r in records if r.load_format is None and r.llm_kwargs == wanted), None)
    real = done if done is not None else launch_one(kwargs)
    dummies = [r for r in records if r.load_format]
    note = "trials %s explored on dummy weights (load_format=%s); trial %d verified the fit with the real weights" % (
        ", ".join(str(r.index) for r in dummies), explored.load_format, real.index)
    failure = None
    if real.outcome is not Outcome.OK or real.length != explored.length:
        failure = "the fit found on dummy weights (trial %d) did not serve with the real weights: %s: %s; rerun" \
            " with --real-weights" % (explored.index, real.outcome.value, real.detail)
    return RealWeightsCheck(real, note, failure)
