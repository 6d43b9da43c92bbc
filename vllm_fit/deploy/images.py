"""What an image runs when a deployment does not name the program: vLLM's images and KServe's.

vLLM's `vllm-openai` image has `ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]` up to
0.11.0 and `["vllm", "serve"]` from 0.11.1 (docker/Dockerfile in each release's source archive on PyPI). Both
take the same options; only the newer one takes the model as a positional word. KServe's huggingfaceserver
image runs `python -m huggingfaceserver`. An image that is none of these runs vLLM only if its arguments say so:
arguments that name their own program (`python -m vllm...`, `vllm serve`, `sh -c`) are run as they are (the usual
`exec "$@"` entrypoint; Vertex AI's pytorch-vllm-serve image is given `args: [python, -m, vllm.entrypoints...]`),
and bare vLLM-only options are taken as `vllm serve`'s.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from .vllm_args import is_shell, program_of
from .words import Word

VLLM_IMAGE = re.compile(r"(^|/)vllm[-_]?openai([-_][a-z0-9]+)?(:|@|$)|(^|/)vllm-(cpu|rocm|tpu|neuron)(:|@|$)", re.I)
KSERVE_HF_IMAGE = re.compile(r"(^|/)huggingfaceserver(:|@|$)", re.I)
SERVE_SINCE = (0, 11, 1)
VLLM_ONLY = ("--max-model-len", "--gpu-memory-utilization", "--gpu_memory_utilization", "--max_model_len",
             "--served-model-name", "--tensor-parallel-size", "--kv-cache-memory-bytes")


def is_vllm_image(image: Optional[str]) -> bool:
    return bool(image and VLLM_IMAGE.search(image))


def tag_version(image: Optional[str]) -> Optional[str]:
    """The vLLM version a vLLM image's tag names (`:v0.10.1.1` -> "0.10.1.1"; python:3.11's tag is not vLLM's),
    else None."""
    found = re.search(r":v?(\d+\.\d+(?:\.\d+)*)", image) if image and is_vllm_image(image) else None
    return found.group(1) if found else None


def numbers(version: str) -> Tuple[int, ...]:
    """"0.10.1.1" -> (0, 10, 1, 1), for comparing releases."""
    return tuple(int(n) for n in version.split("."))


def image_entrypoint(image: Optional[str], args: Sequence[Word]) -> Optional[List[Word]]:
    """The words an image runs before its arguments, where that program is a vLLM server, else None."""
    if image and KSERVE_HF_IMAGE.search(image):
        return [Word.made(w) for w in ("python", "-m", "huggingfaceserver")]
    if is_vllm_image(image):
        tag = tag_version(image)
        old = tag is not None and numbers(tag) < SERVE_SINCE
        return [Word.made(w) for w in (("python3", "-m", "vllm.entrypoints.openai.api_server") if old
                                       else ("vllm", "serve"))]
    if args and (program_of(args) is not None or is_shell(args[0])):
        return []
    if any(w.text.split("=", 1)[0] in VLLM_ONLY for w in args):
        return [Word.made("vllm"), Word.made("serve")]
    return None
