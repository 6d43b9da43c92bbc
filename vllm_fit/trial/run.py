"""The one launch path of search and verify: wait for memory, run the probe, sample the peak, retry.

`run_trial` is one attempt of one candidate; `launch` wraps it in everything a trial needs around
it, so that a search's trial and a verification are launched the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..gpu import Devices, DeviceState
from ..logs.phases import Phase
from .context import TrialContext
from .listener import Listener
from .record import TrialRecord, record_from_run
from .retry import RetryPolicy, run_with_retries
from .runner import run_probe
from .serve import run_server
from .via import Via


@dataclass(frozen=True)
class TrialPlan:
    """What every trial of one search (or one verification) shares."""

    python: str
    base_kwargs: Mapping[str, Any]
    """LLM keyword arguments every candidate starts from (model, tensor parallelism, engine args)."""
    timeout_s: float
    env: Mapping[str, str]
    work_dir: Path
    context: TrialContext
    devices: Optional[Devices] = None
    """NVML view of the devices: wait for memory release between trials, sample peaks."""
    retry: RetryPolicy = RetryPolicy()
    sequences: int = 1
    """Concurrent full-length requests each trial must serve."""
    request_timeout_s: Optional[float] = None
    start_timeout_s: Optional[float] = None
    """Kill a start that has not reached the request by then (derived from measured starts, trial/hangs.py)."""
    baseline: List[DeviceState] = field(default_factory=list)
    """Device state before the first trial: what 'released' means."""
    via: Via = Via.LLM
    explore_load_format: Optional[str] = None
    """"dummy": exploring trials skip reading the weights; the fit is then verified with the real ones."""
    served_file: Optional[Path] = None
    """Serve this deployment file as it is (verify) instead of the candidate rendered as YAML."""
    served_argv: Optional[Tuple[str, ...]] = None
    """Serve a deployment's own server arguments (verify of a manifest) instead of a config file."""

    def llm_kwargs(self, engine_args: Mapping[str, Any]) -> Dict[str, Any]:
        """LLM(...) keyword arguments for one candidate's engine arguments."""
        kwargs = dict(self.base_kwargs)
        kwargs.update(engine_args)
        return kwargs


RunTrial = Callable[[TrialPlan, int, Dict[str, Any], Callable[[Phase], None]], TrialRecord]


def run_trial(plan: TrialPlan, index: int, llm_kwargs: Dict[str, Any],
              on_phase: Callable[[Phase], None] = lambda phase: None) -> TrialRecord:
    """One attempt: run the probe (or the server) on these arguments and classify what happened."""
    trial_dir = plan.work_dir / ("trial-%03d" % index)
    if plan.via is Via.SERVE:
        run = run_server(plan.python, llm_kwargs, trial_dir, timeout_s=plan.timeout_s, env=plan.env,
                         request_timeout_s=plan.request_timeout_s, start_timeout_s=plan.start_timeout_s,
                         sequences=plan.sequences, on_phase=on_phase,
                         user_file=plan.served_file, user_argv=plan.served_argv)
    else:
        run = run_probe(plan.python, llm_kwargs, trial_dir, timeout_s=plan.timeout_s, env=plan.env,
                        request_timeout_s=plan.request_timeout_s, start_timeout_s=plan.start_timeout_s,
                        sequences=plan.sequences, on_phase=on_phase)
    return record_from_run(index, llm_kwargs, run, plan.context, min(plan.timeout_s, plan.start_timeout_s
                                                                     or plan.timeout_s))


def launch(plan: TrialPlan, index: int, llm_kwargs: Dict[str, Any], listener: Listener,
           run: RunTrial = run_trial) -> TrialRecord:
    """Launch one candidate with retries; each attempt waits for the devices and samples the peak."""
    listener.trial_started(index, llm_kwargs)

    def attempt() -> TrialRecord:
        devices = plan.devices
        waited: Dict[str, Any] = devices.wait_released(plan.baseline) if devices else {}
        on_phase = lambda phase: listener.phase(index, phase)  # noqa: E731
        if devices is None:
            return run(plan, index, llm_kwargs, on_phase)
        with devices.sampler() as sampler:
            record = run(plan, index, llm_kwargs, on_phase)
        waited["peak_used_bytes"] = sampler.peak_used_bytes
        return dataclasses.replace(record, device=waited)

    record = run_with_retries(attempt, plan.retry)
    listener.trial_finished(record)
    return record
