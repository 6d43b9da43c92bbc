"""`batch`, `merge`, `compare` and `verify`, and the cache and journal under them, on the fake GPU.

TEST DOUBLE: the fakegpu's vLLM and NVML (tests/fakegpu) make each trial take a fraction of a second, so
the fleet mechanics (cache, journal, SIGKILL and resume, shards) are exercised in depth here; the
same flows run once on real vLLM in test_real_vllm_fleet.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import default_signals

FLEET = """
defaults:
  granularity: 256
  retry_wait: 0.5
models:
  - {model: MODEL, name: a, kv_cache_memory: 1GiB}
  - {model: MODEL, name: b, kv_cache_memory: 3GiB}
  - {model: MODEL, name: c, target_len: 32768}
"""


def vllm_fit(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "vllm_fit"] + [str(a) for a in args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def write_fleet(tmp_path, model, text=FLEET):
    path = tmp_path / "fleet.yaml"
    path.write_text(text.replace("MODEL", str(model)))
    return path


def index_of(out):
    return {e["name"]: e for e in json.loads((out / "index.json").read_text())["entries"]}


def answers(index):
    """Each entry's fit without the request's wall time (a measurement that differs run to run)."""
    fits = {}
    for name, entry in index.items():
        fit = json.loads(json.dumps(entry["fit"]))
        if fit and fit.get("request"):
            fit["request"].pop("seconds", None)
        fits[name] = fit
    return fits


def bodies(out):
    """Each config without its comment lines (they hold timestamps)."""
    return {p.name: [line for line in p.read_text().splitlines() if not line.startswith("#")]
            for p in sorted((out / "configs").glob("*.yaml"))}


def test_batch_writes_configs_index_summary_junit_and_caches(fake_world, fake_model, tmp_path):
    env = fake_world()
    fleet = write_fleet(tmp_path, fake_model)
    done = vllm_fit(env, "batch", fleet, "--out-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    index = index_of(out)
    assert {n: e["fit"]["max_model_len"] for n, e in index.items()} == {"a": 7936, "b": 24320, "c": 32768}
    assert index["c"]["fit"]["gpu_memory_utilization"] == 0.26
    for name, entry in index.items():
        config = yaml.safe_load((out / entry["config"]).read_text())
        assert config["max-model-len"] == entry["fit"]["max_model_len"] and entry["launches"] >= 1
        assert json.loads((out / entry["report"]).read_text())["fit"] == entry["fit"]
        assert "| %s | %s |" % (name, entry["fit"]["max_model_len"]) in (out / "summary.md").read_text()
    junit = (out / "junit.xml").read_text()
    assert 'tests="3" failures="0" errors="0"' in junit and junit.count("<testcase") == 3

    again = vllm_fit(env, "batch", fleet, "--out-dir", tmp_path / "again")
    assert again.returncode == 0, again.stderr
    assert all(e["launches"] == 0 and e["cached"] for e in index_of(tmp_path / "again").values())
    assert bodies(tmp_path / "again") == bodies(out)
    forced = vllm_fit(env, "batch", fleet, "--out-dir", tmp_path / "forced", "--force")
    assert forced.returncode == 0, forced.stderr
    assert all(e["launches"] >= 1 and not e["cached"] for e in index_of(tmp_path / "forced").values())


def test_sigkill_mid_trial_then_resume_repeats_nothing(fake_world, fake_model, tmp_path):
    # b explores on dummy weights, then verifies with the real ones: two trials, the second one killed
    fleet = write_fleet(tmp_path, fake_model, FLEET.replace("kv_cache_memory: 3GiB}",
                                                            "kv_cache_memory: 3GiB, explore_weights: dummy}"))
    reference = tmp_path / "reference"
    assert vllm_fit(dict(fake_world(), VLLM_FIT_CACHE_DIR=str(tmp_path / "ref-cache")), "batch", fleet,
                    "--out-dir", reference).returncode == 0

    env = fake_world(mode="hang_on_start", hang_on_start=3)  # a: 1 start, b: the 2nd of its 2 hangs
    out = tmp_path / "out"
    tool = subprocess.Popen([sys.executable, "-m", "vllm_fit", "batch", str(fleet), "--out-dir", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journals = Path(env["VLLM_FIT_CACHE_DIR"]) / "journals"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not ((out / "index.json").exists() and any(  # a is done, b journaled
            len(p.read_text().splitlines()) >= 2 for p in journals.glob("*.jsonl"))):
        time.sleep(0.1)
    time.sleep(1.0)  # b's second trial is now hanging
    trial = [p.pid for p in psutil.Process(tool.pid).children(recursive=True)]
    assert trial, "no trial running"
    tool.send_signal(signal.SIGKILL)
    tool.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                              for p in trial):
        time.sleep(0.2)
    assert not [p for p in trial if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not list(out.rglob("*.tmp"))
    if (out / "index.json").exists():  # rewritten after each entry: only finished entries, never a torn file
        partial = json.loads((out / "index.json").read_text())
        assert all(entry["status"] in ("fit", "no_fit", "unproven", "error") for entry in partial["entries"])

    resumed = vllm_fit(env, "batch", fleet, "--out-dir", out)
    assert resumed.returncode == 0, resumed.stderr
    index = index_of(out)
    assert index["a"]["cached"] and index["a"]["launches"] == 0
    assert index["b"]["resumed_trials"] == 1 and index["b"]["launches"] == 1 and index["b"]["trials"] == 2
    assert bodies(out) == bodies(reference)
    assert answers(index) == answers(index_of(reference))


def test_shards_merge_into_the_unsharded_run(fake_world, fake_model, tmp_path):
    env = fake_world()
    fleet = write_fleet(tmp_path, fake_model)
    assert vllm_fit(env, "batch", fleet, "--out-dir", tmp_path / "all").returncode == 0
    for i in (1, 2):
        assert vllm_fit(env, "batch", fleet, "--out-dir", tmp_path / ("s%d" % i), "--shard", "%d/2" % i).returncode == 0
    merged = vllm_fit(env, "merge", tmp_path / "s1", tmp_path / "s2", "--out-dir", tmp_path / "merged")
    assert merged.returncode == 0, merged.stderr
    whole, parts = index_of(tmp_path / "all"), index_of(tmp_path / "merged")
    assert answers(parts) == answers(whole)
    assert bodies(tmp_path / "merged") == bodies(tmp_path / "all")
    assert (tmp_path / "merged" / "junit.xml").read_text().count("<testcase") == 3
    twice = vllm_fit(env, "merge", tmp_path / "s1", tmp_path / "s1", "--out-dir", tmp_path / "bad")
    assert twice.returncode == 2 and "more than one shard" in twice.stderr


def test_a_worse_fit_than_the_baseline_is_a_regression(fake_world, fake_model, tmp_path):
    fleet = write_fleet(tmp_path, fake_model)
    assert vllm_fit(fake_world(), "batch", fleet, "--out-dir", tmp_path / "before").returncode == 0
    worse = fake_world(weights_gib=20.0)  # as if a new vLLM needed 6 GiB more
    done = vllm_fit(dict(worse, VLLM_FIT_CACHE_DIR=str(tmp_path / "c2")), "batch", fleet, "--out-dir",
                    tmp_path / "after", "--baseline", tmp_path / "before")
    assert done.returncode == 1
    index = index_of(tmp_path / "after")
    assert index["c"]["status"] == "regressed" and "gpu_memory_utilization rose" in index["c"]["message"]
    assert index["a"]["status"] == "fit"  # a fixed KV size does not care about the weights
    assert 'failures="1"' in (tmp_path / "after" / "junit.xml").read_text()

    compared = vllm_fit(worse, "compare", tmp_path / "before", tmp_path / "after")
    assert compared.returncode == 1  # c lost KV capacity: a regression
    assert "## vllm-fit: 1 of 3 config(s) changed" in compared.stdout
    assert "| c | 32768 |" in compared.stdout and "**util 0.26 → util 0.33**" in compared.stdout


def test_verify_passes_then_fails_when_the_device_shrinks(fake_world, fake_model, tmp_path):
    env = fake_world()
    assert vllm_fit(env, "search", "--model", fake_model, "--out", tmp_path / "fit.yaml").returncode == 0
    ok = vllm_fit(env, "verify", tmp_path / "fit.yaml", "--report", tmp_path / "v.json", "--junit", tmp_path / "v.xml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("OK ")
    verdict = json.loads((tmp_path / "v.json").read_text())["verdicts"][0]
    assert verdict["kv_cache_tokens"] == verdict["recorded_kv_cache_tokens"]

    busy = fake_world(others=[{"pid": 4242, "name": "jupyter", "gib": 30.0}])
    failed = vllm_fit(busy, "verify", tmp_path / "fit.yaml", "--junit", tmp_path / "v.xml")
    assert failed.returncode == 1 and failed.stdout.startswith("FAILED ")
    assert "free_memory_short" in failed.stdout
    assert 'failures="1"' in (tmp_path / "v.xml").read_text()


def test_the_same_search_twice_at_once_is_refused(fake_world, fake_model, tmp_path):
    env = fake_world(mode="hang_start")
    args = [sys.executable, "-m", "vllm_fit", "search", "--model", str(fake_model), "--gpu-memory-utilization",
            "0.9", "--max-len", "4096"]
    first = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        locks = Path(env["VLLM_FIT_CACHE_DIR"]) / "journals"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(locks.glob("*.lock")):
            time.sleep(0.1)
        time.sleep(1.0)
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 3 and "another vllm-fit is running this same search" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 130


def test_an_entry_with_a_broken_model_config_is_an_entry_result(fake_world, fake_model, tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{broken")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("defaults: {kv_cache_memory: 1GiB}\nmodels:\n  - {model: '%s', name: bad}\n"
                     "  - {model: '%s', name: good}\n" % (broken, fake_model))
    done = vllm_fit(fake_world(), "batch", fleet, "--out-dir", tmp_path / "out")
    assert done.returncode == 1, done.stderr
    entries = {e["name"]: e for e in json.loads((tmp_path / "out" / "index.json").read_text())["entries"]}
    assert entries["bad"]["status"] == "error" and "config.json" in entries["bad"]["message"]
    assert entries["good"]["status"] == "fit"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_batch_interrupted_in_its_first_entry_writes_its_index(sig, fake_world, fake_model, tmp_path):
    """A closed terminal (SIGHUP) or SIGTERM during the first entry: exit 130, the index marks it interrupted."""
    env = fake_world(mode="hang_start")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("defaults: {kv_cache_memory: 1GiB}\nmodels:\n  - {model: '%s', name: first}\n"
                     "  - {model: '%s', name: second}\n" % (fake_model, fake_model))
    tool = subprocess.Popen([sys.executable, "-m", "vllm_fit", "batch", str(fleet), "--out-dir", str(tmp_path / "out")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    locks = Path(env["VLLM_FIT_CACHE_DIR"]) / "journals"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(locks.glob("*.lock")):
        time.sleep(0.1)
    time.sleep(1.0)  # the first trial is running (the fake engine hangs at start)
    tool.send_signal(sig)
    _, err = tool.communicate(timeout=60)
    assert tool.returncode == 130, err
    entries = json.loads((tmp_path / "out" / "index.json").read_text())["entries"]
    assert [(e["name"], e["status"]) for e in entries] == [("first", "interrupted")]
