"""vllm-fit: find the vLLM configuration that really serves on this device, by launching it.

The public API: build a SearchRequest (`prepare.request_from_options`), `prepare` it (every input
check, no launch), `fitter.run_search` it: its `SearchOutcome.report` is a `report.search_report.SearchReport`
(typed; `to_json()` is the JSON `--report` writes). The parent process never imports vllm or torch;
trials run `probe.py` in the vLLM interpreter.
"""

__version__ = "0.2.0"

from .errors import BadInput, EnvironmentProblem, ExitCode, FitError, Interrupted
from .outcome import CapacityFacts, Classification, Outcome

__all__ = [
           "BadInput",
           "CapacityFacts",
           "Classification",
           "EnvironmentProblem",
           "ExitCode",
           "FitError",
           "Interrupted",
           "Outcome",
           "__version__",
]
