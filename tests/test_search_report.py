"""The typed report writes the JSON users' scripts read, unchanged.

tests/data/report-*.json were written by vllm-fit before the report became typed (simulated GPU
searches: a fit with --explore, nothing fits with a diagnosis, a foreign process on the device).
Reading one and writing it again gives the same text, key for key and in the same order; the
key lists below are the schema, so a change to them is a change users see.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from vllm_fit.errors import BadInput
from vllm_fit.export.json_report import read_report, report_text
from vllm_fit.export.plot import plot_data
from vllm_fit.export.yaml_config import config_text
from vllm_fit.outcome import StopReason
from vllm_fit.report.search_report import SearchReport
from vllm_fit.store import SCHEMA, FitStore, check_cache_dir

DATA = Path(__file__).parent / "data"
SAMPLES = sorted(DATA.glob("report-*.json"))
TOP_KEYS = ["tool", "created", "search", "fit", "stop", "stop_reason", "proven", "notes", "launches", "wall_time_s",
            "trials", "environment", "diagnosis", "fingerprint_inputs", "cache", "explore"]
FIT_KEYS = ["max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes", "tensor_parallel_size",
            "kv_cache_tokens", "kv_cache_blocks", "block_size", "max_concurrency", "concurrency", "headroom_bytes",
            "trial", "request", "engine_args"]
ENVIRONMENT_KEYS = ["python", "python_version", "vllm_version", "vllm_distribution", "torch_version", "cuda_version",
                    "preflight", "fingerprint"]
EXPLORE_KEYS = ["alternative", "tensor_parallel_size", "engine_args", "verified", "proven", "stop", "stop_reason",
                "launches", "fit", "trials"]


def test_there_are_samples_of_every_shape():
    shapes = {path.name for path in SAMPLES}
    assert {"report-fit-explore.json", "report-no-fit-diagnosis.json", "report-foreign-process.json"} <= shapes


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.stem)
def test_a_report_read_and_written_again_is_the_same_text(path):
    data = json.loads(path.read_text())
    report = SearchReport.from_json(data)
    assert report_text(report.to_json()) == report_text(data)
    assert json.dumps(report.to_json()) == json.dumps(data)  # the same keys in the same order, at every depth


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.stem)
def test_the_schema_users_read(path):
    data = json.loads(path.read_text())
    assert [key for key in TOP_KEYS if key in data] == list(data)
    assert list(data["environment"]) == ENVIRONMENT_KEYS
    if data["fit"] is not None:
        assert list(data["fit"]) == FIT_KEYS
    for row in data.get("explore") or []:
        assert [key for key in EXPLORE_KEYS if key in row] == list(row)


def test_typed_fields_read_back():
    report = SearchReport.from_json(json.loads((DATA / "report-fit-explore.json").read_text()))
    assert report.stop is StopReason.COMPLETE and report.proven and report.fit is not None
    assert report.fit_record is not None and report.fit_record.index == report.fit.trial
    assert report.fit_record.length == report.fit.max_model_len
    assert report.explore and all(row.fit is None or row.fit.max_model_len > 0 for row in report.explore)
    assert report.environment.preflight is not None and report.environment.gpu_name
    foreign = SearchReport.from_json(json.loads((DATA / "report-foreign-process.json").read_text()))
    assert foreign.environment.preflight is not None and foreign.environment.preflight.held_by_others
    nothing = SearchReport.from_json(json.loads((DATA / "report-no-fit-diagnosis.json").read_text()))
    assert nothing.fit is None and nothing.fit_record is None and nothing.diagnosis is not None
    assert config_text(nothing) is None and config_text(report) is not None


@pytest.mark.parametrize("damage", [
    lambda data: data.pop("trials"),
    lambda data: data.update(stop="maybe"),
    lambda data: data["fit"].update(trial=999),
    lambda data: data["fit"].pop("engine_args"),
    lambda data: data.update(environment=[]),
    lambda data: data["trials"][0].update(outcome="fine"),
    lambda data: data["environment"]["preflight"]["devices"].append({"name": "x"}),
], ids=["no trials", "unknown stop", "fit of no trial", "fit without arguments", "environment a list",
        "unknown outcome", "device without fields"])
def test_a_damaged_report_is_refused_with_the_reason(damage, tmp_path):
    data = json.loads((DATA / "report-fit-explore.json").read_text())
    damage(data)
    with pytest.raises(ValueError):
        SearchReport.from_json(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput) as refused:
        read_report(path)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


def test_the_cache_keeps_the_report_and_a_hit_says_so(tmp_path):
    report = SearchReport.from_json(json.loads((DATA / "report-fit-explore.json").read_text()))
    report = dataclasses.replace(report, explore=None)  # stored before the alternatives are searched
    store = FitStore(check_cache_dir(tmp_path))
    path = store.store("f" * 64, report)
    assert json.loads(path.read_text())["schema"] == SCHEMA
    cached = store.cached("f" * 64)
    assert cached == report
    hit = cached.from_cache("f" * 64).to_json()
    assert hit["launches"] == 0 and hit["wall_time_s"] == 0.0
    assert hit["cache"] == {"hit": True, "fingerprint": "f" * 64, "created": report.created,
                            "launches_then": report.launches}
    assert {key: value for key, value in hit.items() if key not in ("launches", "wall_time_s", "cache")} == \
        {key: value for key, value in report.to_json().items() if key not in ("launches", "wall_time_s", "cache")}


def test_the_picture_reads_the_typed_report():
    report = SearchReport.from_json(json.loads((DATA / "report-fit-explore.json").read_text()))
    data = plot_data(report)
    assert data.fit_len == report.fit.max_model_len and len(data.points) == len(report.trials)
    assert [name.split(",")[0] for name, _, _ in data.alternatives] == \
        [row.alternative for row in report.explore if row.fit is not None]


def test_a_report_of_an_older_version_without_the_newer_fields_is_still_read(tmp_path):
    """plot and apply read reports users kept: fields added later (headroom, concurrency, the distribution)
    may be missing; only what a fit cannot be without (length, trial, engine arguments) is required."""
    data = json.loads((DATA / "report-fit-explore.json").read_text())
    for key in ("headroom_bytes", "concurrency", "max_concurrency", "kv_cache_blocks"):
        data["fit"].pop(key)
    data["environment"].pop("vllm_distribution")
    report = SearchReport.from_json(data)
    assert report.fit is not None and report.fit.headroom_bytes is None and report.fit.max_model_len > 0
    assert list(report.to_json()["fit"]) == FIT_KEYS  # written again whole, in the schema's order
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert read_report(path).fit == report.fit
    with pytest.raises(ValueError):
        data["fit"].pop("engine_args")
        SearchReport.from_json(data)
