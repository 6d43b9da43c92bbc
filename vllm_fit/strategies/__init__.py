"""Search strategies and objectives: pure functions from observations to the next candidate."""

from .base import AUTO, Candidate, LengthSpace, Observation
from .length import STRATEGIES, Bisect, Doubling, LengthStrategy, Predict
from .objectives import LongestAtFixedMemory, Objective

__all__ = [
           "AUTO",
           "STRATEGIES",
           "Bisect",
           "Candidate",
           "Doubling",
           "LengthSpace",
           "LengthStrategy",
           "LongestAtFixedMemory",
           "Objective",
           "Observation",
           "Predict",
]
