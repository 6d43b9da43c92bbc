"""The config file `vllm serve --config FILE` reads: flat YAML, dash-case keys, metadata as comments.

Both directions live here so that what is written is exactly what is read back (`vllm-fit verify`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Union

import yaml

from ..errors import BadInput
from ..redact import is_secret_name
from .atomic import write_text_atomic

FIRST_KEYS = ("model", "max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes",
              "tensor_parallel_size")


def config_args(llm_kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The engine arguments worth writing: the search's keys first, then the user's; no secrets."""
    ordered = {key: llm_kwargs[key] for key in FIRST_KEYS if llm_kwargs.get(key) is not None}
    for key, value in llm_kwargs.items():
        if key not in ordered and value is not None and not is_secret_name(key):
            ordered[key] = value
    return ordered


def render_config(llm_kwargs: Mapping[str, Any], comments: List[str]) -> str:
    """YAML text: one `# ...` line per comment, then `dash-key: value` lines."""
    body = {key.replace("_", "-"): value for key, value in config_args(llm_kwargs).items()}
    header = "".join("# %s\n" % line for line in comments)
    omitted = [key for key in llm_kwargs if is_secret_name(key)]
    if omitted:
        header += "# Left out (secrets; pass them through the environment): %s\n" % ", ".join(omitted)
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def write_config(path: Union[str, Path], llm_kwargs: Mapping[str, Any], comments: List[str]) -> Path:
    """Write the config atomically."""
    return write_text_atomic(path, render_config(llm_kwargs, comments))


def read_config(path: Union[str, Path]) -> Dict[str, Any]:
    """LLM keyword arguments from a config file (dash-case keys become underscores)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput("cannot read config %s: %s" % (path, str(exc).splitlines()[0])) from None
    if not isinstance(data, dict) or "model" not in data or "max-model-len" not in data:
        raise BadInput("%s is not a vllm-fit config: it needs at least `model:` and `max-model-len:`"
                       % path)
    return {str(key).replace("-", "_"): value for key, value in data.items()}


def read_comment_facts(path: Union[str, Path]) -> Dict[str, str]:
    """The `# key: value` metadata comments of a config written by vllm-fit."""
    facts = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("# ") and ": " in line:
            key, _, value = line[2:].partition(": ")
            facts[key.strip()] = value.strip()
    return facts
