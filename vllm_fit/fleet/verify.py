"""`vllm-fit verify`: launch a committed config once, serve the full-length request, compare capacity.

The cheap nightly check after a vLLM, driver or hardware change: one launch per config, through the
same launch path as a search (wait for memory, sample the peak, retry transient failures). It fails
when the config no longer starts or serves, or when the KV capacity fell by more than the tolerance
below what was recorded when the config was fitted (its `# kv-cache-tokens:` line).
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..errors import BadInput
from ..export.junit import Verdict
from ..export.yaml_config import comment_int, read_comment_facts, read_config
from ..files.workdir import run_folder
from ..gpu import Devices
from ..logs.regime import Regime, version_tuple
from ..outcome import Outcome
from ..prepare.checks import LONG_LEN_ENV, check_model
from ..prepare.envcheck import Interpreter
from ..prepare.request import Via
from ..trial.listener import Listener
from ..trial.record import TrialContext
from ..trial.retry import RetryPolicy
from ..trial.run import TrialPlan, launch
from ..trial.runner import trial_environment
from ..trial.serve import BIND_OVERRIDES

DEFAULT_TOLERANCE = 0.05
"""Capacity may fall by up to 5% (vLLM versions count tokens slightly differently) before failing."""
SERVER_ONLY = frozenset({"host", "port", "api_key", "served_model_name", "uvicorn_log_level", "ssl_keyfile",
                         "ssl_certfile", "allowed_origins", "root_path", "middleware", "chat_template",
                         "response_role", "disable_log_requests", "enable_log_requests", "config"})
"""`vllm serve` keys that are not engine arguments: a deployment config carries them; LLM(...) refuses them."""


class VerifyStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"

    @property
    def verdict(self) -> Verdict:
        return Verdict.PASSED if self is VerifyStatus.OK else Verdict.FAILED


def recorded_capacity(path: Path) -> Optional[int]:
    """The KV capacity in tokens recorded when the config was fitted, if it was."""
    return comment_int(read_comment_facts(path), "kv-cache-tokens")


def engine_kwargs(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The LLM(...) arguments of a serve config (server-only keys left out)."""
    return {key: value for key, value in config.items() if key not in SERVER_ONLY}


def verify_config(path: Path, plan: TrialPlan, tolerance: float, listener: Listener, index: int) -> Dict[str, Any]:
    """One launch of the config; the verdict with its evidence. Served, the file is used as it is
    (serve-only keys included), with host and port replaced for the trial and reported."""
    config = read_config(path)
    before = recorded_capacity(path)
    overrides = {}
    if plan.via is Via.SERVE:
        plan = dataclasses.replace(plan, served_file=path)
        overrides = {key: config[key] for key in BIND_OVERRIDES if config.get(key) is not None}
        record = launch(plan, index, config, listener)
    else:
        record = launch(plan, index, engine_kwargs(config), listener)
    now = record.facts.kv_cache_tokens
    if record.outcome is not Outcome.OK:
        status = VerifyStatus.FAILED
        message = "no longer starts and serves: %s: %s" % (record.outcome.value, record.detail)
    elif before and now is not None and now < before * (1 - tolerance):
        status = VerifyStatus.FAILED
        message = "KV capacity dropped from %d to %d tokens (%.1f%%, tolerance %.0f%%)" % (
            before, now, 100.0 * (now - before) / before, 100 * tolerance)
    else:
        status = VerifyStatus.OK
        message = "starts and serves %s tokens; KV capacity %s tokens (recorded %s)" % (
            (record.request or {}).get("total_tokens"), now, before)
    if overrides:
        message += "; for the test, %s set to the loopback and a free port" % " and ".join(sorted(overrides))
    return {"config": str(path), "status": status.value, "message": message, "recorded_kv_cache_tokens": before,
            "via": plan.via.value, "overridden": overrides,
            "kv_cache_tokens": now, "duration_s": record.duration_s, "trial": record.to_json()}


def verify_all(paths: List[Path], interpreter: Interpreter, env: Mapping[str, str], timeout_s: float,
               tolerance: float, listener: Listener, via: Via = Via.SERVE) -> List[Dict[str, Any]]:
    """Verify configs one after the other, through the search's launch path."""
    configs = [read_config(p) for p in paths]  # every file is checked before the first launch
    for path, config in zip(paths, configs):
        model = check_model(str(config["model"]), env)
        derived = model.for_version(version_tuple(interpreter.vllm_version)).derived_max_len
        if derived is not None and config["max_model_len"] > derived and env.get(LONG_LEN_ENV) not in ("1", "true"):
            raise BadInput("%s: max-model-len %d is over the model's maximum %d (from %s); vLLM refuses it"
                           % (path, config["max_model_len"], derived, model.max_len_source))
    tp = max(int(c.get("tensor_parallel_size") or 1) for c in configs)
    devices = Devices(env, tp)
    regime = Regime.of(interpreter.vllm_version, env=env)
    context = TrialContext(interpreter.vllm_version, regime.default_block_size())
    with run_folder() as work_dir:
        plan = TrialPlan(python=interpreter.python, base_kwargs={}, timeout_s=timeout_s,
                         env=trial_environment(env, sets_kv_size=False), work_dir=work_dir, context=context,
                         devices=devices, retry=RetryPolicy(), baseline=devices.snapshot(), via=via)
        return [verify_config(path, plan, tolerance, listener, i) for i, path in enumerate(paths, start=1)]
