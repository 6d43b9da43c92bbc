"""A serve trial: vLLM's OpenAI server on the candidate's config file, proven over HTTP (httpx).

The probe runs the server (`python -m vllm.entrypoints.openai.api_server --config FILE --host
127.0.0.1 --port P`) in the trial's own session; this module's driver waits for `/health` while
watching the process, reads the KV facts from `/metrics`, checks the served `max_model_len` on
`/v1/models`, sends the full-length requests to `/v1/completions` (token ids, `ignore_eos`, a
client timeout) and returns what it saw in the probe's result shape, so trials are classified the
same way whichever path ran them. The runner then stops the server (SIGTERM, then the group).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

import httpx

from ..export.yaml_config import config_flags, render_config
from ..files.reading import read_input_bytes
from ..logs import metrics, patterns
from ..logs.phases import Phase
from ..probe import STATUS_REQUEST_FAILED
from ..redact import is_secret_arg, secret_values
from .http_requests import ServedConfig, send_requests, verdict
from .runner import Driver, ProcessRun, Session, run_probe

HOST = "127.0.0.1"
"""Trials bind the loopback only, whatever the config says (reported as an override)."""
HEALTH_POLL_S = 0.5
FAILURE_GRACE_S = 10.0
"""After a fatal line in the server's log, how long it may take to exit by itself."""
BIND_OVERRIDES = ("host", "port")
"""Serve keys that must not bind on the test host: replaced for the trial and reported."""


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now (the OS picks it, so two searches differ)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def served_config(llm_kwargs: Mapping[str, Any], trial_dir: Path, port: int,
                  user_file: Optional[Path] = None) -> ServedConfig:
    """The candidate written as the YAML that would be delivered (comments aside), or the user's own
    deployment file as it is (verify); host and port are set on the command line for the trial."""
    if user_file is not None:
        path, text = user_file, read_input_bytes(user_file, "config").decode("utf-8", errors="replace")
    else:
        text = render_config(llm_kwargs, [])
        path = trial_dir / "served.yaml"
        path.write_text(text, encoding="utf-8")
    names = llm_kwargs.get("served_model_name")
    model_name = names[0] if isinstance(names, list) and names else names or llm_kwargs["model"]
    overrides = {key: [llm_kwargs[key], HOST if key == "host" else port]
                 for key in BIND_OVERRIDES if llm_kwargs.get(key) is not None}
    api_key = llm_kwargs.get("api_key")
    return ServedConfig(path, text, str(model_name), str(api_key) if api_key else None, overrides)


def run_server(python: str, llm_kwargs: Mapping[str, Any], trial_dir: Path, *, timeout_s: float,
               env: Mapping[str, str], request_timeout_s: Optional[float] = None,
               start_timeout_s: Optional[float] = None, sequences: int = 1,
               on_phase: Callable[[Phase], None] = lambda phase: None,
               user_file: Optional[Path] = None, user_argv: Optional[Sequence[str]] = None) -> ProcessRun:
    """One serve trial of one candidate: start the server, prove it over HTTP, stop it. `user_file` serves
    a config file as it is; `user_argv` a deployment's own server arguments (verify)."""
    trial_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    port = free_port()
    if user_argv is not None:
        config = ServedConfig(trial_dir / "argv", " ".join(user_argv), str(llm_kwargs.get("served_model_name")
                              or llm_kwargs["model"]), llm_kwargs.get("api_key"), {})
        server_args = [*user_argv, "--host", HOST, "--port", str(port)]  # the last occurrence wins
    else:
        config = served_config(llm_kwargs, trial_dir, port, user_file)
        server_args = ["--config", str(config.path), "--host", HOST, "--port", str(port)]
    driver = serve_driver("http://%s:%d" % (HOST, port), config, llm_kwargs, sequences,
                          request_timeout_s or timeout_s)
    # The probe appends secret arguments (an API key) to the server's command line; a user's file carries its own.
    kwargs = dict(llm_kwargs) if user_file is None else {
        key: value for key, value in llm_kwargs.items() if not is_secret_arg(key, value)}
    return run_probe(python, kwargs, trial_dir, timeout_s=timeout_s, env=env, request_timeout_s=request_timeout_s,
                     start_timeout_s=start_timeout_s, sequences=sequences, on_phase=on_phase,
                     server_args=server_args, config_flags=config_flags(llm_kwargs), driver=driver,
                     also_secret=secret_values(llm_kwargs))


def _wait_ready(session: Session, client: httpx.Client) -> Optional[int]:
    """The `/health` status once the server answers 200; None when it exits or logs a fatal error."""
    failed_at = None
    while session.alive():
        if failed_at is None and patterns.SERVER_FATAL.search(session.text()):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > FAILURE_GRACE_S:
            return None
        try:
            status = client.get("/health", timeout=2.0).status_code
            if status == 200:
                return status
        except httpx.HTTPError:
            pass  # not listening yet: the process and the trial timeout bound the wait
        time.sleep(HEALTH_POLL_S)
    return None


def serve_driver(base_url: str, config: ServedConfig, llm_kwargs: Mapping[str, Any], sequences: int,
                 request_timeout_s: float) -> Driver:
    """The driver of one serve trial: ready, facts, served length, then `sequences` requests at once."""
    headers = {"Authorization": "Bearer %s" % config.api_key} if config.api_key else {}

    def drive(session: Session) -> Dict[str, Any]:
        with httpx.Client(base_url=base_url, headers=headers, trust_env=False) as client:
            health = _wait_ready(session, client)
            if health is None:
                return {}
            http: Dict[str, Any] = {"url": base_url, "health": health, "config": config.text,
                                    "overrides": config.overrides}
            found: Dict[str, Any] = {"status": STATUS_REQUEST_FAILED, "phase": "request", "engine": {}}
            try:
                scraped = client.get("/metrics", timeout=10.0).text
                models = client.get("/v1/models", timeout=10.0)
            except httpx.HTTPError as exc:
                found["exception"] = {"type": type(exc).__name__, "message": str(exc)}
                return found
            found["engine"] = metrics.cache_facts(scraped)
            http["metrics_line"] = metrics.cache_config_line(scraped)
            http["models_status"] = models.status_code
            served = _served_len(models)
            if served is None:
                found["request_problem"] = "/v1/models answered %d without a max_model_len" % models.status_code
                return found
            found["engine"]["max_model_len"] = served
            wanted = int(llm_kwargs["max_model_len"])
            if wanted > 0 and served != wanted:
                found["request_problem"] = ("/v1/models serves max_model_len %d, not the configured %d"
                                            % (served, wanted))
                return found
            session.mark("request")
            found["request"] = send_requests(client, config, served, sequences, request_timeout_s, http)
            found.update(verdict(found["request"]))
            return found

    return drive


def _served_len(models: httpx.Response) -> Optional[int]:
    """The max_model_len `/v1/models` advertises for the (first) served model."""
    try:
        data = models.json().get("data") or []
        value = data[0].get("max_model_len")
    except (ValueError, AttributeError, IndexError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
