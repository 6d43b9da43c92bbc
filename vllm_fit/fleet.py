"""The fleet file of `vllm-fit batch`: models with per-entry options over a defaults section.

```yaml
defaults:                 # optional; any search option, applied to every entry
  granularity: 256
  engine_args: {enforce_eager: true}
models:
  - model: /models/llama-3.1-8b
    name: llama-8b        # optional; stable file names come from it (default: the model's last part)
    kv_cache_memory: 24GiB
  - model: Qwen/Qwen2.5-7B-Instruct
    target_len: 32768
```
Keys are the `vllm-fit search` options in snake_case. Validated before anything runs: unknown keys,
wrong types and duplicate names are refused with the entry and the key named.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import yaml

from .errors import BadInput
from .inputs import SEARCH_OPTIONS

_NUMBER = (int, float)
KEY_TYPES: Dict[str, Tuple[type, ...]] = {
    "model": (str,), "name": (str,), "python": (str,), "strategy": (str,), "search": (str,),
    "max_len": (int,), "min_len": (int,), "granularity": (int,), "target_len": (int,),
    "tensor_parallel_size": (int,), "retries": (int,),
    "gpu_memory_utilization": _NUMBER, "max_utilization": _NUMBER, "trial_timeout": _NUMBER,
    "retry_wait": _NUMBER, "kv_cache_memory": (str, int), "kv_granularity": (str, int),
    "engine_args": (dict,), "require_idle": (bool,),
}
assert set(KEY_TYPES) == set(SEARCH_OPTIONS) | {"name"}
_TYPE_NAMES = {str: "a string", int: "a whole number", float: "a number", dict: "a mapping", bool: "true or false"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class FleetEntry:
    """One model of the fleet: its stable name and its search options (defaults applied)."""

    name: str
    options: Dict[str, Any]


def _type_error(where: str, key: str, value: Any, types: Tuple[type, ...]) -> BadInput:
    if types == _NUMBER:
        wanted = "a number"
    elif types == (str, int):
        wanted = "a size such as 2GiB (or a number of bytes)"
    else:
        wanted = " or ".join(_TYPE_NAMES[t] for t in types)
    return BadInput("%s: %s must be %s, got %r" % (where, key, wanted, value))


def _check_options(where: str, options: Any) -> Dict[str, Any]:
    if not isinstance(options, dict):
        raise BadInput("%s must be a mapping of options, got %r" % (where, options))
    for key, value in options.items():
        if key not in KEY_TYPES:
            close = difflib.get_close_matches(str(key).replace("-", "_"), list(KEY_TYPES), n=1)
            hint = " (did you mean %s?)" % close[0] if close else ""
            raise BadInput("%s: unknown key %r%s; known keys: %s" % (where, key, hint, ", ".join(sorted(KEY_TYPES))))
        types = KEY_TYPES[key]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise _type_error(where, key, value, types)
    return options


def default_name(model: str) -> str:
    """`/models/Llama-3.1-8B/` -> `Llama-3.1-8B`; `Qwen/Qwen2.5-7B` -> `Qwen2.5-7B`."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", Path(model.rstrip("/")).name) or "model"


def parse_fleet(data: Any, source: str = "fleet") -> List[FleetEntry]:
    """Validate a loaded fleet document and return its entries with defaults applied."""
    if not isinstance(data, dict):
        raise BadInput("%s: the top level must be a mapping with `models:` (and optionally `defaults:`)" % source)
    unknown = set(data) - {"defaults", "models"}
    if unknown:
        raise BadInput("%s: unknown top-level key %r; use `defaults:` and `models:`" % (source, sorted(unknown)[0]))
    defaults = _check_options("%s: defaults" % source, data.get("defaults") or {})
    if "model" in defaults or "name" in defaults:
        raise BadInput("%s: defaults: `model` and `name` belong to each entry, not to the defaults" % source)
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise BadInput("%s: `models:` must be a non-empty list of entries" % source)
    entries: List[FleetEntry] = []
    seen: Dict[str, int] = {}
    for number, raw in enumerate(models, start=1):
        label = raw.get("name") or raw.get("model") if isinstance(raw, dict) else None
        where = "%s: entry %d%s" % (source, number, " (%s)" % label if label else "")
        options = _check_options(where, raw)
        if "model" not in options:
            raise BadInput("%s: `model` is required" % where)
        name = options.get("name") or default_name(options["model"])
        if not _NAME.match(name):
            raise BadInput("%s: name %r must be letters, digits, '.', '_' or '-'" % (where, name))
        if name in seen:
            raise BadInput("%s: duplicate name %r (entry %d has it too); give each entry its own `name:`"
                           % (where, name, seen[name]))
        seen[name] = number
        merged = dict(defaults)
        merged["engine_args"] = dict(defaults.get("engine_args") or {}, **(options.get("engine_args") or {}))
        merged.update({k: v for k, v in options.items() if k not in ("name", "engine_args")})
        entries.append(FleetEntry(name, merged))
    return entries


def load_fleet(path: Union[str, Path]) -> List[FleetEntry]:
    """Read and validate a fleet file (yaml.safe_load)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise BadInput("cannot read fleet file %s: %s" % (path, exc.strerror)) from None
    except yaml.YAMLError as exc:
        raise BadInput("%s is not valid YAML: %s" % (path, " ".join(str(exc).split()))) from None
    return parse_fleet(data, str(path))


def parse_shard(text: str) -> Tuple[int, int]:
    """`i/n` with 1 <= i <= n."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise BadInput("--shard takes i/n with 1 <= i <= n, got %r; e.g. --shard 1/4" % text)
    return int(match.group(1)), int(match.group(2))


def in_shard(name: str, index: int, count: int) -> bool:
    """A stable assignment: by a hash of the name, so adding entries does not move the others."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % count == index - 1


def shard(entries: List[FleetEntry], index: int, count: int) -> List[FleetEntry]:
    return [entry for entry in entries if in_shard(entry.name, index, count)]

