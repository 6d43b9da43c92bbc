"""`vllm-fit verify`: launch a committed config once, serve the full-length request, compare capacity.

The cheap nightly check after a vLLM, driver or hardware change: one launch per config, through the
same launch path as a search (wait for memory, sample the peak, retry transient failures). It fails
when the config no longer starts or serves, or when the KV capacity fell by more than the tolerance
below what was recorded when the config was fitted (its `# kv-cache-tokens:` line).

A deployment file (a Kubernetes manifest, production-stack values, a compose file) is verified by
launching what each of its servers runs: its effective vLLM options as its runtime gives them
(deploy/servers.py), with the model mapped to a local folder (`--map-path`) and the host and port
replaced. That proves the manifest itself, not a copy of its numbers.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from ..errors import BadInput
from ..export.junit import Verdict
from ..export.yaml_config import comment_int, read_comment_facts, read_config
from ..files.reading import read_input_text
from ..files.workdir import run_folder
from ..gpu import Devices
from ..logs.regime import Regime, version_tuple
from ..outcome import Outcome
from ..prepare.checks import LONG_LEN_ENV, check_model
from ..prepare.envcheck import Interpreter
from ..prepare.request import Via
from ..trial.context import TrialContext
from ..trial.listener import Listener
from ..trial.retry import RetryPolicy
from ..trial.run import TrialPlan, launch
from ..trial.runner import trial_environment
from ..trial.serve import BIND_OVERRIDES

if TYPE_CHECKING:
    from ..deploy.launch import Launch  # ruamel.yaml is imported only when a deployment is verified

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


def verify_launch(target: Launch, plan: TrialPlan, listener: Listener, index: int) -> Dict[str, Any]:
    """One launch of a deployment's server, as its runtime runs it (host and port replaced)."""
    kwargs: Dict[str, Any] = {"model": target.model, "max_model_len": target.max_model_len or 0,
                              "served_model_name": target.served_name}
    if target.api_key:
        kwargs["api_key"] = target.api_key  # passed through the environment, never written
    record = launch(dataclasses.replace(plan, served_argv=target.args), index, kwargs, listener)
    status = VerifyStatus.OK if record.outcome is Outcome.OK else VerifyStatus.FAILED
    message = ("starts and serves %s tokens; KV capacity %s tokens" % (
        (record.request or {}).get("total_tokens"), record.facts.kv_cache_tokens) if status is VerifyStatus.OK
        else "does not start and serve: %s: %s" % (record.outcome.value, record.detail))
    message += "; for the test, the host and port set to the loopback and a free port"
    if target.notes:
        message += "; " + "; ".join(target.notes)
    return {"config": target.name, "status": status.value, "message": message, "recorded_kv_cache_tokens": None,
            "via": Via.SERVE.value, "overridden": {"host": "127.0.0.1", "port": "free"},
            "kv_cache_tokens": record.facts.kv_cache_tokens, "duration_s": record.duration_s, "trial": record.to_json()}


Target = Union[Path, "Launch"]
"""A committed config file, or one server of a deployment file."""


def targets_of(paths: List[Path], maps: Mapping[str, str]) -> List[Target]:
    """What each file asks to verify: a --config YAML itself, or every server of a deployment file (all of
    them read and checked here, before the first launch)."""
    from ..deploy.config_file import looks_like_config
    from ..deploy.deployment import read_deployment
    from ..deploy.launch import server_launch

    found: List[Target] = []
    for path in paths:
        deployment = read_deployment(read_input_text(path, "file to verify"), str(path), path)
        if len(deployment.doc.docs) == 1 and looks_like_config(deployment.doc.docs[0], with_model=False):
            read_config(path)  # refuse a broken config before launching anything
            found.append(path)
            continue
        servers = [s for s in deployment.servers if not s.template]
        if not servers:
            raise BadInput("%s holds no vLLM server vllm-fit reads (Kubernetes containers, compose services,"
                           " production-stack values, KServe InferenceServices) and is not a --config YAML" % path)
        found += [server_launch(s, dict(maps), "%s, %s" % (path, s.where)) for s in servers]
    return found


def verify_all(paths: List[Path], interpreter: Interpreter, env: Mapping[str, str], timeout_s: float,
               tolerance: float, listener: Listener, via: Via = Via.SERVE,
               maps: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
    """Verify configs and deployments' servers one after the other, through the search's launch path."""
    targets = targets_of(paths, maps or {})  # every file is checked before the first launch
    configs = {t: read_config(t) for t in targets if isinstance(t, Path)}
    launches = [t for t in targets if not isinstance(t, Path)]
    if launches and via is not Via.SERVE:
        raise BadInput("%s is a deployment: it is verified by running its server; --via llm applies to --config"
                       " files only" % launches[0].name)
    for path, config in configs.items():
        _check_length(path, config, interpreter, env)
    for target in launches:
        check_model(target.model, env)
    tp = max([int(c.get("tensor_parallel_size") or 1) for c in configs.values()] + [t.devices for t in launches])
    devices = Devices(env, tp)
    visible = devices.preflight.visible_count
    for target in launches:
        if visible is not None and target.devices > visible:
            raise BadInput("%s needs %d devices (tensor x pipeline parallel), but %d are visible here; verify it on"
                           " a machine with that many" % (target.name, target.devices, visible))
    regime = Regime.of(interpreter.vllm_version, env=env)
    context = TrialContext(interpreter.vllm_version, regime.default_block_size())
    with run_folder() as work_dir:
        plan = TrialPlan(python=interpreter.python, base_kwargs={}, timeout_s=timeout_s,
                         env=trial_environment(env, sets_kv_size=False), work_dir=work_dir, context=context,
                         devices=devices, retry=RetryPolicy(), baseline=devices.snapshot(), via=via)
        return [verify_config(t, plan, tolerance, listener, i) if isinstance(t, Path) else
                verify_launch(t, plan, listener, i) for i, t in enumerate(targets, start=1)]


def _check_length(path: Path, config: Mapping[str, Any], interpreter: Interpreter, env: Mapping[str, str]) -> None:
    model = check_model(str(config["model"]), env)
    derived = model.for_version(version_tuple(interpreter.vllm_version)).derived_max_len
    if derived is not None and config["max_model_len"] > derived and env.get(LONG_LEN_ENV) not in ("1", "true"):
        raise BadInput("%s: max-model-len %d is over the model's maximum %d (from %s); vLLM refuses it"
                       % (path, config["max_model_len"], derived, model.max_len_source))
