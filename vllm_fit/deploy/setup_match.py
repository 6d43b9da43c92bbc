"""Whether a fit was found on the settings a server runs with.

The length a GPU holds depends on more than the memory knob: tensor and pipeline parallelism, the
weights' and the KV cache's dtypes, quantization, CUDA graphs, the batch sizes vLLM profiles with,
speculative decoding, LoRA. Each difference says which side leaves more room: where the server's
leaves less (or may), the fit may not start or serve there and `apply` refuses it; where it leaves
more, the fit holds but is short, and only a lower value is refused. Options whose default changes
with the version, the hardware or the checkpoint are compared only where both sides give them.
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
    """One engine argument that changes what a GPU holds, its value when nobody sets it, and which way:
    `larger` 1 where a larger value (or the flag on) leaves room for more tokens, -1 where it leaves less,
    0 where a difference may go either way."""

    key: str
    kind: Kind
    default: Any
    larger: int = 0

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")


SETTINGS = (
    Setting("tensor_parallel_size", Kind.COUNT, 1, 1),  # weights and KV heads split over more GPUs
    Setting("pipeline_parallel_size", Kind.COUNT, 1, 1),
    Setting("dtype", Kind.WIDTH, "auto", -1),
    Setting("kv_cache_dtype", Kind.WIDTH, "auto", -1),
    Setting("quantization", Kind.TEXT, VARIES),  # not given: the checkpoint's own (an AWQ model is AWQ either way)
    Setting("cpu_offload_gb", Kind.NUMBER, 0, 1),
    Setting("enforce_eager", Kind.FLAG, False, 1),  # no CUDA graphs to capture
    Setting("enable_lora", Kind.FLAG, False, -1),
    Setting("max_lora_rank", Kind.COUNT, 16, -1),
    Setting("max_loras", Kind.COUNT, 1, -1),
    Setting("speculative_config", Kind.JSON, "none"),
    Setting("speculative_model", Kind.TEXT, "none"),
    Setting("num_speculative_tokens", Kind.COUNT, "none"),
    Setting("num_gpu_blocks_override", Kind.COUNT, "none"),
    Setting("hf_overrides", Kind.JSON, "none"),
    Setting("max_num_seqs", Kind.COUNT, VARIES, -1),
    Setting("max_num_batched_tokens", Kind.COUNT, VARIES, -1),
    Setting("block_size", Kind.COUNT, VARIES),
    Setting("enable_chunked_prefill", Kind.FLAG, VARIES, 1),  # off: V0 profiles a whole max-model-len prompt
)
PARALLEL = ("tensor_parallel_size", "pipeline_parallel_size")
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
    for option in server.read_args.options:
        if option.name in (setting.option, "--no-" + setting.option[2:]):
            given = option
    if given is None:
        return None, ""
    words = [given.flag, *given.values]
    unknown = next((w.unknown for w in words if w.unknown), "")
    if given.name.startswith("--no-") and setting.kind is Kind.FLAG:
        return False, unknown
    return (given.value if given.value is not None else ""), unknown


@dataclass(frozen=True)
class Difference:
    """A setting the server runs with another value of than the fit was found with."""

    text: str
    """`--option X here, Y in the fit`."""
    holds_more: bool
    """The server's value leaves room for at least as many tokens: the fit is safe there, only short."""


def differences(server: Server, fit_setup: Mapping[str, Any], skip: Tuple[str, ...] = ()) -> List[Difference]:
    """The settings the server runs with that the fit was not found with (a value the file does not hold,
    such as a $(VAR) from a Secret, is not compared)."""
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
        if plain["server"] == plain["fit"]:
            continue
        if setting.key in PARALLEL:  # each GPU holds about 1/(TP x PP) of the weights and of each token's KV
            order = [_product(sides[side]) for side in ("server", "fit")]
        else:
            order = [_ordered(setting, sides[side]) for side in ("server", "fit")]
        known = setting.larger != 0 and None not in order
        holds_more = known and (order[0] - order[1]) * setting.larger > 0  # type: ignore[operator]
        shown = [_shown(sides[side][setting.key], setting) for side in ("server", "fit")]
        found.append(Difference("%s %s here, %s in the fit" % (setting.option, *shown), holds_more))
    return found


def _compared(setting: Setting, values: Mapping[str, Any]) -> str:
    """One side's value of a setting as it is compared (the default where it is not given)."""
    value = values[setting.key]
    value = setting.default if value is None else value
    if setting.kind is not Kind.WIDTH:
        return _plain(setting, value)
    if setting.key != "dtype" and str(value).lower() == "auto":
        return "auto"  # the KV cache in the model's dtype, which --dtype compares
    return _bytes(setting, values)


def _bytes(setting: Setting, values: Mapping[str, Any]) -> str:
    value = values[setting.key]
    dtype = _width(str(values["dtype"] if values["dtype"] is not None else "auto"), 2)
    return _width(str(setting.default if value is None else value), int(dtype) if dtype.isdigit() else 2)


def _product(values: Mapping[str, Any]) -> Optional[float]:
    """The GPUs one replica runs on (tensor x pipeline parallel size), None where one is not a number."""
    found = [_ordered(setting, values) for setting in SETTINGS if setting.key in PARALLEL]
    return None if None in found else found[0] * found[1]  # type: ignore[operator]


def _ordered(setting: Setting, values: Mapping[str, Any]) -> Optional[float]:
    """One side's value as a number to say which side holds more (None where it is not a number)."""
    value = values[setting.key]
    text = _bytes(setting, values) if setting.kind is Kind.WIDTH else \
        _plain(setting, setting.default if value is None else value)
    if text in ("true", "false"):
        return float(text == "true")
    try:
        return float(text)
    except ValueError:
        return None


def _shown(value: Any, setting: Setting) -> str:
    if value is None:
        return "%s (not set)" % _shown(setting.default, setting)
    if setting.kind is Kind.FLAG:
        return "on" if _plain(setting, value) == "true" else "off"
    return str(value)
