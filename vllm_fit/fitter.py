"""`vllm-fit search` as a library call: choose the objective, run the study, build the report.

Everything that can be refused is refused in `prepare`, before the first launch; here the prepared
request becomes an objective, a plan and a report, with the cache and journal around it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .advice.diagnosis import diagnose
from .advice.explore import explore
from .files.workdir import run_folder
from .fingerprint import fingerprint, fingerprint_inputs
from .logs.kv_groups import KvLayout, candidate_layouts
from .outcome import Outcome
from .prepare import Prepared
from .prepare.modelinfo import kv_element_bytes
from .prepare.request import OPTIONS, ExploreWeights, ObjectiveKind, Strategy, Via
from .redact import public_args
from .report import build_report, environment
from .search.base import LengthSpace
from .search.highest import LongestAtHighestUtilization
from .search.knob import Grid, KvModel, utilization_grid
from .search.length import Bisect, Doubling, LengthStrategy, Predict
from .search.memory import LeastMemoryForLength
from .search.objectives import LongestAtFixedMemory, Objective
from .store import FitStore
from .study import StopReason, StudyResult, run_study
from .trial.listener import Listener
from .trial.record import TrialContext, TrialRecord
from .trial.retry import RetryPolicy
from .trial.run import RunTrial, TrialPlan, run_trial
from .trial.runner import trial_environment


def kv_model(prepared: Prepared) -> KvModel:
    """What is known about KV cost per device before launching."""
    request, model = prepared.request, prepared.model
    layouts = kv_layouts(prepared)
    per_layer = model.layer_kv_bytes_per_token
    if per_layer and model.num_kv_heads:
        per_layer = per_layer // model.num_kv_heads * max(1, model.num_kv_heads // request.tensor_parallel_size)
    return KvModel(bytes_per_token=model.kv_bytes_per_rank(request.tensor_parallel_size, request.engine_args),
                   total_bytes=prepared.devices.preflight.total_bytes, regime=prepared.regime,
                   guess_block_size=prepared.guess_block_size, sequences=request.concurrency,
                   sliding_window=model.sliding_window, weights_bytes=_weights_per_rank(prepared),
                   plain=model.plain_attention(prepared.regime.v1), layout=layouts[0] if layouts else None,
                   layer_bytes_per_token=per_layer if kv_element_bytes(request.engine_args) == "model" else None,
                   in_flight_guess=_in_flight_guess(prepared))


def kv_layouts(prepared: Prepared) -> Tuple[KvLayout, ...]:
    """The KV cache groups vLLM may give a model that is not plain attention (none for plain models:
    their blocks map to lengths directly)."""
    if prepared.model.plain_attention(prepared.regime.v1):
        return ()
    return candidate_layouts(prepared.model.layer_windows)


def _in_flight_guess(prepared: Prepared) -> Optional[int]:
    """max_num_batched_tokens as vLLM defaults it, where known before a launch: the CPU backend's
    (2048 served, 4096 for LLM; no async scheduling), or the engine argument."""
    given = prepared.request.engine_args.get("max_num_batched_tokens")
    if isinstance(given, int) and not isinstance(given, bool) and given > 0 and prepared.regime.cpu:
        return given
    if prepared.regime.cpu:
        return 2048 if prepared.request.via is Via.SERVE else 4096
    return None


def _weights_per_rank(prepared: Prepared) -> Optional[float]:
    """The weights one device holds (files on disk, else config.json's estimate); None when quantized."""
    model = prepared.model
    if model.quantization or prepared.request.engine_args.get("quantization"):
        return None
    weights = model.estimated_weights_bytes
    return weights / prepared.request.tensor_parallel_size if weights else None


def _kv_grid(prepared: Prepared, model: KvModel) -> Grid:
    """KV sizes in granules, up to the device's free memory (or 4x the predicted need on a CPU)."""
    from .errors import BadInput

    request = prepared.request
    free = prepared.devices.preflight.free_bytes
    need = model.need_bytes(request.target_len or 1, [])
    if free is None and need is None:
        raise BadInput("--search kv-cache-memory needs the model's config.json (or a GPU) to bound the search")
    top = free if free is not None else 4 * (need or 0)
    return Grid("kv_cache_memory_bytes", float(request.kv_granularity), 1, int(top // request.kv_granularity))


def length_strategy(strategy: Strategy, space: LengthSpace, use_autofit: bool,
                    first: Optional[int] = None) -> LengthStrategy:
    """The length strategy the option names."""
    if strategy is Strategy.BISECT:
        return Bisect(space)
    if strategy is Strategy.DOUBLING:
        return Doubling(space)
    return Predict(space, use_autofit=use_autofit, first=first)


def objective_for(prepared: Prepared) -> Objective:
    """The objective the options ask for."""
    request, kind = prepared.request, prepared.objective
    if kind in (ObjectiveKind.LEAST_UTILIZATION, ObjectiveKind.LEAST_KV_MEMORY):
        model = kv_model(prepared)
        grid = (_kv_grid(prepared, model) if kind is ObjectiveKind.LEAST_KV_MEMORY
                else utilization_grid(prepared.utilization_cap or request.max_utilization))
        return LeastMemoryForLength(grid, request.target_len or 0, model)
    # without vLLM's auto-fit, where the longest cannot fit, a first length that starts says more
    prior = request.strategy is Strategy.PREDICT and not prepared.use_autofit
    if kind is ObjectiveKind.HIGHEST_UTILIZATION:
        return LongestAtHighestUtilization(
            utilization_grid(prepared.utilization_cap or request.max_utilization),
            lambda: length_strategy(request.strategy, prepared.space, prepared.use_autofit), kv_model(prepared),
            prior=prior)
    first, space = None, prepared.space
    if request.kv_cache_memory is not None:  # a fixed KV size in known pages: its length is known before a launch
        first = kv_model(prepared).length_for_bytes(request.kv_cache_memory, space.lowest, space.highest,
                                                    space.granularity)
    elif request.gpu_memory_utilization is not None and prior:
        first = kv_model(prepared).prior_length(request.gpu_memory_utilization, space.lowest, space.highest,
                                                space.granularity)
    return LongestAtFixedMemory(length_strategy(request.strategy, prepared.space, prepared.use_autofit, first),
                                request.gpu_memory_utilization, request.kv_cache_memory)


def search_summary(prepared: Prepared) -> Dict[str, Any]:
    """The search's settings as the report records them: every option that applies, then what prepare decided."""
    request, kind = prepared.request, prepared.objective
    summary: Dict[str, Any] = {"objective": kind.value}
    for name, spec in OPTIONS.items():
        if kind in spec.applies and name != "python":
            value = getattr(request, name)
            summary[name] = value.value if hasattr(value, "value") else value
    summary["engine_args"] = public_args(request.engine_args)  # the report is shared: no secret values
    summary.update({"min_len": prepared.space.min_len, "max_len": prepared.space.max_len,
                    "granularity": prepared.space.granularity, "utilization_cap": prepared.utilization_cap,
                    "autofit_first": prepared.use_autofit, "model_derived_max_len": prepared.model.derived_max_len})
    return summary


def trial_plan(prepared: Prepared, work_dir: Any) -> TrialPlan:
    """What every trial of this search shares."""
    request = prepared.request
    context = TrialContext(prepared.interpreter.vllm_version, prepared.guess_block_size,
                           plain_attention=prepared.model.plain_attention(prepared.regime.v1),
                           kv_bytes_fixed=request.kv_cache_memory is not None, cpu=prepared.regime.cpu,
                           sliding_window=prepared.model.sliding_window, sequences=request.concurrency,
                           layouts=kv_layouts(prepared))
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


DUMMY_UNSAFE_ARGS = ("load_format", "quantization")
"""Engine arguments after which dummy weights may not take the memory the real ones take."""
DUMMY_PAYS_BYTES = 4 << 30
"""--explore-weights auto: weights this large take long enough to read that skipping them pays for
the one extra launch that verifies the fit with them."""


def exploration_load_format(prepared: Prepared) -> Optional[str]:
    """"dummy" where dummy weights take the memory the real ones take (a config.json that was read,
    no quantization: bitsandbytes, GGUF and the other quantized formats may size dummy weights
    differently; no explicit load format) and, for auto, where it pays; None otherwise."""
    request, model = prepared.request, prepared.model
    wanted = request.explore_weights
    if wanted is ExploreWeights.REAL or model.config_sha256 is None or model.quantization is not None:
        return None
    if any(key in request.engine_args for key in DUMMY_UNSAFE_ARGS):
        return None
    if wanted is ExploreWeights.AUTO and (model.weights_bytes or 0) < DUMMY_PAYS_BYTES:
        return None
    return "dummy"


def run_search(prepared: Prepared, listener: Optional[Listener] = None, objective: Optional[Objective] = None,
               store: Optional[FitStore] = None, force: bool = False, run: RunTrial = run_trial) -> SearchOutcome:
    """Run the trials and build the report.

    With a store: a search whose fingerprint is cached returns the cached fit with 0 launches
    (unless `force`); otherwise every finished trial goes to the journal at once, and trials a
    killed earlier run finished are taken from it instead of being launched again. The lock is
    taken before the cache is read, so a second run of the same search waits and then reuses it.
    `objective` overrides the one the options ask for (the benchmark's baselines use it).
    """
    listener = listener or Listener()
    inputs = fingerprint_inputs(prepared)
    key = fingerprint(inputs)
    with store.lock(key, listener.note) if store is not None else contextlib.nullcontext():
        cached = store.cached(key, listener.note) if store is not None and not force else None
        if cached is not None:
            outcome = SearchOutcome.from_cache(cached, key)
        else:
            outcome = _run_search(prepared, listener, objective, store, force, inputs, key, run)
    if prepared.request.explore and not outcome.interrupted:
        if outcome.report.get("diagnosis") is None:
            listener.note("explore: nothing to explore (%s)" % (
                "the fit reaches the maximum length" if outcome.report.get("fit") else "no diagnosis"))
        else:  # each alternative is a search of its own, with its own fingerprint in the cache
            outcome.report["explore"] = explore(
                prepared, outcome.report, lambda other: run_search(other, listener, None, store, force, run).report,
                listener.note)
    return outcome


def _run_search(prepared: Prepared, listener: Listener, objective: Optional[Objective], store: Optional[FitStore],
                force: bool, inputs: Dict[str, Any], key: str, run: RunTrial) -> SearchOutcome:
    """run_search once the cache missed (and, with a store, holding the fingerprint's lock)."""
    request = prepared.request
    journal = store.journal(key) if store is not None else None
    if journal is not None and force:
        journal.remove()
    earlier = journal.load(request.trial_timeout, listener.note) if journal is not None else []
    if earlier and journal is not None:
        listener.note("resuming: %d finished trial(s) taken from the journal %s" % (len(earlier), journal.path))
    objective = objective or objective_for(prepared)
    started = time.monotonic()
    with run_folder(request.work_dir) as work_dir:
        plan = trial_plan(prepared, work_dir)
        result = run_study(plan, objective, listener, records=earlier, run=run,
                           on_record=journal.append if journal is not None else lambda record: None)
    result = dataclasses.replace(result, notes=list(prepared.notes) + result.notes)
    extra = {"preflight": prepared.devices.preflight.as_dict(), "fingerprint": key}
    report = build_report(search_summary(prepared), result,
                          environment(prepared.interpreter, result.records, extra), time.monotonic() - started)
    diagnosis = diagnose(report, prepared.model, request.tensor_parallel_size, prepared.utilization_cap,
                         prepared.devices.preflight.total_bytes)
    if diagnosis is not None:
        report["diagnosis"] = diagnosis
        for line in diagnosis["lines"]:
            listener.note(line)
    report["fingerprint_inputs"] = inputs
    report["cache"] = {"hit": False, "resumed_trials": len(earlier)}
    if store is not None and journal is not None and result.complete:
        if result.fit is not None:
            store.store(key, report)
        journal.remove()
    return SearchOutcome(result, report)


@dataclass(frozen=True)
class SearchOutcome:
    """The study's result and the report built from it."""

    result: StudyResult
    report: Dict[str, Any]

    @classmethod
    def from_cache(cls, cached: Dict[str, Any], key: str) -> SearchOutcome:
        """A cached search, as if it had just run, but with 0 launches and saying so."""
        records = [TrialRecord.from_json(trial) for trial in cached["trials"]]
        fit_index = cached["fit"]["trial"]
        fit = next(record for record in records if record.index == fit_index)
        note = "cached fit from %s (fingerprint %s); --force searches again" % (cached["created"], key[:12])
        result = StudyResult(records, fit, StopReason(cached["stop"]), cached["stop_reason"], launches=0,
                             notes=[note])
        report = dict(cached, launches=0, wall_time_s=0.0,
                      cache={"hit": True, "fingerprint": key, "created": cached["created"],
                             "launches_then": cached["launches"]})
        return cls(result, report)

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or SIGTERM stopped the search; the report holds the trials that finished."""
        return self.result.stop is StopReason.INTERRUPTED

    @property
    def cached(self) -> bool:
        return bool(self.report.get("cache", {}).get("hit"))

    @property
    def environment_failed(self) -> bool:
        """True when a trial showed that the environment, not the config, is the problem (a fixed
        memory setting that the device's free memory cannot hold is a proof that nothing fits)."""
        last = self.result.records[-1] if self.result.records else None
        return last is not None and self.result.fit is None and self.result.stop is StopReason.STOPPING_OUTCOME \
            and last.outcome in (Outcome.ENVIRONMENT, Outcome.FREE_MEMORY_SHORT)
