"""A deployment's server as a launch on this machine (`vllm-fit verify k8s/llama.yaml`).

The server's own effective options, as its runtime gives them to vLLM (servers.py), become the
command line of vLLM's OpenAI server here: the model (a path that exists only in the container mapped
to a local folder by `--map-path`, or refused naming it), every other option as written, and the
trial's loopback host and free port last (the last occurrence wins). Options only another program
reads (KServe's huggingfaceserver) are dropped and said so; a value the file does not hold (an
expansion, a chart's generated config) or a path that is not here is refused before any launch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import BadInput
from .servers import Server
from .vllm_args import Program, model_of

BIND = ("--host", "--port", "--uds")
"""Where the server listens: replaced by the trial's loopback port."""
KSERVE_ONLY = ("--model-name", "--model-id", "--model-dir", "--backend", "--predictor-host", "--http-port",
               "--grpc-port", "--workers", "--max-threads", "--enable-docs-url", "--configure-logging",
               "--log-config-file", "--access-log-format", "--enable-latency-logging", "--dtype-hf")
"""huggingfaceserver's own options (python/huggingfaceserver/__main__.py), not vLLM's."""
PATH_OPTIONS = ("--config", "--chat-template", "--download-dir", "--tokenizer", "--lora-modules",
                "--allowed-local-media-path")


@dataclass(frozen=True)
class Launch:
    """What verify runs for one server: vLLM's OpenAI server arguments (host and port added by the trial),
    the name requests use, the length it should serve (None: vLLM's default) and the devices it needs."""

    name: str
    args: Tuple[str, ...]
    model: str
    served_name: str
    max_model_len: Optional[int]
    devices: int
    api_key: Optional[str] = None
    notes: Tuple[str, ...] = field(default=())


def parse_maps(values: Sequence[str]) -> Dict[str, str]:
    """`--map-path CONTAINER=LOCAL` values: container paths to local folders (BadInput when malformed)."""
    found: Dict[str, str] = {}
    for value in values:
        inner, sep, local = value.partition("=")
        if not sep or not inner.startswith("/") or not local:
            raise BadInput("--map-path %r: write CONTAINER_PATH=LOCAL_PATH, e.g. /mnt/models=./models/llama" % value)
        if not Path(os.path.expanduser(local)).exists():
            raise BadInput("--map-path %s: the local path %s does not exist" % (value, local))
        found[inner.rstrip("/") or "/"] = os.path.expanduser(local)
    return found


def _mapped(text: str, maps: Dict[str, str]) -> Optional[str]:
    for inner in sorted(maps, key=len, reverse=True):
        if text == inner or text.startswith(inner + "/"):
            return maps[inner] + text[len(inner):]
    return None


def server_launch(server: Server, maps: Dict[str, str], where: str) -> Launch:
    """The launch of one server; BadInput naming what keeps it from running here as it would there."""
    if server.template:
        raise BadInput("%s is a KServe runtime template, not a server; verify the InferenceService that uses it"
                       % where)
    if server.problem or server.program is None:
        raise BadInput("%s: %s; verify cannot launch what it cannot read" % (where, server.problem or "no program"))
    model_word = model_of(server.program, server.args)
    model = server.model if model_word is None or model_word.unknown else model_word.text
    if not model:
        raise BadInput("%s names no model vllm-fit can read%s" % (
            where, " (%s)" % model_word.unknown if model_word is not None and model_word.unknown else ""))
    local = _local_path(model, maps, where, "the model")
    args: List[str] = ["--model", local]
    notes: List[str] = []
    served: List[str] = []
    api_key = None
    for option in server.args.options:
        words = [option.flag, *option.values]
        unknown = next((w.unknown for w in words if w.unknown), "")
        if option.name in BIND or option.name == "--model" or option.name == "--served-model-name":
            if option.name == "--served-model-name":
                served = [option.value] if option.inline and option.value else [w.text for w in option.values]
            continue
        if server.program is Program.KSERVE and option.name in KSERVE_ONLY:
            if option.name == "--model-name" and option.value:
                served = [option.value]
            notes.append("%s is huggingfaceserver's, not vLLM's: left out" % option.flag.text.split("=")[0])
            continue
        if unknown:
            raise BadInput("%s: %s comes from %s, which this file does not hold; verify cannot launch it"
                           % (where, option.flag.text.split("=")[0], unknown))
        if option.name == "--api-key":
            api_key = option.value
            continue
        texts = [option.flag.text] + [w.text for w in option.values]
        if option.name in PATH_OPTIONS:
            texts = [_local_path(t, maps, where, option.name) if t.startswith("/") else t for t in texts]
        args += texts
    positionals = server.args.positionals[1:] if server.program is Program.SERVE else server.args.positionals
    positionals += server.args.merged
    if server.open_options:
        raise BadInput("%s: its command line has %s, which this file does not hold (it may set any option);"
                       " verify cannot launch it" % (where, server.open_options))
    if positionals:
        raise BadInput("%s: vLLM would refuse its extra words %s" % (where, " ".join(w.text for w in positionals)))
    if served:
        args += ["--served-model-name", *served]
    length = server.read_args.last("--max-model-len")  # its --config file's where the command line has none
    devices = 1
    for name in ("--tensor-parallel-size", "--pipeline-parallel-size"):
        found = server.read_args.last(name)
        if found is not None and found.value and found.value.isdigit():
            devices *= int(found.value)
    max_len = int(length.value) if length is not None and length.value and length.value.isdigit() else None
    return Launch(where, tuple(args), local, served[0] if served else local, max_len, devices, api_key, tuple(notes))


def _local_path(text: str, maps: Dict[str, str], where: str, what: str) -> str:
    """A path as it is on this machine: mapped with --map-path, else it must exist here."""
    mapped = _mapped(text, maps)
    if mapped is not None:
        return mapped
    if text.startswith("/") and not Path(text).exists():
        raise BadInput("%s: %s %s exists only in the container; map it to a local folder with --map-path %s=DIR"
                       % (where, what, text, text))
    return text
