"""Fleet files: validation with the entry and key named, defaults, stable shards."""

from __future__ import annotations

import sys

import pytest
import yaml

from vllm_fit.errors import BadInput
from vllm_fit.fleet.fleet_file import in_shard, load_fleet, parse_fleet, parse_shard, shard


def fleet(text):
    return parse_fleet(yaml.safe_load(text), "fleet.yaml", {}, sys.executable)


def test_defaults_apply_and_entries_override():
    entries = fleet("""
defaults: {granularity: 256, engine_args: {enforce_eager: true, dtype: half}}
models:
  - {model: /m/a, kv_cache_memory: 1GiB}
  - {model: /m/b, name: bee, granularity: 16, engine_args: {dtype: bfloat16}}
""")
    assert [e.name for e in entries] == ["a", "bee"]
    assert entries[0].options["granularity"] == 256 and entries[1].options["granularity"] == 16
    assert entries[1].options["engine_args"] == {"enforce_eager": True, "dtype": "bfloat16"}
    assert "name" not in entries[1].options


@pytest.mark.parametrize("text, words", [
    ("models: [{model: /m/a, max_lenn: 5}]", ["entry 1 (/m/a)", "unknown key 'max_lenn'", "did you mean max_len"]),
    ("models: [{model: /m/a}, {model: /m/b, max_len: '8k'}]", ["entry 2 (/m/b)", "max_len must be a whole number"]),
    ("models: [{model: /m/a, gpu_memory_utilization: high}]", ["entry 1", "gpu_memory_utilization must be a number"]),
    ("models: [{model: /m/a, max_len: true}]", ["entry 1", "max_len"]),
    ("models: [{model: /m/a, engine_args: [1, 2]}]", ["entry 1", "engine_args must be a mapping"]),
    ("models: [{model: /m/a}, {model: /n/a}]", ["entry 2 (/n/a)", "duplicate name 'a'", "entry 1"]),
    ("models: [{name: x}]", ["entry 1 (x)", "`model` is required"]),
    ("models: [{model: /m/a, name: 'has space'}]", ["entry 1", "name 'has space'"]),
    ("models: []", ["non-empty list"]),
    ("model: [{model: /m/a}]", ["unknown top-level key 'model'"]),
    ("defaults: {model: /m/a}\nmodels: [{model: /m/b}]", ["defaults", "belong to each entry"]),
    ("defaults: {max_len: x}\nmodels: [{model: /m/b}]", ["defaults", "max_len must be a whole number"]),
    ("- just a list", ["top level must be a mapping"]),
    ("models: [not-a-mapping]", ["entry 1", "mapping of options"]),
])
def test_malformed_fleets_name_the_entry_and_the_key(text, words):
    with pytest.raises(BadInput) as refused:
        fleet(text)
    for word in words:
        assert word in str(refused.value)
    assert "\n" not in str(refused.value)


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("models: [ {model: a\n")
    with pytest.raises(BadInput) as refused:
        load_fleet(path, {}, sys.executable)
    assert "not valid YAML" in str(refused.value) and "\n" not in str(refused.value)


def test_shards_partition_the_fleet_stably():
    entries = fleet("models: [%s]" % ", ".join("{model: /m/%d}" % i for i in range(20)))
    parts = [shard(entries, i, 3) for i in (1, 2, 3)]
    assert sorted(e.name for part in parts for e in part) == sorted(e.name for e in entries)
    grown = fleet("models: [%s]" % ", ".join("{model: /m/%d}" % i for i in range(25)))
    assert [e.name for e in shard(grown, 2, 3) if e.name in {x.name for x in entries}] == [e.name for e in parts[1]]
    assert in_shard("a", 1, 1)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", ""])
def test_bad_shards_are_refused(text):
    with pytest.raises(BadInput):
        parse_shard(text)


def test_the_example_fleets_are_valid():
    root = __import__("pathlib").Path(__file__).parent.parent / "configs"
    names = [e.name for e in load_fleet(root / "tiny-fleet.yaml", {}, sys.executable)]
    assert names == ["tiny-33-blocks", "tiny-40-blocks", "tiny-57-blocks"]
    assert len(load_fleet(root / "fleet.example.yaml", {}, sys.executable)) == 4
