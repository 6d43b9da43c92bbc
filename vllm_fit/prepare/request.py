"""The search options, declared once: each SearchRequest field carries its flag, parser, help,
whether it changes the answer (the fingerprint), and which objectives it applies to.

The click options, the fleet file's keys and validation, the fingerprint inputs and the report's
search summary are all derived from this table; adding an option is one field here plus the code
that uses it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set

from ..errors import BadInput
from ..trial.via import VIA_ENV, Via
from . import inputs


class ObjectiveKind(str, Enum):
    """What a search optimises; decided once, from the options, by `objective_kind`."""

    FIXED_MEMORY = "longest-at-fixed-memory"
    HIGHEST_UTILIZATION = "longest-at-highest-utilization"
    LEAST_UTILIZATION = "least-utilization"
    LEAST_KV_MEMORY = "least-kv-cache-memory"


class Knob(str, Enum):
    """The memory knob a --target-len search moves."""

    UTILIZATION = "utilization"
    KV_CACHE_MEMORY = "kv-cache-memory"


class Strategy(str, Enum):
    """How lengths are searched at one memory level: predict, or the baselines it is measured against."""

    PREDICT = "predict"
    BISECT = "bisect"
    DOUBLING = "doubling"


class ExploreWeights(str, Enum):
    """Which weights exploring trials load; the fit is always verified with the real ones."""

    AUTO = "auto"
    DUMMY = "dummy"
    REAL = "real"


ALL = frozenset(ObjectiveKind)
LONGEST = frozenset({ObjectiveKind.FIXED_MEMORY, ObjectiveKind.HIGHEST_UTILIZATION})
LEAST = frozenset({ObjectiveKind.LEAST_UTILIZATION, ObjectiveKind.LEAST_KV_MEMORY})
UTILIZATION_SEARCHES = frozenset({ObjectiveKind.HIGHEST_UTILIZATION, ObjectiveKind.LEAST_UTILIZATION})

Parser = Callable[[str, Any], Any]
"""The default of --via where neither the command line nor the fleet file sets it (e.g. `llm` on a CI
runner whose deployments call LLM(...))."""


@dataclass(frozen=True)
class Option:
    """One search option: `key` is the fleet key (snake_case), the flag is its dash-case form."""

    key: str
    parse: Parser
    help: str
    fingerprint: bool
    applies: FrozenSet[ObjectiveKind] = ALL
    metavar: str = "VALUE"
    default_text: Optional[str] = None
    """The default as shown in --help (None: no default, or computed)."""
    multiple: bool = False
    is_flag: bool = False
    choices: Optional[List[str]] = None
    cli_flag: Optional[str] = None
    """The command-line flag when it is not the key in dash-case (--engine-arg for engine_args)."""

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.key.replace("_", "-")


def option(key: str, parse: Parser, help: str, *, fingerprint: bool, default: Any = None,
           applies: FrozenSet[ObjectiveKind] = ALL, **extra: Any) -> Any:
    """A dataclass field of SearchRequest that is also a user-facing option."""
    meta = Option(key, parse, help, fingerprint, applies, **extra)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata={"option": meta})
    return field(default=default, metadata={"option": meta})


def internal(default: Any = None, *, fingerprint: bool, factory: Optional[Callable[[], Any]] = None) -> Any:
    """A SearchRequest field that is not an option (set by the program), classified for the fingerprint."""
    meta = {"fingerprint": fingerprint}
    return field(default_factory=factory, metadata=meta) if factory else field(default=default, metadata=meta)


DEFAULT_GRANULARITY = 16
DEFAULT_MAX_UTILIZATION = 0.95
DEFAULT_KV_GRANULARITY = 1 << 20
DEFAULT_TRIAL_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class SearchRequest:
    """Everything one search needs, parsed and checked; built by `request_from_options`."""

    model: str = option("model", inputs.model_name, "Model directory or hub id, as vLLM takes it.",
                        fingerprint=True, default="", metavar="PATH|ID")
    max_len: Optional[int] = option(
        "max_len", inputs.positive_int, "Upper bound for max_model_len. Default: the model's maximum from its"
        " config.json.", fingerprint=True, applies=LONGEST, metavar="N")
    min_len: Optional[int] = option(
        "min_len", inputs.positive_int, "Lower bound for max_model_len (the shortest length worth serving)."
        " Default: the granularity.", fingerprint=True, applies=LONGEST, metavar="N")
    granularity: int = option(
        "granularity", inputs.positive_int, "The fit is a multiple of N (16: vLLM's smallest GPU block size).",
        fingerprint=True, default=DEFAULT_GRANULARITY, applies=LONGEST, metavar="N",
        default_text=str(DEFAULT_GRANULARITY))
    gpu_memory_utilization: Optional[float] = option(
        "gpu_memory_utilization", inputs.utilization, "Fix the fraction (0, 1] of total device memory vLLM"
        " may take.", fingerprint=True, applies=frozenset({ObjectiveKind.FIXED_MEMORY}), metavar="U")
    kv_cache_memory: Optional[int] = option(
        "kv_cache_memory", inputs.size, "Fix the KV cache size instead (kv_cache_memory_bytes, vLLM 0.10.2+):"
        " 2621440, 64MiB, 2GiB ...", fingerprint=True, applies=frozenset({ObjectiveKind.FIXED_MEMORY}),
        metavar="SIZE")
    max_utilization: float = option(
        "max_utilization", inputs.utilization_cap, "When utilization is searched: the highest value tried (the cap;"
        " above ~0.95 requests run out of memory mid-flight).", fingerprint=True,
        default=DEFAULT_MAX_UTILIZATION, applies=UTILIZATION_SEARCHES, metavar="U",
        default_text=str(DEFAULT_MAX_UTILIZATION))
    target_len: Optional[int] = option(
        "target_len", inputs.positive_int, "Instead of the longest length: the least memory that serves N"
        " tokens (to pack several models on one GPU).", fingerprint=True, applies=LEAST, metavar="N")
    search: Knob = option(
        "search", inputs.choice(Knob), "With --target-len: search gpu_memory_utilization (0.01 steps) or"
        " kv_cache_memory_bytes.", fingerprint=True, default=Knob.UTILIZATION, applies=LEAST,
        metavar="KNOB", choices=[k.value for k in Knob], default_text=Knob.UTILIZATION.value)
    kv_granularity: int = option(
        "kv_granularity", inputs.size, "With --search kv-cache-memory: the size found is a multiple of SIZE.",
        fingerprint=True, default=DEFAULT_KV_GRANULARITY, applies=frozenset({ObjectiveKind.LEAST_KV_MEMORY}),
        metavar="SIZE", default_text="1MiB")
    strategy: Strategy = option(
        "strategy", inputs.choice(Strategy), "predict: jump to what vLLM prints; bisect and doubling: the"
        " baselines.", fingerprint=True, default=Strategy.PREDICT, applies=LONGEST, metavar="NAME",
        choices=[s.value for s in Strategy], default_text=Strategy.PREDICT.value)
    concurrency: int = option(
        "concurrency", inputs.concurrency, "N full-length sequences must run at once (counted in vLLM's"
        " blocks, null block included, and proven by N concurrent requests); the YAML sets max-num-seqs: N.",
        fingerprint=True, default=1, metavar="N", default_text="1")
    via: Via = option(
        "via", inputs.choice(Via), "serve: every trial runs vLLM's OpenAI server on the YAML it would deliver"
        " and proves it over HTTP (the engine `vllm serve --config` starts); llm: vllm.LLM(...) in one process,"
        " for LLM(**config) users (other batch defaults, so another answer).", fingerprint=True,
        default=Via.SERVE, metavar="HOW", choices=[v.value for v in Via], default_text=Via.SERVE.value)
    tensor_parallel_size: int = option(
        "tensor_parallel_size", inputs.positive_int, "Passed to vLLM; must divide the model's attention heads"
        " and not exceed the visible devices.", fingerprint=True, default=1, metavar="N", default_text="1")
    engine_args: Dict[str, Any] = option(
        "engine_args", inputs.engine_args, "Extra LLM(...) / vllm serve argument, repeatable: KEY=VALUE, VALUE"
        " as JSON when it parses (true, 8, {\"a\": 1}) or true/false/none in any case.", fingerprint=True, default={},
        metavar="KEY=VALUE", multiple=True, cli_flag="--engine-arg")
    python: str = option("python", inputs.interpreter, "Interpreter of the vLLM environment. Default: the one"
                         " running vllm-fit.", fingerprint=False, default="", metavar="PATH")
    trial_timeout: float = option(
        "trial_timeout", inputs.seconds, "Kill a trial that has not finished after this many seconds.",
        fingerprint=False, default=DEFAULT_TRIAL_TIMEOUT_S, metavar="SECONDS",
        default_text=str(int(DEFAULT_TRIAL_TIMEOUT_S)))
    retries: int = option("retries", inputs.non_negative_int, "Relaunches of a transiently failed trial (free"
                          " memory short, NCCL hiccup).", fingerprint=False, default=2, metavar="N",
                          default_text="2")
    retry_wait: float = option("retry_wait", inputs.backoff, "Backoff before the first relaunch; it doubles"
                               " after each.", fingerprint=False, default=5.0, metavar="SECONDS",
                               default_text="5")
    explore_weights: ExploreWeights = option(
        "explore_weights", inputs.choice(ExploreWeights), "dummy: trials load dummy weights (load_format=dummy:"
        " the same memory, no disk read) and the fit is verified once with the real ones; real: every trial"
        " reads them; auto: dummy when the weights on disk are 4 GiB or more. Never dummy for quantized models"
        " or with an explicit load_format or quantization.", fingerprint=False, default=ExploreWeights.AUTO,
        metavar="WHICH", choices=[w.value for w in ExploreWeights], default_text=ExploreWeights.AUTO.value)
    explore: bool = option(
        "explore", inputs.flag, "When nothing fits or the fit is shorter than the maximum: also search an fp8"
        " KV cache and tensor parallelism 2x/4x (where enough devices are visible), each verified by a real"
        " request, and show them beside the fit (the YAML stays the fit's); not where a hang or a request"
        " failure, not the KV cache, stops the length.", fingerprint=False, default=False,
        is_flag=True)
    require_idle: bool = option("require_idle", inputs.flag, "Refuse to start (exit 3) when other processes"
                                " hold memory on the device.", fingerprint=False, default=False, is_flag=True)
    work_dir: Optional[Path] = internal(fingerprint=False)
    """Keep each trial's files here (--work-dir); None: a private temporary folder."""
    env: Mapping[str, str] = internal(fingerprint=False, factory=dict)
    """The environment trials inherit; its memory-relevant variables enter the fingerprint separately."""

    @property
    def objective(self) -> ObjectiveKind:
        return objective_kind(self.target_len, self.search, self.gpu_memory_utilization, self.kv_cache_memory)

    @property
    def memory_fixed(self) -> bool:
        return self.gpu_memory_utilization is not None or self.kv_cache_memory is not None


