"""Check a fit outside vllm-fit: vLLM itself serves the YAML and a full-length request, and the same YAML
with max-model-len one step higher refuses to start.

Nothing of vllm-fit runs here: the YAML is read with yaml.safe_load and given to vLLM as it is, through
`python -m vllm.entrypoints.openai.api_server --config FILE` (serve) or `vllm.LLM(**config)` (llm), in a
child process of its own session, killed with its group afterwards. Prints a JSON verdict; exit 0 when
the length serves and the next one is refused, 1 otherwise.
Usage: python scripts/boundary.py --python VLLM_PY --config fit.yaml [--step N] [--via serve|llm]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict

import httpx
import yaml

LLM_CHILD = """
import json, sys
from vllm import LLM, SamplingParams
args = json.loads(sys.argv[1])
length = args.pop("max_model_len")
llm = LLM(**args, max_model_len=length)
print("##boundary started", flush=True)
ids = [1000 + (i * 37) % 1000 for i in range(length - 1)]
params = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0.0)
try:
    out = llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
except TypeError:
    out = llm.generate(prompt_token_ids=[ids], sampling_params=params, use_tqdm=False)
print("##boundary served %d" % (len(out[0].prompt_token_ids) + len(out[0].outputs[0].token_ids)), flush=True)
"""


REASONS = ("max seq len", "estimated maximum model length", "is larger than", "OutOfMemoryError", "Error: ")
"""Root-cause phrases, most telling first."""


def _tail(text: str, lines: int = 6) -> str:
    """Why vLLM did not start: its root-cause line where one is recognisable (a multiprocess engine
    ends with a generic wrapper), then the last non-empty lines of the log."""
    kept = [line for line in text.splitlines() if line.strip()]
    cause = next((line.strip() for reason in REASONS for line in kept if reason in line), None)
    return "\n".join(([cause] if cause else []) + kept[-lines:])


def _kill_group(process: subprocess.Popen) -> None:
    """SIGTERM the child's session, then SIGKILL it, and reap it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=15)
            break
        except subprocess.TimeoutExpired:
            continue


def _engine_args(config: Dict[str, Any]) -> Dict[str, Any]:
    """The YAML's dash-case keys as LLM keyword arguments."""
    return {key.replace("-", "_"): value for key, value in config.items()}


def run_llm(python: str, config: Dict[str, Any], length: int, timeout_s: float, env: Dict[str, str]) -> Dict[str, Any]:
    """Start vllm.LLM with the config at `length` and serve one request of that length."""
    args = dict(_engine_args(config), max_model_len=length)
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen([python, "-c", LLM_CHILD, json.dumps(args)], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return {"length": length, "started": None, "served": False, "detail": "timed out"}
        _kill_group(process)
        log.seek(0)
        text = log.read()
    started = "##boundary started" in text
    served = "##boundary served %d" % length in text
    return {"length": length, "started": started, "served": served, "exit_code": process.returncode,
            "detail": "" if served else _tail(text)}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_server(python: str, config: Dict[str, Any], length: int, timeout_s: float,
               env: Dict[str, str]) -> Dict[str, Any]:
    """Start vLLM's OpenAI server on the config at `length` and send one completion of that length."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.yaml"
        path.write_text(yaml.safe_dump(dict(config, **{"max-model-len": length}), sort_keys=False))
        log_path = Path(folder) / "server.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen([python, "-m", "vllm.entrypoints.openai.api_server", "--config", str(path),
                                        "--host", "127.0.0.1", "--port", str(port)], stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            return _drive(process, port, config, length, timeout_s, log_path)
        finally:
            _kill_group(process)


def _drive(process: subprocess.Popen, port: int, config: Dict[str, Any], length: int, timeout_s: float,
           log_path: Path) -> Dict[str, Any]:
    """Wait for /health (or the server's exit), then send the full-length completion."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url="http://127.0.0.1:%d" % port, timeout=10) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return {"length": length, "started": False, "served": False, "exit_code": process.returncode,
                        "detail": _tail(log_path.read_text(errors="replace"))}
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            return {"length": length, "started": None, "served": False, "detail": "timed out"}
        model = config.get("served-model-name") or config["model"]
        model = model[0] if isinstance(model, list) else model
        body = {"model": model, "prompt": [1000 + (i * 37) % 1000 for i in range(length - 1)], "max_tokens": 1,
                "ignore_eos": True, "temperature": 0.0}
        try:
            response = client.post("/v1/completions", json=body, timeout=max(1.0, deadline - time.monotonic()))
        except httpx.TimeoutException:
            return {"length": length, "started": True, "served": False, "detail": "the request timed out"}
        usage = response.json().get("usage") or {} if response.status_code == 200 else {}
        served = usage.get("total_tokens") == length
        return {"length": length, "started": True, "served": served, "status_code": response.status_code,
                "usage": usage, "detail": "" if served else response.text[:500]}


def check(python: str, config: Dict[str, Any], step: int, via: str, timeout_s: float,
          env: Dict[str, str]) -> Dict[str, Any]:
    """The fit's length must serve; one step higher must not start."""
    run = run_server if via == "serve" else run_llm
    length = int(config["max-model-len"])
    fits = run(python, config, length, timeout_s, env)
    above = run(python, config, length + step, timeout_s, env)
    ok = bool(fits["served"]) and above["started"] is False
    return {"ok": ok, "via": via, "fit": fits, "one_step_higher": above}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the vLLM interpreter")
    parser.add_argument("--config", required=True, type=Path, help="the fit YAML (vllm serve --config)")
    parser.add_argument("--step", type=int, default=1, help="the granularity the fit was searched at")
    parser.add_argument("--via", choices=("serve", "llm"), default="serve")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per launch")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    verdict = check(args.python, config, args.step, args.via, args.timeout, dict(os.environ))
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
