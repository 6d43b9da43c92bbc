"""What each vLLM release's command line accepts, where apply depends on it: how `vllm serve` takes its model,
and the options a fit writes.

Read in vLLM's sources (`vllm/scripts.py`, `vllm/entrypoints/cli/serve.py`, `FlexibleArgumentParser.parse_args`,
`EngineArgs` of each release) and checked with the parsers of 0.9.2, 0.28 and 0.32
(tests/test_real_vllm_versions.py):

- before 0.5.5 the model is a required positional word and --model is ignored;
- 0.5.5 to 0.8.2: the positional is required, and any --model raises "With `vllm serve`, you should provide the
  model as a positional argument instead of via the `--model` option" (vLLM PR #7347);
- 0.8.3 to 0.11.0: the positional is optional; the word `--model` (not `--model=X`) raises that error;
- from 0.11.1: --model is moved into the positional slot (vLLM PR #25967), so a positional beside it is an
  unrecognized argument;
- `--kv-cache-memory-bytes` exists from 0.10.2.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from .fits import Fit
from .images import is_vllm_image, numbers, tag_version
from .servers import Server
from .vllm_args import Program

REQUIRED_UNTIL = (0, 8, 3)
"""From here the positional model is optional."""
REFUSED_SINCE = (0, 5, 5)
MOVED_SINCE = (0, 11, 1)
KV_BYTES_SINCE = (0, 10, 2)
SERVE_ERROR = "'With `vllm serve`, you should provide the model as a positional argument ...'"


def image_version(server: Server) -> Optional[str]:
    """The vLLM version its vLLM image's tag names, else None."""
    return tag_version(server.image)


def fit_version(fit: Fit) -> Optional[str]:
    found = re.match(r"\d+\.\d+(?:\.\d+)*", fit.vllm_version or "")
    return found.group(0) if found else None


def running_version(server: Server, fit: Fit) -> Optional[Tuple[int, ...]]:
    """The vLLM the server runs: its vLLM image's tag; a vLLM image without one is taken as the newest (None);
    elsewhere the version the fit was found with."""
    if server.image and is_vllm_image(server.image):
        tag = image_version(server)
        return numbers(tag) if tag else None
    found = fit_version(fit)
    return numbers(found) if found else None


def model_refusal(server: Server, fit: Fit) -> Optional[str]:
    """Why the server's vLLM refuses to start for the way its model is given (None where it starts)."""
    version = running_version(server, fit)
    if server.program is not Program.SERVE or version is None:
        return None
    args = server.args
    positional = next((w for w in args.positionals if w.text), None)
    given = [o for o in args.options if o.name == "--model"]
    shown = ".".join(str(n) for n in version)
    if version < REQUIRED_UNTIL and positional is None:
        return ("vLLM %s's vllm serve needs its model as the positional word after serve ('the following arguments"
                " are required: model_tag'); write the model there" % shown)
    if not given or version < REFUSED_SINCE:
        return None  # before 0.5.5 the positional is served and --model ignored
    if version < REQUIRED_UNTIL or (version < MOVED_SINCE and any(o.flag.text == "--model" for o in given)):
        return ("it gives vllm serve its model with --model, which vLLM %s refuses to start (%s); write the model"
                " as the positional word after serve instead" % (shown, SERVE_ERROR))
    if version >= MOVED_SINCE and positional is not None:
        option = "--model %s" % given[0].value if given[0].value is not None else "--model with no value"
        return ("it gives vllm serve its model twice (%s, and %s), which vLLM %s refuses to start"
                " ('unrecognized arguments'); keep the positional one" % (positional.text, option, shown))
    return None


def missing_option(server: Server, fit: Fit) -> Optional[str]:
    """Why the server's vLLM cannot take the fit's memory knob (None where it can): `--kv-cache-memory-bytes` is
    an unrecognized argument before 0.10.2."""
    version = running_version(server, fit)
    if fit.knob[0] != "kv_cache_memory_bytes" or version is None or version >= KV_BYTES_SINCE:
        return None
    return ("its vLLM %s has no --kv-cache-memory-bytes (from 0.10.2 on; it refuses to start with it); apply a fit"
            " found with --gpu-memory-utilization on that version" % ".".join(str(n) for n in version))
