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
from typing import Any, Dict, List, Mapping, Tuple, Union

from ..errors import BadInput, one_line
from ..files.yaml_text import read_yaml
from ..prepare.request import BY_KEY, OPTIONS, SearchRequest, request_from_options

ENTRY_KEYS = frozenset({"name", "gpu", "ray_resources"})
"""Fleet keys that are not search options: the entry's stable name, and where it runs (batch --executor ray)."""
KNOWN_KEYS = sorted(set(BY_KEY) | ENTRY_KEYS)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class FleetEntry:
    """One model of the fleet: its stable name, its options (defaults applied) and the checked request."""

    name: str
    options: Dict[str, Any]
    request: SearchRequest
    placement: Dict[str, Any]
    """Where it may run: `gpu` and `ray_resources`, for batch --executor ray."""


def _check_keys(where: str, options: Any) -> Dict[str, Any]:
    if not isinstance(options, dict):
        raise BadInput("%s must be a mapping of options, got %r" % (where, options))
    if "engine_args" in options and not isinstance(options["engine_args"], dict):
        raise BadInput("%s: engine_args must be a mapping, got %r" % (where, options["engine_args"]))
    for key in options:
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(str(key).replace("-", "_"), KNOWN_KEYS, n=1)
            hint = " (did you mean %s?)" % close[0] if close else ""
            raise BadInput("%s: unknown key %r%s; known keys: %s" % (where, key, hint, ", ".join(KNOWN_KEYS)))
    return options


MAX_TEXT = 65536
"""The longest text an entry's option may hold (engine argument values have their own bound, 1 MiB)."""


def _check_sizes(where: str, options: Dict[str, Any]) -> None:
    """No entry option is a huge text (a 20 MB scalar is a broken file, not a model name)."""
    for key, value in options.items():
        if key != "engine_args" and isinstance(value, str) and len(value) > MAX_TEXT:
            raise BadInput("%s: %s is %d characters long; at most %d are taken" % (where, key, len(value), MAX_TEXT))


def default_name(model: str) -> str:
    """`/models/Llama-3.1-8B/` -> `Llama-3.1-8B`; `Qwen/Qwen2.5-7B` -> `Qwen2.5-7B`."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", Path(model.rstrip("/")).name) or "model"


def parse_fleet(data: Any, source: str, env: Mapping[str, str], default_python: str) -> List[FleetEntry]:
    """Validate a whole fleet document, every entry with the CLI's parsers, before anything runs."""
    if not isinstance(data, dict):
        raise BadInput("%s: the top level must be a mapping with `models:` (and optionally `defaults:`)" % source)
    unknown = set(data) - {"defaults", "models"}
    if unknown:
        raise BadInput("%s: unknown top-level key %r; use `defaults:` and `models:`"
                       % (source, sorted(map(str, unknown))[0]))
    defaults = _check_keys("%s: defaults" % source, data.get("defaults") or {})
    if "model" in defaults or "name" in defaults:
        raise BadInput("%s: defaults: `model` and `name` belong to each entry, not to the defaults" % source)
    for key, value in defaults.items():
        if key in BY_KEY and value is not None:
            spec = OPTIONS[BY_KEY[key]]
            try:
                spec.parse(key, value)
            except BadInput as exc:
                raise BadInput("%s: defaults: %s" % (source, exc)) from None
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise BadInput("%s: `models:` must be a non-empty list of entries" % source)
    entries: List[FleetEntry] = []
    seen: Dict[str, int] = {}
    for number, raw in enumerate(models, start=1):
        label = raw.get("name") or raw.get("model") if isinstance(raw, dict) else None
        where = "%s: entry %d%s" % (source, number, " (%s)" % one_line(str(label), 80) if label else "")
        options = _check_keys(where, raw)
        _check_sizes(where, options)
        if "model" not in options:
            raise BadInput("%s: `model` is required" % where)
        model = options["model"]
        if not isinstance(model, str) or not model.strip() or not model.isprintable():
            raise BadInput("%s: model must be a model directory or hub id on one line, got %s"
                           % (where, one_line(repr(model), 80)))
        if "name" in options:
            name = options["name"]
        else:
            name = default_name(model)
            if name.strip(".-_") == "" or model.rstrip("/") in (".", "..", "~", ""):
                raise BadInput("%s: no file name can be made from model %r; give the entry a `name:`" % (where, model))
        if not isinstance(name, str) or not _NAME.match(name):
            raise BadInput("%s: name %s must be 1-100 letters, digits, '.', '_' or '-' (it names the entry's files)"
                           % (where, one_line(repr(name), 80)))
        folded = name.lower()  # configs/A.yaml and configs/a.yaml are one file on a case-insensitive disk
        if folded in seen:
            raise BadInput("%s: duplicate name %r (entry %d has it too, or one differing only in case); give each"
                           " entry its own `name:`" % (where, name, seen[folded]))
        seen[folded] = number
        search = {k: v for k, v in options.items() if k not in ENTRY_KEYS}
        inherited = {k: v for k, v in defaults.items() if k not in ENTRY_KEYS}
        if isinstance(inherited.get("engine_args"), dict) and isinstance(search.get("engine_args"), dict):
            search["engine_args"] = dict(inherited["engine_args"], **search["engine_args"])
        request = request_from_options(search, env, default_python, where=where, inherited=inherited)
        placement = {k: options.get(k, defaults.get(k)) for k in ("gpu", "ray_resources")}
        _check_placement(where, placement)
        merged = dict(inherited, **search)
        entries.append(FleetEntry(name, merged, request, placement))
    return entries


def _check_placement(where: str, placement: Dict[str, Any]) -> None:
    gpu, resources = placement.get("gpu"), placement.get("ray_resources")
    if gpu is not None and (not isinstance(gpu, str) or not gpu.strip()):
        raise BadInput("%s: gpu must be an accelerator name such as H100, got %r" % (where, gpu))
    if resources is not None and (not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in resources.items())):
        raise BadInput("%s: ray_resources must map resource names to amounts, e.g. {CPU: 1}, got %r"
                       % (where, resources))


def load_fleet(path: Union[str, Path], env: Mapping[str, str], default_python: str) -> List[FleetEntry]:
    """Read and validate a fleet file (safe YAML: no tags, no duplicate keys, bounded aliases)."""
    return parse_fleet(read_yaml(path, "fleet file"), str(path), env, default_python)


MAX_SHARDS = 10000
"""More shards than this leave nearly every one empty: a mistyped --shard, not a CI matrix."""


def parse_shard(text: str) -> Tuple[int, int]:
    """`i/n` with 1 <= i <= n."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text or "")
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)) <= MAX_SHARDS:
        raise BadInput("--shard takes i/n with 1 <= i <= n <= %d, got %r; e.g. --shard 1/4" % (MAX_SHARDS, text[:40]))
    return int(match.group(1)), int(match.group(2))


def in_shard(name: str, index: int, count: int) -> bool:
    """A stable assignment: by a hash of the name, so adding entries does not move the others."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % count == index - 1


def shard(entries: List[FleetEntry], index: int, count: int) -> List[FleetEntry]:
    return [entry for entry in entries if in_shard(entry.name, index, count)]

