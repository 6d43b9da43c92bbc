"""What every trial of a search shares: the interpreter, the base engine arguments, the environment,
the rules its records are read by, the retry policy and the load format of the exploration."""

from __future__ import annotations

from typing import Any

from ..prepare import Prepared
from ..prepare.request import ObjectiveKind
from ..trial.context import TrialContext
from ..trial.retry import RetryPolicy
from ..trial.run import TrialPlan
from ..trial.runner import trial_environment
from .objective import kv_layouts
from .weights import exploration_load_format


def trial_plan(prepared: Prepared, work_dir: Any) -> TrialPlan:
    """What every trial of this search shares."""
    request = prepared.request
    context = TrialContext(prepared.interpreter.vllm_version, prepared.guess_block_size,
                           plain_attention=prepared.model.plain_attention(prepared.regime.v1),
                           kv_bytes_fixed=request.kv_cache_memory is not None, cpu=prepared.regime.cpu,
                           sliding_window=prepared.model.sliding_window, sequences=request.concurrency,
                           layouts=kv_layouts(prepared), interpreter=prepared.interpreter.python,
                           whole_prompt_admission=prepared.interpreter.whole_prompt_admission  # unless turned off
                           and request.engine_args.get("scheduler_reserve_full_isl", True) not in (False, 0))
    base = {"model": request.model, "tensor_parallel_size": request.tensor_parallel_size, **request.engine_args}
    if request.concurrency > 1:
        base.setdefault("max_num_seqs", request.concurrency)  # what the delivered YAML promises
    sets_kv = request.kv_cache_memory is not None or prepared.objective is ObjectiveKind.LEAST_KV_MEMORY
    return TrialPlan(python=prepared.interpreter.python, base_kwargs=base, timeout_s=request.trial_timeout,
                     env=trial_environment(request.env, sets_kv_size=sets_kv), work_dir=work_dir, context=context,
                     devices=prepared.devices, retry=RetryPolicy(attempts=request.retries + 1,
                                                                 wait_s=request.retry_wait),
                     sequences=request.concurrency, baseline=prepared.devices.snapshot(), via=request.via,
                     explore_load_format=exploration_load_format(prepared))
