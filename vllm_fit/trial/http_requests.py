"""The verification requests of a served trial, over HTTP (httpx): full-length completions sent at
once, what they were served, and whether they ran together.

One request is a plain completion. Several are streamed, so that the client sees each one's first
and last token: every request holding a token before any finished proves they ran at once, with
vLLM's preemption counter unchanged (a preempted request gives its blocks back). A gauge of running
requests is sampled besides; on a busy machine a sample can miss the moment.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import httpx

from ..logs import metrics
from ..probe import GENERATED_TOKENS, STATUS_OK, STATUS_REQUEST_FAILED, prompt_ids


@dataclass(frozen=True)
class ServedConfig:
    """The file the server reads, and what a client needs to talk to it."""

    path: Path
    text: str
    model_name: str
    api_key: Optional[str] = None
    overrides: Dict[str, Any] = field(default_factory=dict)
    """Keys replaced for the trial: name -> [the config's value, the trial's value]."""



SAMPLE_EVERY_S = 0.02
"""How often `/metrics` is sampled while requests run (the peak of running requests)."""
CONCURRENT_GENERATED = 64
"""Tokens each of several concurrent requests generates (the prompt fills the rest of the length):
the same KV need as one generated token, and a decode phase long enough for the `/metrics` sampler
to see them run together on a busy machine (16 was missed there once)."""


class _PeakSampler(threading.Thread):
    """Samples `/metrics` while the requests run: the most requests running at once."""

    def __init__(self, client: httpx.Client):
        super().__init__(daemon=True)
        self.client, self.peak_running, self.stop = client, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                running = metrics.total(self.client.get("/metrics", timeout=2.0).text, metrics.RUNNING)
            except httpx.HTTPError:
                running = None  # the server went away: the requests report it
            self.peak_running = max(self.peak_running, int(running or 0))
            self.stop.wait(SAMPLE_EVERY_S)


def _complete(client: httpx.Client, config: ServedConfig, length: int, sequence: int, timeout_s: float,
              generated: int) -> Dict[str, Any]:
    """One full-length completion: `length - generated` prompt token ids, then `generated` tokens."""
    body = {"model": config.model_name, "prompt": prompt_ids(length - generated, sequence),
            "max_tokens": generated, "ignore_eos": True, "temperature": 0.0}
    try:
        response = client.post("/v1/completions", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return {"status_code": None, "error": "%s: %s" % (type(exc).__name__, exc),
                "timed_out": isinstance(exc, httpx.TimeoutException)}
    try:
        data = response.json()
    except ValueError:
        data = {"error": {"message": response.text[:500]}}
    usage = data.get("usage") or {} if isinstance(data, dict) else {}
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    choices = data.get("choices") or [{}] if isinstance(data, dict) else [{}]
    return {"status_code": response.status_code, "usage": usage, "error": message,
            "finish_reason": choices[0].get("finish_reason")}


def _complete_streamed(client: httpx.Client, config: ServedConfig, length: int, sequence: int, timeout_s: float,
                       generated: int, started: float) -> Dict[str, Any]:
    """The same completion, streamed: when its first and last tokens arrived (seconds from `started`),
    so that requests sent together are seen running together, whatever a sampled gauge caught."""
    body = {"model": config.model_name, "prompt": prompt_ids(length - generated, sequence),
            "max_tokens": generated, "ignore_eos": True, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
    out: Dict[str, Any] = {"status_code": None, "usage": {}, "error": None, "finish_reason": None}
    try:
        with client.stream("POST", "/v1/completions", json=body, timeout=timeout_s) as response:
            out["status_code"] = response.status_code
            if response.status_code != 200:
                response.read()
                return dict(out, error=response.text[:500])
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: "):])
                if chunk.get("error"):
                    return dict(out, error=str(chunk["error"])[:500])
                choices = chunk.get("choices") or []
                if choices and choices[0].get("text") is not None:
                    now = round(time.monotonic() - started, 3)
                    out.setdefault("first_s", now)
                    out["last_s"] = now
                    out["finish_reason"] = choices[0].get("finish_reason") or out["finish_reason"]
                if chunk.get("usage"):
                    out["usage"] = chunk["usage"]
    except (httpx.HTTPError, ValueError) as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["timed_out"] = isinstance(exc, httpx.TimeoutException)
    return out


def _running_together(answers: List[Dict[str, Any]]) -> int:
    """The most streamed requests that had a token and were not finished at one moment."""
    spans = [(a["first_s"], a["last_s"]) for a in answers if "first_s" in a]
    return max((sum(1 for first, last in spans if first <= moment <= last) for moment, _ in spans), default=0)

def _preemptions(client: httpx.Client) -> Optional[float]:
    """vLLM's preemption counter now (None when it is not exported or cannot be read)."""
    try:
        return metrics.total(client.get("/metrics", timeout=10.0).text, metrics.PREEMPTIONS)
    except httpx.HTTPError:
        return None

