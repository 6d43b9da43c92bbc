"""vllm-fit: find the vLLM configuration that really serves on this device, by launching it.

The public API is one call per command (api.py): `vllm_fit.search(model, **options)` returns the typed
`SearchReport` (its `to_json()` is the JSON `--report` writes), `vllm_fit.apply(source, to=[...])` and
`vllm_fit.verify(files)`; errors are the exceptions below (`exit_code` says which). Underneath:
`prepare.request_from_options` -> `prepare` (every input check, no launch) -> `fitter.run_search`.
The parent process never imports vllm or torch; trials run `probe.py` in the vLLM interpreter.
"""

__version__ = "0.3.0"

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
    "apply",
    "search",
    "verify",
]


def __getattr__(name: str) -> object:
    """search, apply and verify load the search machinery only when they are used."""
    if name in ("search", "apply", "verify"):
        from . import api

        return getattr(api, name)
    raise AttributeError("module 'vllm_fit' has no attribute %r" % name)
