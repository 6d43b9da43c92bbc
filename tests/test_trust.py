"""Secrets are never written, and a SIGKILLed run leaves neither a trial process nor a work folder.

TEST DOUBLE: the searches run on the fakegpu's vLLM (tests/fakegpu), which logs its non-default
arguments as vLLM 0.10+ does (secrets included) and, on request, environment variables; the point
is what vllm-fit writes around it, which is the real product path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from vllm_fit.redact import REDACTED, is_secret_name, public_args, scrub, secret_values

PLANTED = {
    "HF_TOKEN": "hf_plantedHubToken0001",
    "AWS_SECRET_ACCESS_KEY": "plantedAwsSecret0002",
    "AZURE_OPENAI_KEY": "plantedAzureKey0003",
    "GITHUB_PAT": "ghp_plantedPat0004",
}
ENGINE_SECRET = "plantedEngineArgToken0005"


@pytest.mark.parametrize("name", ["HF_TOKEN", "hf_token", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "AZURE_OPENAI_KEY", "GITHUB_PAT", "api-key", "db_password", "apiKey",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "HUGGING_FACE_HUB_TOKEN", "authorization",
                                  "DB_PWD"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_num_batched_tokens", "tokenizer", "tokenizer_mode", "keyboard",
                                  "patch_size", "enforce_eager", "path", "author", "max_model_len", "PWD",
                                  "OLDPWD"])
def test_names_that_are_not_secret(name):
    assert not is_secret_name(name)


def test_public_args_and_scrub():
    args = {"hf_token": ENGINE_SECRET, "enforce_eager": True}
    assert public_args(args) == {"hf_token": REDACTED, "enforce_eager": True}
    assert secret_values(args) == [ENGINE_SECRET]
    assert scrub("token=%s!" % ENGINE_SECRET, [ENGINE_SECRET]) == "token=***!"
    assert secret_values({"api_key": "abc"}) == []  # too short to scrub from free text


def vllm_fit(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "vllm_fit", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _files_under(*roots: Path):
    for root in roots:
        if root.is_file():
            yield root
        for folder, _, names in os.walk(root):
            for name in names:
                yield Path(folder) / name


def test_no_planted_secret_in_any_written_file(fake_world, fake_model, tmp_path):
    env = dict(fake_world(echo_env=sorted(PLANTED)), **PLANTED)
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    searched = vllm_fit(env, "search", "--model", fake_model, "--engine-arg", "hf_token=%s" % ENGINE_SECRET,
                        "--work-dir", work, "--out", out / "fit.yaml", "--report", out / "fit.json")
    assert searched.returncode == 0, searched.stderr
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("defaults: {engine_args: {hf_token: %s}}\nmodels:\n  - {model: '%s', name: a,"
                     " kv_cache_memory: 1GiB}\n" % (ENGINE_SECRET, fake_model))
    batched = vllm_fit(env, "batch", fleet, "--out-dir", out / "batch")
    assert batched.returncode == 0, batched.stderr
    verified = vllm_fit(env, "verify", out / "fit.yaml", "--report", out / "verify.json", "--junit",
                        out / "verify.xml")
    assert verified.returncode == 0, verified.stderr

    # a fresh world: the next search's 2nd start hangs
    journal = _interrupted_search_journal(dict(fake_world(echo_env=sorted(PLANTED), mode="hang_on_start",
                                                          hang_on_start=2, kv_bytes_per_token=1 << 20), **PLANTED),
                                          fake_model)
    assert ENGINE_SECRET not in journal.read_text() and REDACTED in journal.read_text()
    written = list(_files_under(out, work, Path(env["VLLM_FIT_CACHE_DIR"]), tmp_path / "tmp"))
    kinds = {p.name for p in written}
    assert {"fit.yaml", "fit.json", "index.json", "verify.json", "spec.json", "result.json"} <= kinds
    assert any(p.suffix == ".jsonl" for p in written) and any(p.name.endswith(".log") for p in written)
    assert not any(p.suffix == ".lock" for p in written), "lock files are removed on release"
    for path in written:
        text = path.read_bytes().decode("utf-8", errors="replace")
        for secret in [*PLANTED.values(), ENGINE_SECRET]:
            assert secret not in text, "%s holds a planted secret" % path
    for stream in (searched, batched, verified):
        for secret in [*PLANTED.values(), ENGINE_SECRET]:
            assert secret not in stream.stdout + stream.stderr
    log = next(p for p in written if p.name.endswith(".log") and "non-default args" in p.read_text())
    assert REDACTED in log.read_text()  # the trial's log was scrubbed, not left out


def _interrupted_search_journal(env, model) -> Path:
    """Run a search whose second trial hangs, stop it with SIGTERM, return the journal it keeps."""
    args = [sys.executable, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg",
            "hf_token=%s" % ENGINE_SECRET, "--strategy", "bisect"]
    tool = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journals = Path(env["VLLM_FIT_CACHE_DIR"]) / "journals"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(journals.glob("*.jsonl")):
        time.sleep(0.2)
    tool.send_signal(signal.SIGTERM)
    assert tool.wait(timeout=60) == 130
    return next(journals.glob("*.jsonl"))


def test_sigkill_leaves_no_trial_and_the_next_run_removes_its_folder(fake_world, fake_model, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(fake_world(mode="hang_start"), TMPDIR=str(temp))
    args = [sys.executable, "-m", "vllm_fit", "search", "--model", str(fake_model), "--gpu-memory-utilization",
            "0.9", "--max-len", "4096", "--no-cache"]
    tool = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    trials = []
    while time.monotonic() < deadline and not trials:
        trials = [p for p in psutil.Process(tool.pid).children(recursive=True) if "probe.py" in " ".join(p.cmdline())]
        time.sleep(0.2)
    assert trials, "no trial started"
    group = trials[0].children(recursive=True) + trials
    assert list(temp.glob("vllm-fit-*"))
    tool.send_signal(signal.SIGKILL)
    tool.wait(timeout=30)
    _, alive = psutil.wait_procs(group, timeout=20)
    assert not alive, "trial processes outlived the tool: %s" % alive

    rerun = vllm_fit(dict(fake_world(), TMPDIR=str(temp)), "search", "--model", fake_model,
                     "--gpu-memory-utilization", "0.9", "--max-len", "4096", "--no-cache")
    assert rerun.returncode == 0, rerun.stderr
    assert not list(temp.glob("vllm-fit-*")), "a stale work folder survived the next run"


def test_work_dirs_of_two_runs_do_not_collide(fake_world, fake_model, tmp_path):
    env = fake_world()
    work = tmp_path / "work"
    for _ in range(2):
        done = vllm_fit(env, "search", "--model", fake_model, "--gpu-memory-utilization", "0.9", "--max-len",
                        "4096", "--no-cache", "--work-dir", work)
        assert done.returncode == 0, done.stderr
    runs = sorted(work.glob("run-*"))
    assert len(runs) == 2 and all(list(run.glob("trial-*/result.json")) for run in runs)
    assert json.loads(next(runs[0].glob("trial-*/result.json")).read_text())
