"""The config file `vllm serve --config FILE` reads: flat YAML, dash-case keys, metadata as comments.

Both directions live here so that what is written is exactly what is read back (`vllm-fit verify`).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import yaml

from ..errors import BadInput, one_line
from ..files.reading import read_input_bytes
from ..files.yaml_text import read_yaml
from ..logs.regime import version_tuple
from ..probe import SERVER_MODULE
from ..redact import is_secret_arg
from ..report.search_report import SearchReport
from ..report.sections import FitSummary
from ..trial.hangs import boundary_text

FIRST_KEYS = ("model", "max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes",
              "tensor_parallel_size")


def config_args(llm_kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The engine arguments worth writing: the search's keys first, then the user's; no secrets."""
    ordered = {key: llm_kwargs[key] for key in FIRST_KEYS if llm_kwargs.get(key) is not None}
    for key, value in llm_kwargs.items():
        if key not in ordered and value is not None and not is_secret_arg(key, value):
            ordered[key] = value
    return ordered


def config_flags(llm_kwargs: Mapping[str, Any]) -> List[str]:
    """The config's options as command-line flags, read as vLLM reads its config file: true a flag, false nothing,
    a list its items, a mapping as JSON (for a vLLM that reads no config file, or misreads one)."""
    argv: List[str] = []
    for key, value in config_args(llm_kwargs).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *map(str, value)] if value else []
        elif value is not False:
            argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


def start_comment(llm_kwargs: Mapping[str, Any], vllm_version: Optional[str]) -> str:
    """How to start the vLLM the fit was found with on this file: `vllm serve --config` from 0.8.3; before, the
    same options as flags (no config file before 0.6.0; from 0.6.0 `vllm serve` refuses a model the file names
    and the api_server module keeps `--config` as an argument; read in each release's FlexibleArgumentParser)."""
    version = version_tuple(vllm_version)
    if version is None or version >= (0, 8, 3):
        return "start: vllm serve --config <this file>"
    return "start: python -m %s %s (vLLM %s %s)" % (
        SERVER_MODULE, " ".join(shlex.quote(word) for word in config_flags(llm_kwargs)), vllm_version,
        "reads no config file" if version < (0, 6, 0) else "starts on no config file that names the model")


def render_config(llm_kwargs: Mapping[str, Any], comments: List[str]) -> str:
    """YAML text: one `# ...` line per comment, then `dash-key: value` lines."""
    body = {key.replace("_", "-"): value for key, value in config_args(llm_kwargs).items()}
    header = "".join("# %s\n" % line for line in comments)
    omitted = [key for key, value in llm_kwargs.items() if is_secret_arg(key, value)]
    if omitted:
        header += "# Left out (secrets; pass them through the environment): %s\n" % ", ".join(omitted)
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def config_text(report: SearchReport) -> Optional[str]:
    """The YAML config of a report's fit (None when there is no fit)."""
    if report.fit is None:
        return None
    return render_config(report.fit.engine_args, config_comments(report, report.fit))


def config_comments(report: SearchReport, fit: FitSummary) -> List[str]:
    """The metadata comments of the YAML config, as `key: value` lines."""
    env = report.environment
    request = fit.request or {}
    lines = [
        "vllm-fit: %s" % report.tool_version,
        "written: %s" % report.created,
        "objective: %s" % report.search.objective,
        "verified: trial %d started and served %s%s-token request%s" % (
            fit.trial, "a " if int(request.get("sequences") or 1) == 1 else "%s concurrent " % request["sequences"],
            request.get("total_tokens"), " over HTTP (vllm serve on this file)" if request.get("http")
            else " (vllm.LLM in-process)"),
        "proven-best: %s" % ("yes" if report.proven else "no (%s)" % report.stop_reason),
        "kv-cache-tokens: %s" % fit.kv_cache_tokens,
        "max-concurrency: %s" % fit.max_concurrency,
        "vllm: %s" % env.vllm_version,
        start_comment(fit.engine_args, env.vllm_version),
        "torch: %s" % env.torch_version,
        "cuda: %s" % (env.cuda_version or "none"),
    ]
    boundary = (boundary_text(report.trials) or _limit_line(report)) if report.proven else None
    if boundary is not None:
        lines.append("boundary: %s" % boundary)
    held = fit.concurrency or {}
    if held:
        lines.append("concurrency: %s full-length sequences at once (the pool holds %s; seen running together: %s)"
                     % (held.get("requested"), held.get("held_by_pool"),
                        "not measured offline" if held.get("peak_running") is None else held["peak_running"]))
    if fit.headroom_bytes is not None:
        lines.append("headroom-bytes: %d" % fit.headroom_bytes)
    preflight = env.preflight
    for device in preflight.devices if preflight is not None else []:
        others = ", ".join("%s (pid %d, %d MiB)" % (p.name, p.pid, (p.used_bytes or 0) >> 20)
                           for p in device.processes) or "nothing else"
        lines.append("device: %s, %d MiB, %d MiB free before the search, held by %s; driver %s" % (
            device.name, device.total_bytes >> 20, device.free_bytes >> 20, others,
            preflight.driver if preflight is not None else None))
    if env.fingerprint:
        lines.append("fingerprint: %s" % env.fingerprint)
    return [one_line(line) for line in lines]


