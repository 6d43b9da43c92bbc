"""`vllm-fit apply` (issue 23): fits written into the deployment files that run them, byte for byte
elsewhere, gated in CI by --check. Fixtures: the example deployment repo (examples/deploy-repo: a
Deployment with args as a block list, a LeaderWorkerSet whose leader runs a shell string with `=`
flags, production-stack values with two models, a compose service) in the shapes public repos use."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from simulator.harness import environment
from simulator.worlds import config_json, world

from vllm_fit import cli

REPO = ROOT / "examples" / "deploy-repo"
FILES = ["k8s/llama.yaml", "helm/values.yaml", "compose.yaml"]


def fit_yaml(path: Path, model: str, length: int, util: float = 0.93, name: str = "", vllm: str = "0.32.0",
             gpu: str = "NVIDIA H100 80GB HBM3", **extra) -> Path:
    lines = ["# vllm-fit: 0.2.0", "# vllm: %s" % vllm, "# device: %s, 81559 MiB, 80000 MiB free" % gpu]
    if name:
        lines.append("# name: %s" % name)
    lines += ["model: %s" % model, "max-model-len: %d" % length, "gpu-memory-utilization: %s" % util]
    lines += ["%s: %s" % (key.replace("_", "-"), value) for key, value in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy)
    return copy


def run(*argv, cwd: Path):
    return subprocess.run([sys.executable, "-m", "vllm_fit", "apply", *map(str, argv)], cwd=str(cwd),
                          capture_output=True, text=True, timeout=120)


def changed_lines(before: str, after: str):
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    return [(a, b) for a, b in zip(old, new) if a != b]


def test_each_file_kind_changes_only_the_fitted_values(repo):
    fit = fit_yaml(repo / "fit.yaml", "meta-llama/Llama-3.1-8B-Instruct", 57344, 0.93)
    before = {name: (repo / name).read_text() for name in FILES}
    done = run(fit, *[arg for name in FILES for arg in ("--to", name)], cwd=repo)
    assert done.returncode == 0, done.stderr
    after = {name: (repo / name).read_text() for name in FILES}
    assert changed_lines(before["k8s/llama.yaml"], after["k8s/llama.yaml"]) == [
        ('            - "8192"          # fitted nightly', '            - "57344"          # fitted nightly'),
        ('            - "0.90"', '            - "0.93"')]
    assert changed_lines(before["helm/values.yaml"], after["helm/values.yaml"]) == [
        ("        maxModelLen: 8192        # fitted nightly", "        maxModelLen: 57344        # fitted nightly"),
        ("        gpuMemoryUtilization: 0.9", "        gpuMemoryUtilization: 0.93")]
    assert changed_lines(before["compose.yaml"], after["compose.yaml"]) == [
        ('      - "8192"', '      - "57344"'), ('      - "0.9"', '      - "0.93"')]
    assert "+            - \"57344\"" in done.stdout  # the unified diff


def test_an_unchanged_fit_leaves_every_file_byte_identical_and_check_passes(repo):
    fit = fit_yaml(repo / "fit.yaml", "meta-llama/Llama-3.1-8B-Instruct", 8192, 0.9)
    before = {name: (repo / name).read_bytes() for name in FILES}
    done = run(fit, *[arg for name in FILES for arg in ("--to", name)], "--check", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert {name: (repo / name).read_bytes() for name in FILES} == before


def test_check_is_a_ci_gate(repo):
    fit = fit_yaml(repo / "fit.yaml", "Qwen/Qwen2.5-7B-Instruct", 24576, 0.9)
    before = (repo / "k8s/llama.yaml").read_bytes()
    done = run(fit, "--to", "k8s/llama.yaml", "--check", cwd=repo)
    assert done.returncode == 1 and "--max-model-len=24576" in done.stdout
    assert (repo / "k8s/llama.yaml").read_bytes() == before  # --check changes nothing
    assert run(fit, "--to", "k8s/llama.yaml", cwd=repo).returncode == 0
    text = (repo / "k8s/llama.yaml").read_text()
    assert "vllm serve Qwen/Qwen2.5-7B-Instruct --served-model-name qwen-7b --max-model-len=24576" in text
    assert run(fit, "--to", "k8s/llama.yaml", "--check", cwd=repo).returncode == 0


def test_a_setting_the_server_lacks_is_added_in_its_style(repo):
    fit = fit_yaml(repo / "fit.yaml", "meta-llama/Llama-3.1-8B-Instruct", 8192, 0.9, max_num_seqs=4)
    with open(fit, "a") as handle:  # a search with --concurrency 4 says so: only then is max-num-seqs the fit's
        handle.write("# concurrency: 4 full-length sequences at once\n")
    done = run(fit, "--to", "k8s/llama.yaml", "--to", "helm/values.yaml", "--to", "compose.yaml", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert '            - "--port=8000"\n            - "--max-num-seqs"\n            - "4"\n' in \
        (repo / "k8s/llama.yaml").read_text()
    assert "        dtype: \"bfloat16\"\n        maxNumSeqs: 4\n" in (repo / "helm/values.yaml").read_text()
    compose = (repo / "compose.yaml").read_text()
    assert '      - "0.9"\n      - --max-num-seqs\n      - "4"\n' in compose  # flags plain, as the list's are


def test_a_lower_value_for_another_vllm_or_gpu_is_refused(repo):
    fit = fit_yaml(repo / "fit.yaml", "meta-llama/Llama-3.1-8B-Instruct", 4096, 0.9, vllm="0.31.0")
    done = run(fit, "--to", "k8s/llama.yaml", cwd=repo)
    assert done.returncode == 2 and "runs vLLM 0.32.0, the fit was found on 0.31.0" in done.stderr
    other_gpu = fit_yaml(repo / "l4.yaml", "meta-llama/Llama-3.1-8B-Instruct", 4096, 0.9, gpu="NVIDIA L4")
    done = run(other_gpu, "--to", "k8s/llama.yaml", cwd=repo)
    assert done.returncode == 2 and "asks for NVIDIA-H100-80GB-HBM3" in done.stderr
    assert run(other_gpu, "--to", "k8s/llama.yaml", "--allow-mismatch", cwd=repo).returncode == 0


def test_a_batch_index_applies_each_entry_to_its_server(repo):
    out = repo / "out"
    (out / "configs").mkdir(parents=True)
    fit_yaml(out / "configs" / "llama-8b.yaml", "/models/llama", 65536, 0.92)
    fit_yaml(out / "configs" / "qwen-7b.yaml", "/models/qwen", 16384, 0.92)
    (out / "index.json").write_text(json.dumps({"entries": [
        {"name": "llama-8b", "status": "fit", "config": "configs/llama-8b.yaml"},
        {"name": "qwen-7b", "status": "fit", "config": "configs/qwen-7b.yaml"}]}))
    done = run(out, "--to", "helm/values.yaml", cwd=repo)
    assert done.returncode == 0, done.stderr
    text = (repo / "helm/values.yaml").read_text()
    assert "maxModelLen: 65536        # fitted nightly" in text and "maxModelLen: 16384\n" in text


@pytest.mark.parametrize("files, argv, words", [
    ({"d.yaml": "a: [1, 2\n"}, ["--to", "d.yaml"], "not YAML"),
    ({"d.yaml": "services:\n  x: {image: nginx}\n"}, ["--to", "d.yaml"], "no vLLM server"),
    ({"d.yaml": "services:\n  a: {image: vllm/vllm-openai, command: [--model, m]}\n"
                "  b: {image: vllm/vllm-openai, command: [--model, m]}\n"}, ["--to", "d.yaml"], "matches 2 servers"),
    ({"d.yaml": "x: 1\n"}, ["--to", "link.yaml"], "symlink"),
])
def test_bad_deployment_files_are_refused_unchanged(tmp_path, capsys, monkeypatch, files, argv, words):
    monkeypatch.chdir(tmp_path)
    fit_yaml(tmp_path / "fit.yaml", "m", 1024)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "link.yaml").symlink_to(tmp_path / "d.yaml")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.is_symlink()}
    with pytest.raises(SystemExit) as exited:
        cli.main(["apply", "fit.yaml", *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and words in err and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.is_symlink()} == before


def test_nightly_flow_batch_apply_compare_on_the_simulated_gpu(repo, tmp_path):
    """TEST DOUBLE (tests/fakegpu, an H100 with vLLM 0.32): batch fits two entries, apply writes them into
    the example repo, --check then passes, and compare gives the pull request's body."""
    spec = world("0.32.0", "H100", "llama-8b")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(config_json(spec["model"])))
    world_path = tmp_path / "world.json"
    world_path.write_text(json.dumps(dict(spec, name="nightly")))
    (tmp_path / "fleet.yaml").write_text(
        "defaults: {granularity: 256, max_len: 65536, python: '%s'}\nmodels:\n"
        "  - {name: llama-8b, model: '%s', gpu_memory_utilization: 0.5}\n"
        "  - {name: qwen-7b, model: '%s', gpu_memory_utilization: 0.3}\n"
        % (sys.executable, tmp_path / "model", tmp_path / "model"))
    env = environment(world_path)
    batch = subprocess.run([sys.executable, "-m", "vllm_fit", "batch", str(tmp_path / "fleet.yaml"), "--out-dir",
                            str(tmp_path / "out"), "--no-cache"], env=env, capture_output=True, text=True, timeout=600)
    assert batch.returncode == 0, batch.stderr[-2000:]
    targets = ["--to", "k8s/llama.yaml", "--to", "helm/values.yaml", "--to", "compose.yaml"]
    shutil.copytree(repo, tmp_path / "before")
    applied = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", str(tmp_path / "out"), *targets],
                             cwd=str(repo), env=env, capture_output=True, text=True, timeout=120)
    assert applied.returncode == 0, applied.stderr
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    fits = {entry["name"]: entry["fit"]["max_model_len"] for entry in index["entries"]}
    assert "maxModelLen: %d" % fits["llama-8b"] in (repo / "helm/values.yaml").read_text()
    assert "--max-model-len=%d" % fits["qwen-7b"] in (repo / "k8s/llama.yaml").read_text()
    check = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", str(tmp_path / "out"), *targets, "--check"],
                           cwd=str(repo), env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
    (tmp_path / "committed.json").write_text(json.dumps({"entries": [  # what the repo was fitted with before
        {"name": name, "status": "fit", "fit": {"max_model_len": 8192}} for name in fits]}))
    body = subprocess.run([sys.executable, "-m", "vllm_fit", "compare", str(tmp_path / "committed.json"),
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120)
    assert body.returncode == 0 and "llama-8b" in body.stdout and str(fits["llama-8b"]) in body.stdout