def objective_kind(target_len: Optional[int], knob: Knob, utilization: Optional[float],
                   kv_bytes: Optional[int]) -> ObjectiveKind:
    """The one place that decides the objective from the options."""
    if target_len is not None:
        return ObjectiveKind.LEAST_KV_MEMORY if knob is Knob.KV_CACHE_MEMORY else ObjectiveKind.LEAST_UTILIZATION
    if utilization is not None or kv_bytes is not None:
        return ObjectiveKind.FIXED_MEMORY
    return ObjectiveKind.HIGHEST_UTILIZATION


OPTIONS: Dict[str, Option] = {f.name: f.metadata["option"] for f in dataclasses.fields(SearchRequest)
                              if "option" in f.metadata}
"""Field name -> option, in declaration order (the order of --help)."""
BY_KEY: Dict[str, str] = {opt.key: name for name, opt in OPTIONS.items()}
"""Option key (fleet key, snake_case flag) -> field name."""


def fingerprinted_fields() -> Set[str]:
    """The request fields that change the answer."""
    return {f.name for f in dataclasses.fields(SearchRequest)
            if (f.metadata["option"].fingerprint if "option" in f.metadata else f.metadata["fingerprint"])}


def applied_options(request: SearchRequest, kind: ObjectiveKind, names: Iterable[str]) -> Dict[str, Any]:
    """The named options that apply to the objective, enums as their values (report settings, fingerprint)."""
    values = {name: getattr(request, name) for name in names if name in OPTIONS and kind in OPTIONS[name].applies}
    return {name: value.value if isinstance(value, Enum) else value for name, value in values.items()}


