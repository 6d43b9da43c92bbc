"""`vllm-fit apply` on Dockerfiles whose image starts vLLM: three public ones (tests/data/deploy/dockerfiles,
origins in SOURCES.md) and the forms around them (exec and shell form, ENV, ARG in FROM, stages, comments in
a continuation). What the edited image runs is found without vllm-fit's reader: dockerfile-parse reads the
instructions, the exec form is JSON, the shell form runs in the real sh with recording stubs, and the
argv is parsed by vLLM's own parser (tests/deploy_oracle.py)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import ROOT
from deploy_oracle import RECORD_ENV, STUB, vllm_args, vllm_parse
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_fit.deploy.deployment import read_deployment
from vllm_fit.errors import FitError

DOCKERFILES = ROOT / "tests" / "data" / "deploy" / "dockerfiles"
BODY = "model: %s\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n"


def apply(folder: Path, name: str, model: str, vllm: str = "0.32.0", *extra: str) -> subprocess.CompletedProcess:
    (folder / "fit.yaml").write_text("# vllm: %s\n" % vllm + BODY % model)
    return subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", name, *extra],
                          cwd=str(folder), capture_output=True, text=True, timeout=120)


def image_argv(text: str, entrypoint: List[str], folder: Path) -> List[str]:
    """The argv the built image starts, from dockerfile-parse's reading of the last stage and the base image's
    entrypoint the test names; the shell form run by /bin/sh with the ENV values and recording stubs."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    last: Dict[str, str] = {}
    env: Dict[str, str] = {}
    for item in parser.structure:
        if item["instruction"] == "FROM":
            last, env = {}, dict(env)
        elif item["instruction"] in ("CMD", "ENTRYPOINT"):
            last[item["instruction"]] = item["value"]
    env.update(parser.envs)

    def words(value: str) -> Tuple[List[str], bool]:
        try:
            return json.loads(value), False
        except ValueError:
            return ["/bin/sh", "-c", value], True

    cmd = words(last["CMD"])[0] if "CMD" in last else []
    if "ENTRYPOINT" in last:
        entry, shell = words(last["ENTRYPOINT"])
        argv = entry if shell else entry + cmd
    else:
        argv = entrypoint + cmd
    if argv[:2] != ["/bin/sh", "-c"]:
        return argv
    stubs = folder / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("vllm", "python3", "python"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    record = folder / "record"
    record.write_bytes(b"")
    subprocess.run(argv, env={**env, "PATH": str(stubs), RECORD_ENV: str(record)}, cwd=str(folder),
                   capture_output=True, timeout=60, check=False)
    runs = [r.split("\x1f")[:-1] for r in record.read_bytes().decode().split("\x1e") if r]
    servers = [r for r in runs if vllm_args(r) is not None]
    assert len(servers) == 1, runs
    return servers[0]


SERVE = ["vllm", "serve"]
API_SERVER = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
MIXTRAL = "RedHatAI/Mixtral-8x7B-Instruct-v0.1-FP8"
WRITTEN = [
    ("Dockerfile.mixtral", None, MIXTRAL, "0.32.0", SERVE,
     ["    --max-model-len 8192 \\", "    --gpu-memory-utilization 0.92"],
     ["    --max-model-len 12345 \\", "    --gpu-memory-utilization 0.87"]),
    ("Dockerfile", 'ARG VER=v0.9.2\nFROM vllm/vllm-openai:${VER} AS base\nENV LEN=4096\nFROM base\n# the server\n'
     'CMD ["--model", "org/m", \\\n  # a comment inside\n  "--max-model-len", "4096"]\n', "org/m", "0.9.2",
     API_SERVER, ['  "--max-model-len", "4096"]'],
     ['  "--max-model-len", "12345", "--gpu-memory-utilization", "0.87"]']),
    ("x.Dockerfile", 'FROM python:3.11\nRUN pip install vllm==0.9.2\nENTRYPOINT ["vllm", "serve"]\nCMD ["org/m"]\n',
     "org/m", "0.9.2", [], ['CMD ["org/m"]'],
     ['CMD ["org/m", "--max-model-len", "12345", "--gpu-memory-utilization", "0.87"]']),
    ("Containerfile", "FROM python:3.11\nENV LEN=4096 TP=1\nCMD vllm serve org/m --max-model-len $LEN -tp $TP\n",
     "org/m", "0.32.0", [], ["ENV LEN=4096 TP=1", "CMD vllm serve org/m --max-model-len $LEN -tp $TP"],
     ["ENV LEN=12345 TP=1", "CMD vllm serve org/m --max-model-len $LEN -tp $TP --gpu-memory-utilization 0.87"]),
]


def _write(folder: Path, name: str, text) -> str:
    if text is None:
        shutil.copy(DOCKERFILES / name, folder / name)
    else:
        (folder / name).write_text(text)
    return (folder / name).read_text()


def _changed(before: str, after: str) -> Tuple[List[str], List[str]]:
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    return ([x[1:] for x in lines if x.startswith("-") and not x.startswith("---")],
            [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")])


@pytest.mark.parametrize("name, text, model, vllm, entrypoint, removed, added", WRITTEN, ids=[w[0] for w in WRITTEN])
def test_the_command_the_image_runs_gets_the_fit(tmp_path, name, text, model, vllm, entrypoint, removed, added):
    before = _write(tmp_path, name, text)
    done = apply(tmp_path, name, model, vllm)
    assert done.returncode == 0, done.stderr
    assert _changed(before, (tmp_path / name).read_text()) == (removed, added)


@pytest.mark.vllm
@pytest.mark.parametrize("name, text, model, vllm, entrypoint, removed, added", WRITTEN, ids=[w[0] for w in WRITTEN])
def test_dockerfile_parse_sh_and_vllm_read_the_fit(tmp_path, name, text, model, vllm, entrypoint, removed, added):
    pytest.importorskip("vllm")
    pytest.importorskip("dockerfile_parse")
    before = _write(tmp_path, name, text)
    assert apply(tmp_path, name, model, vllm).returncode == 0
    was = vllm_parse(vllm_args(image_argv(before, entrypoint, tmp_path)))
    now = vllm_parse(vllm_args(image_argv((tmp_path / name).read_text(), entrypoint, tmp_path)))
    assert ((now.model_tag or now.model), now.max_model_len, now.gpu_memory_utilization) == (model, 12345, 0.87)
    changed = ("max_model_len", "gpu_memory_utilization")
    assert {k: v for k, v in vars(now).items() if k not in changed} == \
        {k: v for k, v in vars(was).items() if k not in changed}


@pytest.mark.parametrize("name, model, words", [
    # vLLM's image runs `vllm serve`: this CMD is its arguments, so vLLM would load a model named "python"
    ("Dockerfile.beanstalk", "gpt-4o-mini", "line 11: model python"),
    # v0.4.3's image runs the api_server module, and a shell-form CMD becomes its arguments (/bin/sh -c ...)
    ("Dockerfile.runpod-mistral", "mistralai/Mistral-7B-Instruct-v0.3", "line 14: model None"),
])
def test_a_cmd_the_images_entrypoint_takes_as_arguments_is_read_as_docker_runs_it(tmp_path, name, model, words):
    before = _write(tmp_path, name, None)
    done = apply(tmp_path, name, model)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert (tmp_path / name).read_text() == before


def test_a_variable_the_image_does_not_set_keeps_the_server_unwritten(tmp_path):
    text = "FROM vllm/vllm-openai:v0.32.0\nENTRYPOINT vllm serve org/m --max-model-len 4096 $VLLM_ARGS\n"
    (tmp_path / "Dockerfile").write_text(text)
    done = apply(tmp_path, "Dockerfile", "org/m")
    assert done.returncode == 2 and "its command line has $VLLM_ARGS" in done.stderr, done.stderr
    assert (tmp_path / "Dockerfile").read_text() == text


def test_every_dockerfile_is_listed_with_its_origin():
    listed = (DOCKERFILES.parent / "SOURCES.md").read_text()
    for path in DOCKERFILES.iterdir():
        assert "| dockerfiles/%s |" % path.name in listed, path.name


DOCKER_TOKENS = ["FROM", "vllm/vllm-openai:v0.9.2", "python:3.11", "AS", "base", "ARG", "V=1", "${V}", "ENV", "A=1",
                 "LEN", "4096", "CMD", "ENTRYPOINT", '["vllm",', '"serve",', '"org/m"]', '["--model",', "[", "]", '"',
                 "'", "\\", "\\\n", "\n", "#", "vllm serve org/m", "--max-model-len", "$LEN", "bash -c", "&&", "\t"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(DOCKER_TOKENS), max_size=40).map(" ".join))
def test_any_dockerfile_text_is_read_or_refused_in_one_line(text):
    try:
        deployment = read_deployment(text, "Dockerfile", Path("Dockerfile"))
    except FitError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    for server in deployment.servers:
        _ = (server.read_args.effective(), server.open_options, server.model, server.names)
