"""vllm-fit: find the vLLM configuration that really serves on this device, by launching it.

The public API: build a SearchRequest, `prepare` it (all input checks, no launch), `run_search` it.
The parent process never imports vllm or torch; trials run `probe.py` in the vLLM interpreter.
"""

from .__about__ import __version__
from .errors import BadInput, EnvironmentProblem, FitError, Interrupted
from .fitter import SearchOutcome, SearchRequest, prepare, run_search
from .outcome import CapacityFacts, Classification, Outcome

__all__ = ["__version__", "BadInput", "EnvironmentProblem", "FitError", "Interrupted", "SearchOutcome",
           "SearchRequest", "prepare", "run_search", "CapacityFacts", "Classification", "Outcome"]