def _objective_of(values: Mapping[str, Any]) -> ObjectiveKind:
    return objective_kind(values.get("target_len"), values.get("search") or Knob.UTILIZATION,
                          values.get("gpu_memory_utilization"), values.get("kv_cache_memory"))


def request_from_options(options: Mapping[str, Any], env: Mapping[str, str], default_python: str,
                         where: str = "", inherited: Optional[Mapping[str, Any]] = None) -> SearchRequest:
    """A checked SearchRequest from option values keyed by option key: strings from the CLI, typed
    values from a fleet file. `inherited` holds fleet defaults: they apply only where they make sense.

    Every value goes through the option's parser; contradictions and options that do not apply to
    the chosen objective are refused (BadInput naming `where`, the option and the fix).
    """
    prefix = where + ": " if where else ""
    given = {key: value for key, value in options.items() if value is not None and value != () and value != []}
    defaults = {key: value for key, value in (inherited or {}).items() if key not in given and value is not None}
    if "via" not in given and "via" not in defaults and env.get(VIA_ENV):
        try:
            defaults["via"] = OPTIONS["via"].parse(VIA_ENV, env[VIA_ENV])
        except BadInput as exc:
            raise BadInput("%s (the environment sets it)" % exc) from None
    values: Dict[str, Any] = {}
    for key, raw in list(defaults.items()) + list(given.items()):
        name = BY_KEY.get(key)
        if name is None:
            raise BadInput("%sunknown option %r" % (prefix, key))
        spec = OPTIONS[name]
        try:
            values[name] = spec.parse(spec.key if where else spec.flag, raw)
        except BadInput as exc:
            raise BadInput(prefix + str(exc)) from None
    if not values.get("model"):
        raise BadInput("%s--model is required; pass a model directory or a hub id" % prefix)
    if values.get("gpu_memory_utilization") is not None and values.get("kv_cache_memory") is not None:
        if "gpu_memory_utilization" in given and "kv_cache_memory" in given:
            raise BadInput("%s--gpu-memory-utilization and --kv-cache-memory both fix the KV cache size;"
                           " pass only one of them" % prefix)
        values.pop("kv_cache_memory" if "kv_cache_memory" in defaults else "gpu_memory_utilization")
    if values.get("target_len") is not None:
        for name in ("gpu_memory_utilization", "kv_cache_memory"):
            if name in values and OPTIONS[name].key not in given:
                values.pop(name)  # a fleet default that a --target-len entry overrides
    kind = _objective_of(values)
    for name in list(values):
        spec = OPTIONS[name]
        if kind in spec.applies:
            continue
        if spec.key in given:
            raise BadInput("%s%s does not apply to a %s search; %s" % (prefix, spec.flag, kind.value,
                                                                      _applies_fix(spec, kind)))
        values.pop(name)
    inputs.length_range(values.get("min_len"), values.get("max_len"))
    values.setdefault("python", default_python)
    return SearchRequest(env=dict(env), **values)


def _applies_fix(spec: Option, kind: ObjectiveKind) -> str:
    """How to make an option that does not apply do something (or drop it)."""
    if spec.key in ("search", "kv_granularity") or (kind in LONGEST and spec.applies <= LEAST):
        return "add --target-len N, or drop it"
    if kind in LEAST and spec.applies <= LONGEST:
        return "--target-len fixes max_model_len and searches memory; drop it"
    if spec.key == "max_utilization":
        return "it caps a utilization search; drop it (the memory knob is fixed)"
    return "drop it"
