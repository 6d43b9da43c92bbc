"""Everything that can be checked before a launch: the options, the model, the interpreter, devices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ..gpu import Devices
from ..logs.regime import Regime, version_tuple
from ..strategies.base import LengthSpace
from . import checks
from .envcheck import Interpreter, inspect_interpreter
from .modelinfo import ModelInfo
from .request import ObjectiveKind, SearchRequest, Strategy, Via, request_from_options

__all__ = ["Prepared", "SearchRequest", "prepare", "request_from_options"]


@dataclass(frozen=True)
class Prepared:
    """A checked request: the model's facts, the length space, the interpreter, devices, notes."""

    request: SearchRequest
    model: ModelInfo
    space: LengthSpace
    interpreter: Interpreter
    devices: Devices
    regime: Regime
    """The rules of the installed vLLM, as expected before a launch (trials may correct the engine)."""
    notes: List[str]
    utilization_cap: Optional[float] = None
    """The highest utilization searched (None when utilization is not searched)."""
    guess_block_size: int = 16

    @property
    def objective(self) -> ObjectiveKind:
        return self.request.objective

    @property
    def use_autofit(self) -> bool:
        """Start from vLLM's own fit (max_model_len=-1) where it serves what it reports (0.29+). Not
        for serve trials: the file delivered must be the file served, and it pins the length."""
        request = self.request
        return (request.strategy is Strategy.PREDICT and self.regime.autofit_serves and request.via is Via.LLM
                and self.model.derived_max_len is not None and self.space.max_len == self.model.derived_max_len
                and request.objective is not ObjectiveKind.LEAST_UTILIZATION
                and request.objective is not ObjectiveKind.LEAST_KV_MEMORY)


def prepare(request: SearchRequest) -> Prepared:
    """Check everything that can be checked without a launch."""
    notes: List[str] = []
    model = checks.check_model(request.model, request.env)
    checks.check_concurrency(request)
    interpreter = inspect_interpreter(request.python)
    model = model.for_version(version_tuple(interpreter.vllm_version), request.env)
    space = checks.length_space(request, model, notes)
    devices = Devices(request.env, request.tensor_parallel_size)
    checks.check_tensor_parallel(request, model, devices)
    checks.check_devices(request, devices, notes)
    cpu = checks.is_cpu_backend(interpreter) and not devices.preflight.available  # NVML sees a GPU: not CPU
    regime = Regime.of(interpreter.vllm_version, env=request.env, kv_bytes_fixed=request.kv_cache_memory is not None,
                       cpu=cpu)
    checks.check_knob(request, regime, interpreter.vllm_version, notes)
    cap = None
    if request.objective in (ObjectiveKind.HIGHEST_UTILIZATION, ObjectiveKind.LEAST_UTILIZATION):
        cap = checks.utilization_cap(request, devices, regime, notes)
        if not devices.preflight.available:
            notes.append("without NVML the utilization is capped by --max-utilization only; on vLLM's CPU"
                         " backend it is a fraction of the node's RAM, really allocated: prefer --kv-cache-memory")
    return Prepared(request, model, space, interpreter, devices, regime, notes, cap,
                    checks.guess_block_size(request, regime, model))
