"""`vllm-fit compare OLD NEW`: what changed between two sets of generated configs, as Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from .batch import load_index
from .errors import BadInput
from .export.markdown import comparison
from .export.yaml_config import read_comment_facts, read_config


def _from_config(path: Path) -> Dict[str, Any]:
    config, facts = read_config(path), read_comment_facts(path)
    tokens = facts.get("kv-cache-tokens")
    return {"max_model_len": config.get("max_model_len"), "kv_cache_tokens": int(tokens) if tokens and
            tokens.isdigit() else None, "gpu_memory_utilization": config.get("gpu_memory_utilization"),
            "kv_cache_memory_bytes": config.get("kv_cache_memory_bytes"), "vllm": facts.get("vllm")}


def load_set(path: Path) -> Dict[str, Dict[str, Any]]:
    """Per name: the fit facts of a folder of configs (or its configs/ subfolder), or a batch index."""
    if path.is_file() and path.suffix == ".json":
        index = load_index(path)
        return {e["name"]: {"max_model_len": (e.get("fit") or {}).get("max_model_len"),
                            "kv_cache_tokens": (e.get("fit") or {}).get("kv_cache_tokens"),
                            "gpu_memory_utilization": (e.get("fit") or {}).get("gpu_memory_utilization"),
                            "kv_cache_memory_bytes": (e.get("fit") or {}).get("kv_cache_memory_bytes"),
                            "vllm": e.get("vllm_version")} for e in index["entries"] if e.get("fit")}
    if path.is_file():
        return {path.stem: _from_config(path)}
    if not path.is_dir():
        raise BadInput("%s is neither a folder of configs, a config, nor a batch index.json" % path)
    folder = path / "configs" if (path / "configs").is_dir() else path
    return {config.stem: _from_config(config) for config in sorted(folder.glob("*.yaml"))}


def compare(old: Path, new: Path) -> str:
    """The Markdown comparison of two sets."""
    return comparison(load_set(old), load_set(new))
