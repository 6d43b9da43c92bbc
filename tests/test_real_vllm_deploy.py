"""Deployment files on real vLLM (CPU backend, the tiny model): `verify` launches what each server of a
Kubernetes Deployment, a production-stack values file, a compose file, a shell script (`docker run`) and a
Dockerfile runs, and serves the full
request; and the nightly flow, search -> apply -> verify, proves the manifest the fit was written into.

40 blocks of 64 KiB hold one sequence of at most 39 x 128 = 4992 tokens (one block is the null block).
"""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.vllm

K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {name: tiny}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.32.0
          command: ["/bin/sh", "-c"]
          args:
            - |
              echo starting
              exec vllm serve /models/tiny \\
                --kv-cache-memory-bytes 2621440 --enforce-eager \\
                "$@"
            - sh
            - --max-model-len=3000
            - --served-model-name=tiny
"""
HELM = """servingEngineSpec:
  modelSpec:
    - name: tiny
      repository: vllm/vllm-openai
      tag: v0.32.0
      modelURL: /models/tiny
      vllmConfig:
        maxModelLen: 2048
        extraArgs: ["--kv-cache-memory-bytes", "2621440", "--enforce-eager"]
"""
COMPOSE = """services:
  tiny:
    image: vllm/vllm-openai:latest
    command: >
      /models/tiny
      --max-model-len 1024
      --kv-cache-memory-bytes 2621440
      --enforce-eager
"""

SCRIPT = """#!/bin/bash
LEN=1536
docker run --rm --gpus all -v ./models:/models vllm/vllm-openai:v0.32.0 \\
  /models/tiny --max-model-len "$LEN" --kv-cache-memory-bytes 2621440 --enforce-eager
"""
DOCKERFILE = """FROM vllm/vllm-openai:v0.32.0
ENV LEN=1280
ENTRYPOINT vllm serve /models/tiny --max-model-len $LEN --kv-cache-memory-bytes 2621440 --enforce-eager
"""


def served_env(real_env):
    env = dict(real_env)
    env.pop("VLLM_FIT_VIA")  # verify serves: the product's default
    return env


def run(vllm_python, env, cwd, *args, timeout=900):
    return subprocess.run([vllm_python, "-m", "vllm_fit", *[str(a) for a in args]], env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=timeout)


def test_verify_launches_what_each_kind_of_deployment_runs(vllm_python, tiny_model, real_env, tmp_path):
    files = (("k8s.yaml", K8S), ("values.yaml", HELM), ("compose.yaml", COMPOSE), ("serve.sh", SCRIPT),
             ("Dockerfile", DOCKERFILE))
    for name, text in files:
        (tmp_path / name).write_text(text)
    done = run(vllm_python, served_env(real_env), tmp_path, "verify", *[name for name, _ in files],
               "--map-path", "/models/tiny=%s" % tiny_model, "--report", "verify.json", "--junit", "verify.xml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = json.loads((tmp_path / "verify.json").read_text())["verdicts"]
    assert [v["status"] for v in verdicts] == ["ok"] * 5
    served = [v["trial"]["request"]["total_tokens"] for v in verdicts]
    assert served == [3000, 2048, 1024, 1536, 1280]  # each server's own max-model-len, as its runtime passes it
    assert "spec.template.spec.containers[0] (vllm, command 2 of the script)" in verdicts[0]["config"]
    assert "servingEngineSpec.modelSpec[0] (tiny)" in verdicts[1]["config"]
    assert "serve.sh, line 3" in verdicts[3]["config"] and "Dockerfile, line 3" in verdicts[4]["config"]
    assert (tmp_path / "verify.xml").read_text().count("<testcase") == 5


def test_verify_refuses_a_container_path_it_cannot_map(vllm_python, real_env, tmp_path):
    (tmp_path / "k8s.yaml").write_text(K8S)
    done = run(vllm_python, served_env(real_env), tmp_path, "verify", "k8s.yaml", timeout=120)
    assert done.returncode == 2 and "--map-path /models/tiny=DIR" in done.stderr and "trial" not in done.stdout


def test_nightly_flow_search_apply_verify_proves_the_manifest(vllm_python, tiny_model, real_env, tmp_path):
    """The fit found by a served search is written into the compose file and the Deployment; verify then
    launches the manifests as they run and serves the fitted length."""
    env = served_env(real_env)
    for name, text in (("k8s.yaml", K8S), ("compose.yaml", COMPOSE)):
        (tmp_path / name).write_text(text.replace("/models/tiny", str(tiny_model)))
    search = run(vllm_python, env, tmp_path, "search", "--model", tiny_model, "--kv-cache-memory", "2560KiB",
                 "--granularity", "1", "--engine-arg", "enforce_eager=true", "--out", "fit.yaml")
    assert search.returncode == 0, search.stderr[-3000:]
    applied = run(vllm_python, env, tmp_path, "apply", "fit.yaml", "--to", "k8s.yaml", "compose.yaml", timeout=120)
    assert applied.returncode == 0, applied.stderr
    assert "--max-model-len=4992" in (tmp_path / "k8s.yaml").read_text()
    assert "--max-model-len 4992" in (tmp_path / "compose.yaml").read_text()
    done = run(vllm_python, env, tmp_path, "verify", "k8s.yaml", "compose.yaml", "--report", "v.json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = json.loads((tmp_path / "v.json").read_text())["verdicts"]
    assert [v["trial"]["request"]["total_tokens"] for v in verdicts] == [4992, 4992]

