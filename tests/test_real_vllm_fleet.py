"""The fleet flows on real vLLM (CPU backend, the tiny model): batch, cache, SIGKILL and resume,
shards and merge, verify. Exact answers from the CPU fit rule: (blocks - 1) x 128 tokens."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import BLOCK_BYTES

pytestmark = pytest.mark.vllm

FLEET = """
defaults:
  engine_args: {enforce_eager: true}
  granularity: 128
models:
  - {model: MODEL, name: a, kv_cache_memory: %d}
  - {model: MODEL, name: b, kv_cache_memory: %d, granularity: 256, explore_weights: dummy}
  - {model: MODEL, name: c, kv_cache_memory: %d}
""" % (33 * BLOCK_BYTES, 40 * BLOCK_BYTES, 57 * BLOCK_BYTES)
EXPECTED = {"a": 4096, "b": 4864, "c": 7168}


def vllm_fit(python, env, *args):
    return subprocess.run([python, "-m", "vllm_fit"] + [str(a) for a in args], env=env, capture_output=True,
                          text=True, timeout=900)


def index_of(out):
    return {e["name"]: e for e in json.loads((out / "index.json").read_text())["entries"]}


def bodies(out):
    return {p.name: [line for line in p.read_text().splitlines() if not line.startswith("#")]
            for p in sorted((out / "configs").glob("*.yaml"))}


@pytest.fixture
def fleet(tmp_path, tiny_model):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET.replace("MODEL", str(tiny_model)))
    return path


def test_fleet_batch_cache_shards_merge_and_force(vllm_python, real_env, fleet, tmp_path):
    done = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    index = index_of(out)
    assert {n: e["fit"]["max_model_len"] for n, e in index.items()} == EXPECTED
    assert {n: e["fit"]["request"]["total_tokens"] for n, e in index.items()} == EXPECTED
    # each KV size's length is predicted from its pages and proven by its pool: one launch; b explores on
    # dummy weights, then verifies with the real ones
    assert [e["launches"] for e in index.values()] == [1, 2, 1]
    for name, length in EXPECTED.items():
        assert "max-model-len: %d" % length in (out / "configs" / (name + ".yaml")).read_text()
        assert "| %s | %d |" % (name, length) in (out / "summary.md").read_text()
    assert 'tests="3" failures="0" errors="0"' in (out / "junit.xml").read_text()

    again = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", tmp_path / "again")
    assert again.returncode == 0 and all(e["launches"] == 0 for e in index_of(tmp_path / "again").values())
    assert bodies(tmp_path / "again") == bodies(out)

    for i in (1, 2):
        part = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", tmp_path / ("s%d" % i), "--shard",
                        "%d/2" % i)
        assert part.returncode == 0, part.stderr
    assert vllm_fit(vllm_python, real_env, "merge", tmp_path / "s1", tmp_path / "s2", "--out-dir",
                    tmp_path / "merged").returncode == 0
    assert {n: e["fit"] for n, e in index_of(tmp_path / "merged").items()} == {n: e["fit"] for n, e in index.items()}
    assert bodies(tmp_path / "merged") == bodies(out)

    only_a = tmp_path / "only-a.yaml"  # the same entry a, alone: same fingerprint, so cached
    only_a.write_text("\n".join(line for line in fleet.read_text().splitlines()
                                if "name: b" not in line and "name: c" not in line))
    forced = vllm_fit(vllm_python, real_env, "batch", only_a, "--out-dir", tmp_path / "forced", "--force")
    assert forced.returncode == 0 and index_of(tmp_path / "forced")["a"]["launches"] == 1


def test_sigkill_mid_trial_then_rerun(vllm_python, real_env, fleet, tmp_path):
    out = tmp_path / "out"
    tool = subprocess.Popen([vllm_python, "-m", "vllm_fit", "batch", str(fleet), "--out-dir", str(out)],
                            env=real_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journals = Path(real_env["VLLM_FIT_CACHE_DIR"]) / "journals"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # a done, b's dummy trial journaled: its real verification starts
        if (out / "index.json").exists() and journals.exists() and any(
                len(p.read_text().splitlines()) >= 2 for p in journals.glob("*.jsonl")):
            break
        time.sleep(0.2)
    time.sleep(3)
    trial = [p.pid for p in psutil.Process(tool.pid).children(recursive=True)]
    assert trial, "no trial was running"
    tool.send_signal(signal.SIGKILL)
    tool.wait(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and [p for p in trial if psutil.pid_exists(p)]:
        time.sleep(0.2)
    assert not [p for p in trial if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not list(out.rglob("*.tmp"))
    # index.json is rewritten after each entry: after the kill it holds exactly the finished entry a
    assert [e["name"] for e in json.loads((out / "index.json").read_text())["entries"]] == ["a"]
    assert index_fits_before_kill(out) == {"a": 4096}

    rerun = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", out)
    assert rerun.returncode == 0, rerun.stderr
    index = index_of(out)
    assert {n: e["fit"]["max_model_len"] for n, e in index.items()} == EXPECTED
    assert index["a"]["launches"] == 0 and index["a"]["cached"]
    assert (index["b"]["resumed_trials"], index["b"]["launches"], index["b"]["trials"]) == (1, 1, 2)
    assert index["c"]["launches"] == 1


def index_fits_before_kill(out):
    """Configs written before the kill: whole files only, for the entries that had finished."""
    return {p.stem: int(next(line for line in p.read_text().splitlines() if line.startswith("max-model-len"))
                        .split(":")[1]) for p in (out / "configs").glob("*.yaml")}


def test_verify_passes_fresh_and_fails_when_the_budget_shrinks(vllm_python, real_env, tiny_model, tmp_path):
    config = tmp_path / "b.yaml"
    done = vllm_fit(vllm_python, real_env, "search", "--model", tiny_model, "--kv-cache-memory", 40 * BLOCK_BYTES,
                    "--granularity", 256, "--engine-arg", "enforce_eager=true", "--out", config)
    assert done.returncode == 0, done.stderr
    ok = vllm_fit(vllm_python, real_env, "verify", config)
    assert ok.returncode == 0 and ok.stdout.startswith("OK "), ok.stdout + ok.stderr

    text = config.read_text()
    smaller = tmp_path / "b-39-blocks.yaml"  # still starts (4864 needs 38 + 1 blocks), capacity -2.5%
    smaller.write_text(text.replace(str(40 * BLOCK_BYTES), str(39 * BLOCK_BYTES)))
    dropped = vllm_fit(vllm_python, real_env, "verify", smaller, "--tolerance", "0.01")
    assert dropped.returncode == 1 and "KV capacity dropped from 5120 to 4992" in dropped.stdout
    too_small = tmp_path / "b-38-blocks.yaml"
    too_small.write_text(text.replace(str(40 * BLOCK_BYTES), str(38 * BLOCK_BYTES)))
    refused = vllm_fit(vllm_python, real_env, "verify", too_small)
    assert refused.returncode == 1 and "no longer starts and serves: kv_too_small" in refused.stdout
