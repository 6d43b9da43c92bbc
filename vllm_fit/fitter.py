"""`vllm-fit search` as a library call: check the request, run the study, build the report.

Everything that can be refused is refused here, before the first launch.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from . import capacity
from .envcheck import Interpreter, inspect_interpreter
from .errors import BadInput, EnvironmentProblem
from .modelinfo import ModelInfo, looks_local, read_model_info
from .report import build_report, environment
from .runner import trial_environment
from .search.base import LengthSpace
from .search.length import STRATEGIES, Predict
from .search.objectives import LongestAtFixedMemory, Objective
from .study import Listener, StudyResult, TrialPlan, run_study

AUTOFIT_SINCE = (0, 14)
"""vLLM accepts max_model_len=-1 (fit the length to memory itself) from 0.14.0."""
DEFAULT_GRANULARITY = 16
"""The fit is a multiple of this: vLLM's smallest default block size on GPUs."""
DEFAULT_TRIAL_TIMEOUT_S = 1800.0


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
    tensor_parallel_size: int = 1
    engine_args: Dict[str, Any] = field(default_factory=dict)
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    strategy: str = "predict"
    work_dir: Optional[Path] = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Prepared:
    """A checked request: the model's facts, the length space, the interpreter, the notes."""

    request: SearchRequest
    model: ModelInfo
    space: LengthSpace
    interpreter: Interpreter
    use_autofit: bool
    notes: List[str]


def check_model(model: str, env: Mapping[str, str]) -> ModelInfo:
    """The model's facts; EnvironmentProblem when a local path does not exist."""
    if looks_local(model) and not Path(model).expanduser().exists():
        raise EnvironmentProblem("model path %s does not exist; pass a model directory or a hub id"
                                 % model)
    return read_model_info(model, dict(env))


def length_space(request: SearchRequest, model: ModelInfo, notes: List[str]) -> LengthSpace:
    """The candidate lengths: [min, max] from the request, max defaulting to the model's maximum."""
    max_len = request.max_len
    derived = model.derived_max_len
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


def check_tensor_parallel(request: SearchRequest, model: ModelInfo) -> None:
    """vLLM needs the attention heads to split evenly across the tensor-parallel ranks."""
    heads = model.num_attention_heads
    if heads is not None and heads % request.tensor_parallel_size:
        raise BadInput("--tensor-parallel-size %d does not divide the model's %d attention heads;"
                       " use a divisor of %d" % (request.tensor_parallel_size, heads, heads))


def prepare(request: SearchRequest) -> Prepared:
    """Check everything that can be checked without a launch."""
    if request.strategy not in STRATEGIES:
        raise BadInput("--strategy %s is unknown; use one of %s" % (request.strategy, ", ".join(STRATEGIES)))
    notes: List[str] = []
    model = check_model(request.model, request.env)
    space = length_space(request, model, notes)
    check_tensor_parallel(request, model)
    interpreter = inspect_interpreter(request.python)
    version = capacity.version_tuple(interpreter.vllm_version)
    use_autofit = (request.strategy == "predict" and version is not None and version[:2] >= AUTOFIT_SINCE
                   and model.derived_max_len is not None and space.max_len == model.derived_max_len)
    return Prepared(request, model, space, interpreter, use_autofit, notes)


def objective_for(prepared: Prepared) -> Objective:
    """The objective for a search with the memory knob fixed (or left to vLLM's default)."""
    request = prepared.request
    strategy_class = STRATEGIES[request.strategy]
    strategy = (Predict(prepared.space, use_autofit=prepared.use_autofit) if strategy_class is Predict
                else strategy_class(prepared.space))
    return LongestAtFixedMemory(strategy, request.gpu_memory_utilization, request.kv_cache_memory_bytes)


def search_summary(prepared: Prepared) -> Dict[str, Any]:
    """The search's settings, as the report records them."""
    request = prepared.request
    return {
        "model": request.model,
        "strategy": request.strategy,
        "min_len": prepared.space.min_len,
        "max_len": prepared.space.max_len,
        "granularity": prepared.space.granularity,
        "gpu_memory_utilization": request.gpu_memory_utilization,
        "kv_cache_memory_bytes": request.kv_cache_memory_bytes,
        "tensor_parallel_size": request.tensor_parallel_size,
        "engine_args": request.engine_args,
        "trial_timeout_s": request.trial_timeout_s,
        "autofit_first": prepared.use_autofit,
        "model_derived_max_len": prepared.model.derived_max_len,
    }


def run_search(prepared: Prepared, listener: Listener = Listener()) -> "SearchOutcome":
    """Run the trials and build the report."""
    request = prepared.request
    work_dir = request.work_dir or Path(tempfile.mkdtemp(prefix="vllm-fit-"))
    plan = TrialPlan(python=prepared.interpreter.python, model=request.model,
                     tensor_parallel_size=request.tensor_parallel_size, engine_args=request.engine_args,
                     timeout_s=request.trial_timeout_s, env=trial_environment(request.env),
                     work_dir=work_dir, plain_attention=prepared.model.kv_bytes_per_token is not None)
    started = time.monotonic()
    try:
        result = run_study(plan, objective_for(prepared), listener)
    finally:
        if request.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    result.notes[:0] = prepared.notes
    report = build_report(search_summary(prepared), result,
                          environment(prepared.interpreter, result.records), time.monotonic() - started)
    return SearchOutcome(result, report)


@dataclass
class SearchOutcome:
    """The study's result and the report built from it."""

    result: StudyResult
    report: Dict[str, Any]

    @property
    def environment_failed(self) -> bool:
        """True when a trial showed that the interpreter cannot run vLLM at all."""
        return any(r.outcome.value == "environment" for r in self.result.records)
