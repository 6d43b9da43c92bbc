"""Engine arguments that change a crash, where vLLM's own trace points at them.

A request that crashes the engine is not a memory problem, so no length or memory setting fixes it;
some crashes belong to a feature the user can turn off. Where the innermost vLLM frame of the trace is
in a mamba or linear-attention layer and prefix caching was on (vLLM's default in recent versions,
which keeps those layers' states per block: the "align" cache mode), the hint is to turn prefix
caching off. Seen on vLLM 0.32 (CPU) with Granite 4.0-H: every request longer than a chunk crashed in
mamba_mixer2.py, and enable_prefix_caching=false served (issue 30). `--explore` tries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from ..outcome import Outcome
from ..trial.record import TrialRecord

STATE_LAYER_PATHS = ("vllm/model_executor/layers/mamba/", "vllm/model_executor/layers/fla/",
                     "gdn_attn", "linear_attn", "short_conv", "mamba_attn")
"""Where vLLM keeps the code of layers with a recurrent state (mamba, gated DeltaNet, linear attention)."""


@dataclass(frozen=True)
class EngineHint:
    """One engine argument to try, and why."""

    name: str
    value: object
    why: str
    """Why this argument, and what to do (the crash's frame not repeated)."""
    frame: str
    """Where vLLM failed: `path:line (function)`."""

    @property
    def argument(self) -> str:
        """As --engine-arg takes it."""
        return "%s=%s" % (self.name, str(self.value).lower() if isinstance(self.value, bool) else self.value)


    @property
    def line(self) -> str:
        """The diagnosis in one line."""
        return "a request crashed the engine in %s: %s" % (self.frame, self.why)


def crash_hint(trials: Iterable[TrialRecord]) -> Optional[EngineHint]:
    """The engine argument a request-time crash points at, from the first such trial (None: none does)."""
    for trial in trials:
        if trial.outcome is not Outcome.CRASH or trial.phase != "request":
            continue
        _, marker, frame = trial.detail.rpartition(" (raised in ")  # classify.py names the raising frame
        frame = frame[:-1] if frame.endswith(")") else frame
        if not marker or not any(path in frame for path in STATE_LAYER_PATHS):
            continue
        if trial.llm_kwargs.get("enable_prefix_caching") is False:
            continue
        return EngineHint("enable_prefix_caching", False,
                          "that is a layer with a recurrent state, and prefix caching was on (vLLM's default), which"
                          " keeps such states per block; try --engine-arg enable_prefix_caching=false (--explore"
                          " tries it)", frame)
    return None