def send_requests(client: httpx.Client, config: ServedConfig, length: int, sequences: int, timeout_s: float,
              http: Dict[str, Any]) -> Dict[str, Any]:
    """`sequences` full-length requests sent at once, each with its own prompt; their usage counted."""
    preempted_before = _preemptions(client) if sequences > 1 else None
    sampler = _PeakSampler(client)
    sampler.start()
    started = time.monotonic()
    generated = max(1, min(GENERATED_TOKENS if sequences == 1 else CONCURRENT_GENERATED, length // 4))
    with ThreadPoolExecutor(max_workers=sequences) as pool:
        if sequences == 1:
            answers = [_complete(client, config, length, 0, timeout_s, generated)]
        else:
            answers = list(pool.map(lambda n: _complete_streamed(client, config, length, n, timeout_s, generated,
                                                                 started), range(sequences)))
    sampler.stop.set()
    sampler.join(timeout=5.0)
    peak = max(sampler.peak_running, _running_together(answers))
    if preempted_before is not None:
        after = _preemptions(client)
        http["preemptions"] = None if after is None else after - preempted_before
        if http["preemptions"]:  # they took turns, not held together: a preempted request gave its blocks back
            peak = min(peak, 1)
    http["status_codes"] = [answer["status_code"] for answer in answers]
    http["usage"] = [answer.get("usage") for answer in answers]
    served = [int((answer.get("usage") or {}).get("total_tokens") or 0) for answer in answers]
    prompt = (answers[0].get("usage") or {}).get("prompt_tokens") or 0
    return {"sequences": sequences, "prompt_tokens": prompt, "generated_tokens": served[0] - prompt if prompt else 0,
            "total_tokens": min(served), "served_tokens": served, "expected_tokens": length,
            "finish_reason": answers[0].get("finish_reason"), "seconds": round(time.monotonic() - started, 3),
            "peak_running": peak, "errors": [a["error"] for a in answers if a.get("error")],
            "timed_out": any(a.get("timed_out") for a in answers), "timeout_s": timeout_s, "http": http}


def verdict(request: Dict[str, Any]) -> Dict[str, Any]:
    """The probe's status for these answers: ok only when every request served the full length; one that
    got no answer within the request timeout hung (as when the trial's own deadline ends it first)."""
    if request.get("timed_out"):
        return {"status": STATUS_REQUEST_FAILED, "request_problem": "the full-length request hung; no answer"
                " within its timeout (%s s)" % request.get("timeout_s")}
    if request["errors"]:
        first = request["errors"][0]
        return {"status": STATUS_REQUEST_FAILED, "exception": {"type": "HTTP %s" % request["http"]["status_codes"][0],
                                                          "message": str(first)}}
    if all(tokens == request["expected_tokens"] for tokens in request["served_tokens"]):
        return {"status": STATUS_OK}
    return {"status": STATUS_REQUEST_FAILED, "request_problem": "served %d of %d tokens" % (
        request["total_tokens"], request["expected_tokens"])}
