"""The plan of one search, decided from the prepared request before the first launch: the objective
(with the KV model and the first length), what every trial shares, and the dummy-weights policy."""

from .objective import objective_for
from .trials import trial_plan

__all__ = ["objective_for", "trial_plan"]
