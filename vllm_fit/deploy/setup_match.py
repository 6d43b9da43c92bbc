"""Whether a fit was found on the settings a server runs with.

The length a GPU holds depends on more than the memory knob: tensor and pipeline parallelism, the
weights' and the KV cache's dtypes, quantization, CUDA graphs, the batch sizes vLLM profiles with,
speculative decoding, LoRA. A fit measured with other values of these is not the fit for the server
(vLLM may refuse the length, or the file loses context it could have), so `apply` refuses it unless
--allow-mismatch. Options whose default changes with the version, the hardware or the checkpoint are
compared only where both sides give them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import BadInput
from ..export.yaml_config import human_int
from .servers import Server
from .vllm_args import Option


class Kind(Enum):
    """How a setting's values are compared."""

    COUNT = "count"
    NUMBER = "number"
    FLAG = "flag"
    WIDTH = "bytes per value"
    TEXT = "text"
    JSON = "json"


VARIES = object()
"""The default depends on the vLLM version, the hardware, the entrypoint or the checkpoint: compared only when
both sides give it."""


@dataclass(frozen=True)
class Setting:
    """One engine argument that changes what a GPU holds, and its value when nobody sets it."""

    key: str
    kind: Kind
    default: Any

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")


SETTINGS = (
    Setting("tensor_parallel_size", Kind.COUNT, 1),
    Setting("pipeline_parallel_size", Kind.COUNT, 1),
    Setting("dtype", Kind.WIDTH, "auto"),
    Setting("kv_cache_dtype", Kind.WIDTH, "auto"),
    Setting("quantization", Kind.TEXT, VARIES),  # not given: the checkpoint's own (an AWQ model is AWQ either way)
    Setting("cpu_offload_gb", Kind.NUMBER, 0),
    Setting("enforce_eager", Kind.FLAG, False),
    Setting("enable_lora", Kind.FLAG, False),
    Setting("max_lora_rank", Kind.COUNT, 16),
    Setting("max_loras", Kind.COUNT, 1),
    Setting("speculative_config", Kind.JSON, "none"),
    Setting("speculative_model", Kind.TEXT, "none"),
    Setting("num_speculative_tokens", Kind.COUNT, "none"),
    Setting("num_gpu_blocks_override", Kind.COUNT, "none"),
    Setting("hf_overrides", Kind.JSON, "none"),
    Setting("max_num_seqs", Kind.COUNT, VARIES),
    Setting("max_num_batched_tokens", Kind.COUNT, VARIES),
    Setting("block_size", Kind.COUNT, VARIES),
    Setting("enable_chunked_prefill", Kind.FLAG, VARIES),
)
SETUP_KEYS = tuple(s.key for s in SETTINGS)
TRUE_WORDS = ("", "true", "1", "yes", "on")
WIDTHS = {"auto": 2, "half": 2, "float16": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "float": 4, "float32": 4}
"""Bytes per value; `auto` is 16 bits (vLLM casts float32 checkpoints down unless told otherwise)."""


def _width(value: str, dtype_width: int) -> str:
    text = value.lower()
    if text == "auto":
        return str(dtype_width)
    if text.startswith("fp8") or text in ("int8", "uint8"):
        return "1"
    return str(WIDTHS[text]) if text in WIDTHS else text


def _plain(setting: Setting, value: Any) -> str:
    """A value in the form both sides are compared in."""
    if setting.kind is Kind.FLAG:
        return str(value if isinstance(value, bool) else str(value).strip().lower() in TRUE_WORDS).lower()
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if setting.kind is Kind.COUNT:
        try:
            return str(human_int(setting.key, text, "setting"))
        except BadInput:
            return text.strip()
    if setting.kind is Kind.NUMBER:
        try:
            return "%g" % float(text)
        except ValueError:
            return text.strip()
    if setting.kind is Kind.JSON and isinstance(value, str):
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value.strip()
    return text.strip().lower()


def _server_value(server: Server, setting: Setting) -> Tuple[Optional[Any], str]:
    """The server's value of a setting (None: not given) and what makes it unreadable ("" when readable)."""
    given: Optional[Option] = None
    for option in server.args.options:
        if option.name in (setting.option, "--no-" + setting.option[2:]):
            given = option
    if given is None:
        return None, ""
    words = [given.flag, *given.values]
    unknown = next((w.unknown for w in words if w.unknown), "")
    if given.name.startswith("--no-") and setting.kind is Kind.FLAG:
        return False, unknown
    return (given.value if given.value is not None else ""), unknown


def differences(server: Server, fit_setup: Mapping[str, Any], skip: Tuple[str, ...] = ()) -> List[str]:
    """The settings the server runs with that the fit was not found with, as `--option X here, Y in the fit`
    (a value the file does not hold, such as a $(VAR) from a Secret, is not compared)."""
    server_values, unreadable = {}, set()
    for setting in SETTINGS:
        value, unknown = _server_value(server, setting)
        server_values[setting.key] = value
        if unknown:
            unreadable.add(setting.key)
    sides = {"server": server_values, "fit": {s.key: fit_setup.get(s.key) for s in SETTINGS}}
    found = []
    for setting in SETTINGS:
        one_sided = server_values[setting.key] is None or sides["fit"][setting.key] is None
        if setting.key in skip or setting.key in unreadable or (setting.default is VARIES and one_sided):
            continue
        plain = {side: _compared(setting, values) for side, values in sides.items()}
        if plain["server"] != plain["fit"]:
            found.append("%s %s here, %s in the fit" % (setting.option, _shown(sides["server"][setting.key], setting),
                                                        _shown(sides["fit"][setting.key], setting)))
    return found


def _compared(setting: Setting, values: Mapping[str, Any]) -> str:
    """One side's value of a setting as it is compared (the default where it is not given)."""
    value = values[setting.key]
    value = setting.default if value is None else value
    if setting.kind is not Kind.WIDTH:
        return _plain(setting, value)
    if setting.key != "dtype" and str(value).lower() == "auto":
        return "auto"  # the KV cache in the model's dtype, which --dtype compares
    dtype = _width(str(values["dtype"] if values["dtype"] is not None else "auto"), 2)
    return _width(str(value), int(dtype) if dtype.isdigit() else 2)


def _shown(value: Any, setting: Setting) -> str:
    if value is None:
        return "%s (not set)" % _shown(setting.default, setting)
    if setting.kind is Kind.FLAG:
        return "on" if _plain(setting, value) == "true" else "off"
    return str(value)
