"""`vllm-fit plot` and the batch pictures: the numbers drawn come from the report, the files are real."""

from __future__ import annotations

import json
import subprocess
import sys

from vllm_fit.export.plot import plot_data

GIB = 1 << 30


def report(**extra):
    trials = [
        {"index": 1, "engine_args": {"max_model_len": 131072, "gpu_memory_utilization": 0.95}, "outcome": "oom",
         "max_model_len": 131072, "capacity": {"kv_cache_tokens": 24880, "available_kv_gib": 3.04,
                                               "total_memory_gib": 21.96}},
        {"index": 2, "engine_args": {"max_model_len": 15856, "gpu_memory_utilization": 0.9}, "outcome": "ok",
         "max_model_len": 15856, "capacity": {"kv_cache_tokens": 15872}},
        {"index": 3, "engine_args": {"max_model_len": 20000, "gpu_memory_utilization": 0.92}, "outcome": "timeout",
         "max_model_len": 20000, "capacity": {}},
    ]
    data = {"trials": trials, "search": {"utilization_cap": 0.95, "model_derived_max_len": 131072, "model": "m"},
            "fit": {"max_model_len": 15856, "kv_cache_tokens": 15872,
                    "engine_args": {"gpu_memory_utilization": 0.9, "max_model_len": 15856}}}
    data.update(extra)
    return data


def test_plot_data_reads_the_report():
    data = plot_data(report())
    assert data.knob == "gpu_memory_utilization"
    assert [(p.x, p.y, p.outcome, p.measured) for p in data.points] == [
        (0.95, 24880.0, "oom", True), (0.9, 15872.0, "ok", True), (0.92, 20000.0, "timeout", False)]
    slope, intercept = data.line
    assert abs(slope - (24880 - 15872) / 0.05) < 1e-6 and abs(slope * 0.9 + intercept - 15872) < 1e-6
    assert data.cap == 0.95 and data.fit == (0.9, 15872.0) and data.model_max == 131072
    assert data.concurrency[1] == (2, 31712)


def test_one_point_and_the_device_total_give_the_line():
    single = report()
    single["trials"] = single["trials"][:1]
    slope, _ = plot_data(single).line
    assert abs(slope - 24880 / 3.04 * 21.96) < 1e-6  # tokens per unit of utilization


def test_kv_bytes_searches_are_drawn_against_gib():
    data = plot_data({"trials": [{"index": 1, "outcome": "ok", "max_model_len": 4096,
                                  "engine_args": {"kv_cache_memory_bytes": 2 * GIB},
                                  "capacity": {"num_blocks": 33, "block_size": 128}}]})
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
