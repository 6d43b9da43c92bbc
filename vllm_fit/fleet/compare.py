"""`vllm-fit compare OLD NEW`: what changed between two sets of generated configs, as Markdown."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

from ..errors import BadInput
from ..export.markdown import comparison
from ..export.yaml_config import comment_int, read_comment_facts, read_config
from ..files.reading import read_input_bytes
from .index import load_index


def _from_config(path: Path) -> Dict[str, Any]:
    config, facts = read_config(path), read_comment_facts(path)
    return {"max_model_len": config.get("max_model_len"), "kv_cache_tokens": comment_int(facts, "kv-cache-tokens"),
            "gpu_memory_utilization": config.get("gpu_memory_utilization"),
            "kv_cache_memory_bytes": config.get("kv_cache_memory_bytes"), "vllm": facts.get("vllm")}


def load_set(path: Path) -> Dict[str, Dict[str, Any]]:
    """Per name: the fit facts of a folder of configs (or its configs/ subfolder), or a batch index."""
    if path.is_dir() and (path / "index.json").is_file():
        path = path / "index.json"
    if path.is_file() and path.suffix == ".json":
        index = load_index(path)
        return {e.name: {"max_model_len": e.fit.max_model_len, "kv_cache_tokens": e.fit.kv_cache_tokens,
                         "gpu_memory_utilization": e.fit.gpu_memory_utilization,
                         "kv_cache_memory_bytes": e.fit.kv_cache_memory_bytes, "vllm": e.vllm_version}
                for e in index.entries if e.fit is not None and e.data.get("fit")}
    if path.is_file():
        return {path.stem: _from_config(path)}
    if not path.is_dir():
        if os.path.lexists(path):
            read_input_bytes(path, "compared file")  # says what it is (a pipe, a device) rather than reading it
        raise BadInput("%s is neither a folder of configs, a config, nor a batch index.json" % path)
    folder = path / "configs" if (path / "configs").is_dir() else path
    configs = sorted(folder.glob("*.yaml"))
    if not configs:
        raise BadInput("%s has no index.json and no *.yaml configs; name a batch output folder, its"
                       " index.json, or a folder of configs" % path)
    return {config.stem: _from_config(config) for config in configs}


def regressions(old: Dict[str, Dict[str, Any]], new: Dict[str, Dict[str, Any]]) -> List[str]:
    """Names whose fit got worse: gone, shorter, or less KV capacity."""
    worse = []
    for name, before in old.items():
        after = new.get(name)
        if after is None or (after.get("max_model_len") or 0) < (before.get("max_model_len") or 0) or (
                before.get("kv_cache_tokens") and (after.get("kv_cache_tokens") or 0) < before["kv_cache_tokens"]):
            worse.append(name)
    return worse


def compare(old: Path, new: Path) -> tuple:
    """The Markdown comparison of two sets, and the names that regressed."""
    before, after = load_set(old), load_set(new)
    return comparison(before, after), regressions(before, after)
