"""`vllm-fit plot` and the batch pictures: the numbers drawn come from the report, the files are real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vllm_fit.export.plot import plot_data
from vllm_fit.report.search_report import SearchReport

GIB = 1 << 30


SAMPLE = Path(__file__).parent / "data" / "report-fit-explore.json"
"""A report vllm-fit wrote (tests/test_search_report.py); the pictures' numbers replace its own."""


def _trial(index, engine_args, outcome, length, capacity):
    template = json.loads(SAMPLE.read_text())["trials"][0]
    return dict(template, index=index, engine_args=engine_args, outcome=outcome, max_model_len=length,
                capacity=capacity)


def report_json(trials, search=None, fit=None, explore=None):
    """A whole report with these trials, settings and fit (the rest from a report vllm-fit wrote)."""
    data = json.loads(SAMPLE.read_text())
    data.update(trials=trials, search=dict(data["search"], **(search or {})), explore=explore)
    data["fit"] = dict(data["fit"], **fit) if fit else None
    return data


def report(**extra):
    trials = [
        _trial(1, {"max_model_len": 131072, "gpu_memory_utilization": 0.95}, "oom", 131072,
               {"kv_cache_tokens": 24880, "available_kv_gib": 3.04, "total_memory_gib": 21.96}),
        _trial(2, {"max_model_len": 15856, "gpu_memory_utilization": 0.9}, "ok", 15856, {"kv_cache_tokens": 15872}),
        _trial(3, {"max_model_len": 20000, "gpu_memory_utilization": 0.92}, "timeout", 20000, {}),
    ]
    data = report_json(trials, {"utilization_cap": 0.95, "model_derived_max_len": 131072, "model": "m"},
                       {"max_model_len": 15856, "kv_cache_tokens": 15872, "trial": 2,
                        "engine_args": {"gpu_memory_utilization": 0.9, "max_model_len": 15856}})
    data.update(extra)
    return data


def test_plot_data_reads_the_report():
    data = plot_data(SearchReport.from_json(report()))
    assert data.knob == "gpu_memory_utilization"
    assert [(p.x, p.y, p.outcome, p.measured) for p in data.points] == [
        (0.95, 24880.0, "oom", True), (0.9, 15872.0, "ok", True), (0.92, 20000.0, "timeout", False)]
    slope, intercept = data.line
    assert abs(slope - (24880 - 15872) / 0.05) < 1e-6 and abs(slope * 0.9 + intercept - 15872) < 1e-6
    assert data.cap == 0.95 and data.fit == (0.9, 15872.0) and data.model_max == 131072
    assert data.concurrency[1] == (2, 31712)


def test_one_point_and_the_device_total_give_the_line():
    single = report()
    single["trials"], single["fit"] = single["trials"][:1], None
    slope, _ = plot_data(SearchReport.from_json(single)).line
    assert abs(slope - 24880 / 3.04 * 21.96) < 1e-6  # tokens per unit of utilization


def test_kv_bytes_searches_are_drawn_against_gib():
    data = plot_data(SearchReport.from_json(report_json([_trial(1, {"kv_cache_memory_bytes": 2 * GIB}, "ok", 4096,
                                                                {"num_blocks": 33, "block_size": 128})])))
    assert data.knob == "kv_cache_memory_bytes" and data.points[0].x == 2.0 and data.points[0].y == 4224.0
    assert data.line == (2112.0, 0.0)


def vllm_fit(*args, env=None):
    return subprocess.run([sys.executable, "-m", "vllm_fit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_plot_writes_svg_and_png(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report()))
    for suffix, magic in ((".svg", b"<?xml"), (".png", b"\x89PNG")):
        done = vllm_fit("plot", path, "--out", tmp_path / ("p" + suffix))
        assert done.returncode == 0, done.stderr
        assert (tmp_path / ("p" + suffix)).read_bytes().startswith(magic)
    assert "fit" in (tmp_path / "p.svg").read_text() and "cap 0.95" in (tmp_path / "p.svg").read_text()


def test_plot_without_matplotlib_is_an_environment_problem(tmp_path):
    blocker = tmp_path / "block" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report()))
    env = dict(__import__("os").environ, PYTHONPATH=str(tmp_path / "block"))
    done = vllm_fit("plot", path, "--out", tmp_path / "p.svg", env=env)
    assert done.returncode == 3 and "vllm-fit[plot]" in done.stderr and done.stderr.count("\n") == 1


def test_batch_writes_a_picture_per_entry_and_summary_html(fake_world, fake_model, tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models:\n  - {model: '%s', name: a, kv_cache_memory: 1GiB}\n" % fake_model)
    done = vllm_fit("batch", fleet, "--out-dir", tmp_path / "out", env=fake_world())
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / "out" / "index.json").read_text())["entries"][0]
    assert entry["plot"] == "plots/a.svg" and entry["plot_problem"] is None
    assert (tmp_path / "out" / "plots" / "a.svg").read_text().startswith("<?xml")
    page = (tmp_path / "out" / "summary.html").read_text()
    assert '<img src="plots/a.svg"' in page and "<td>a</td>" in page