def _limit_line(report: SearchReport) -> Optional[str]:
    """The diagnosis's line where what stops the next length is not the KV cache (advice/diagnosis.py's
    `limited_by`: a request that failed with the pool holding it, where no hang boundary says so), else None."""
    diagnosis = report.diagnosis or {}
    lines = diagnosis.get("lines") or []
    return str(lines[0]) if diagnosis.get("limited_by") and lines else None


INT_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs", "max_num_batched_tokens",
            "block_size", "kv_cache_memory_bytes")
MAX_LENGTH = 1 << 40
"""No model's context comes near this many tokens."""
_HUMAN_INT = re.compile(r"([0-9]{1,12})([kKmMgG]?)")
_HUMAN_FACTORS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
"""vllm serve's human-readable integers: 32k = 32000, 32K = 32768 (vllm/engine/arg_utils.py)."""


def human_int(key: str, value: Any, where: str) -> int:
    """A whole number as `vllm serve` reads it (8192, "8192", "32k", "32K"); BadInput otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _HUMAN_INT.fullmatch(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise BadInput("%s: %s must be a whole number (8192, 32k, 32K), got %r" % (where, key, value))
    return int(match.group(1)) * _HUMAN_FACTORS[match.group(2)]


def read_config(path: Union[str, Path]) -> Dict[str, Any]:
    """Engine arguments from a config file (dash-case keys become underscores), numbers checked."""
    data = read_yaml(path, "config")
    if not isinstance(data, dict) or "model" not in data or "max-model-len" not in data:
        raise BadInput("%s is not a vllm-fit config: it needs at least `model:` and `max-model-len:`"
                       % path)
    if "config" in data:
        raise BadInput("%s names another config file (`config:`); vllm serve reads one --config file: merge them"
                       % path)
    odd = [key for key in data if not isinstance(key, str)]
    if odd:
        raise BadInput("%s: key %r is not a name; vllm serve takes option names such as max-model-len"
                       % (path, odd[0]))
    args = {key.replace("-", "_"): value for key, value in data.items()}
    if not isinstance(args["model"], str) or not args["model"].strip():
        raise BadInput("%s: model must name a model directory or hub id, got %r" % (path, args["model"]))
    args["max_model_len"] = human_int("max-model-len", args["max_model_len"], str(path))
    if not 1 <= args["max_model_len"] <= MAX_LENGTH:
        raise BadInput("%s: max-model-len must be from 1 to %d, got %r" % (path, MAX_LENGTH, data["max-model-len"]))
    for key in INT_KEYS:
        if args.get(key) is not None:
            args[key] = human_int(key.replace("_", "-"), args[key], str(path))
            if args[key] < 1:
                raise BadInput("%s: %s must be at least 1, got %r" % (path, key.replace("_", "-"), args[key]))
    utilization = args.get("gpu_memory_utilization")
    if utilization is not None and (isinstance(utilization, bool) or not isinstance(utilization, (int, float))
                                    or not 0 < utilization <= 1):
        raise BadInput("%s: gpu-memory-utilization must be a number in (0, 1], got %r" % (path, utilization))
    return args


def comment_int(facts: Mapping[str, str], key: str) -> Optional[int]:
    """A whole number from a `# key: value` comment (ASCII digits only), else None."""
    value = facts.get(key)
    return int(value) if value and re.fullmatch(r"[0-9]{1,15}", value) else None


def read_comment_facts(path: Union[str, Path]) -> Dict[str, str]:
    """The `# key: value` metadata comments of a config written by vllm-fit."""
    facts = {}
    text = read_input_bytes(path, "config").decode("utf-8", errors="replace")
    for line in text.splitlines():
        if line.startswith("# ") and ": " in line:
            key, _, value = line[2:].partition(": ")
            facts[key.strip()] = value.strip()
    return facts
