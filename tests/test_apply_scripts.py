"""`vllm-fit apply` on shell scripts that start vLLM, and on SkyPilot tasks and dstack configurations (a
script in YAML): real public files (tests/data/deploy/scripts and tasks, origins in SOURCES.md) and the
shapes around them. The edited script is run by the real bash with stub programs (vllm, python, docker,
uv, srun) that record what vLLM would get, parsed by vLLM's own parser (tests/deploy_oracle.py); and
arguments the file does not hold (a script's "$@", a Kubernetes $(EXTRA_ARGS)) keep a server unwritten."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from conftest import ROOT
from deploy_oracle import RECORD_ENV, STUB, vllm_args, vllm_parse
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_fit.deploy.deployment import read_deployment
from vllm_fit.errors import FitError

SCRIPTS = ROOT / "tests" / "data" / "deploy" / "scripts"
PASS_ON = """#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != vllm ] && [ "$1" != python3 ] && [ "$1" != python ]; do shift; done
exec "$@"
"""
"""`uv run` and `srun [options]`, for the test: run the server command that follows."""


def fit_file(folder: Path, body: str) -> Path:
    path = folder / "fit.yaml"
    path.write_text("# vllm-fit: 0.3.0\n# vllm: 0.32.0\n" + body)
    return path


def apply(folder: Path, script: str, body: str, *extra: str) -> subprocess.CompletedProcess:
    fit_file(folder, body)
    return subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", script, *extra],
                          cwd=str(folder), capture_output=True, text=True, timeout=120)


def served(script: Path, tmp: Path, image: str = "") -> List[str]:
    """The argv the script's one vLLM server gets, run by bash with recording stubs (after `image` for docker)."""
    stubs = tmp / "stubs"
    stubs.mkdir(exist_ok=True)
    for name, text in (("vllm", STUB), ("python3", STUB), ("python", STUB), ("docker", STUB), ("uv", PASS_ON),
                       ("srun", PASS_ON)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755 | stat.S_IXUSR)
    record = tmp / "record"
    record.write_bytes(b"")
    env = {"PATH": "%s:/usr/bin:/bin" % stubs, RECORD_ENV: str(record), "HOME": str(tmp)}
    subprocess.run(["bash", str(script)], env=env, cwd=str(tmp), capture_output=True, timeout=60, check=False)
    runs = [r.split("\x1f")[:-1] for r in record.read_bytes().decode().split("\x1e") if r]
    servers: List[List[str]] = []
    for run in runs:
        if image:
            servers.append(["vllm", "serve", *run[run.index(image) + 1:]])
        elif vllm_args(run) is not None:
            servers.append(run)
    assert len(servers) == 1, runs
    found = vllm_args(servers[0])
    assert found is not None
    return found


REAL: List[Tuple[str, str, str, List[str], List[str], str]] = [
    ("hotaisle-run06.sh", "Qwen/Qwen3-0.6B", "",
     ["  --tensor-parallel-size 1 --max-model-len 32768 --reasoning-parser qwen3 \\",
      "  --max-num-batched-tokens 8192 --gpu-memory-utilization 0.85"],
     ["  --tensor-parallel-size 1 --max-model-len 12345 --reasoning-parser qwen3 \\",
      "  --max-num-batched-tokens 8192 --gpu-memory-utilization 0.87"], ""),
    ("lmms-eval-qwen-vllm-serve.sh", "Qwen/Qwen3-VL-2B-Instruct", "",
     ["    --gpu-memory-utilization 0.5 \\", "    --max-model-len 65536 \\"],
     ["    --gpu-memory-utilization 0.87 \\", "    --max-model-len 12345 \\"], ""),
    ("pyvision-run-serve-llm.sh", "/mnt/petrelfs/zhaoshitian/gveval_zhaoshitian/Qwen2.5-72B-Instruct", "judge",
     ["    --gpu-memory-utilization 0.8 \\", "    --max-model-len 32768 \\"],
     ["    --gpu-memory-utilization 0.87 \\", "    --max-model-len 12345 \\"], ""),
    ("nlp-kg-run.sh", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "",
     ["vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-32B --max-model-len 35904"],
     ["vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-32B --max-model-len 12345 --gpu-memory-utilization 0.87"], ""),
    ("docker-run-llama3.sh", "meta-llama/Meta-Llama-3-8B-Instruct", "",
     ["    --model $MODEL"], ["    --model $MODEL --max-model-len 12345 --gpu-memory-utilization 0.87"],
     "vllm/vllm-openai:latest"),
    ("docker-run-llava.sh", "llava-hf/llava-1.5-7b-hf", "",
     ["    --model llava-hf/llava-1.5-7b-hf --chat-template /vllm/examples/template_llava.jinja"
      " --gpu_memory_utilization 0.95 --max_model_len 1024"],
     ["    --model llava-hf/llava-1.5-7b-hf --chat-template /vllm/examples/template_llava.jinja"
      " --gpu_memory_utilization 0.87 --max_model_len 12345"], "vllm/vllm-openai:latest"),
]


def _changed(before: str, after: str) -> Tuple[List[str], List[str]]:
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    return ([x[1:] for x in lines if x.startswith("-") and not x.startswith("---")],
            [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")])


@pytest.mark.parametrize("script, model, name, removed, added, image", REAL, ids=[r[0] for r in REAL])
def test_each_real_script_gets_exactly_the_fit(tmp_path, script, model, name, removed, added, image):
    shutil.copy(SCRIPTS / script, tmp_path / script)
    before = (tmp_path / script).read_text()
    body = ("# name: %s\n" % name if name else "") + "model: %s\nmax-model-len: 12345\n" \
        "gpu-memory-utilization: 0.87\n" % model
    done = apply(tmp_path, script, body)
    assert done.returncode == 0, done.stderr
    after = (tmp_path / script).read_text()
    assert _changed(before, after) == (removed, added)
    assert "%s: updated (1 server): line " % script in done.stderr


ORACLE = [r for r in REAL if r[0] != "pyvision-run-serve-llm.sh"]
"""The PyVision script passes --disable-log-requests, which the installed vLLM (0.32) no longer takes."""


@pytest.mark.vllm
@pytest.mark.parametrize("script, model, name, removed, added, image", ORACLE, ids=[r[0] for r in ORACLE])
def test_bash_and_vllm_read_the_fit_from_the_edited_script(tmp_path, script, model, name, removed, added, image):
    """The script before and after, run by bash with stubs; what vLLM gets parsed by vLLM's own parser."""
    pytest.importorskip("vllm")
    shutil.copy(SCRIPTS / script, tmp_path / script)
    was = vllm_parse(served(tmp_path / script, tmp_path, image))
    body = ("# name: %s\n" % name if name else "") + "model: %s\nmax-model-len: 12345\n" \
        "gpu-memory-utilization: 0.87\n" % model
    assert apply(tmp_path, script, body).returncode == 0
    now = vllm_parse(served(tmp_path / script, tmp_path, image))
    assert (now.model_tag or now.model) == model
    assert (now.max_model_len, now.gpu_memory_utilization) == (12345, 0.87)
    rest = {k: v for k, v in vars(now).items() if k not in ("max_model_len", "gpu_memory_utilization")}
    assert rest == {k: v for k, v in vars(was).items() if k not in ("max_model_len", "gpu_memory_utilization")}


def test_a_script_whose_values_come_from_its_caller_is_not_matched(tmp_path):
    """Every value of the real DeepSeek launch script is `${1:-default}` or `${VAR:-default}`: what vLLM gets
    depends on the caller, so no server matches, and the message says where the model comes from."""
    shutil.copy(SCRIPTS / "deepseek-launch-server.sh", tmp_path / "launch.sh")
    before = (tmp_path / "launch.sh").read_text()
    done = apply(tmp_path, "launch.sh", "model: deepseek-ai/DeepSeek-V3\nmax-model-len: 4096\n"
                 "gpu-memory-utilization: 0.9\n")
    assert done.returncode == 2
    assert "line 59: model from ${1:-deepseek-ai/DeepSeek-V3}" in done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "launch.sh").read_text() == before


ASSIGNED = """#!/bin/bash
# launch the server
MODEL=org/m
MAX_LEN=4096
export GPU_UTIL="0.8"
cat > notes.txt <<'END'
vllm serve org/m --max-model-len 1
END
exec vllm serve $MODEL --max-model-len "$MAX_LEN" --gpu-memory-utilization $GPU_UTIL 2>&1 | tee log
"""


def test_a_value_from_the_scripts_own_variable_is_written_where_it_is_set(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text(ASSIGNED)
    done = apply(tmp_path, "serve.sh", "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n")
    assert done.returncode == 0, done.stderr
    assert _changed(ASSIGNED, script.read_text()) == (["MAX_LEN=4096", 'export GPU_UTIL="0.8"'],
                                                       ["MAX_LEN=12345", 'export GPU_UTIL="0.87"'])


@pytest.mark.parametrize("middle, words", [
    ('if [ -n "$LONG" ]; then\n  MAX_LEN=32768\nfi\n', "set inside an if, a loop, a case or a function"),
    ("source ./env.sh\n", "perhaps set by the script's source"),
    ("read MAX_LEN\n", "set by read as the script runs"),
])
def test_a_variable_the_script_may_change_as_it_runs_is_not_written(tmp_path, middle, words):
    text = ASSIGNED.replace("exec vllm", middle + "exec vllm")
    (tmp_path / "serve.sh").write_text(text)
    done = apply(tmp_path, "serve.sh", "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.8\n")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert (tmp_path / "serve.sh").read_text() == text


def test_a_variable_two_options_share_is_refused_naming_the_other(tmp_path):
    """A real pattern (the DisGenerator prefill script): one variable for the length and the batch size."""
    text = "#!/bin/bash\nLEN=8192\nvllm serve org/m --max-model-len $LEN --max-num-batched-tokens $LEN\n"
    (tmp_path / "serve.sh").write_text(text)
    done = apply(tmp_path, "serve.sh", "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.9\n")
    assert done.returncode == 2 and "--max-num-batched-tokens 8192 -> 12345" in done.stderr
    assert (tmp_path / "serve.sh").read_text() == text


OPEN = [
    ("serve.sh", '#!/bin/sh\nvllm serve org/m --max-model-len 4096 "$@"\n', "$@ (the script's arguments)"),
    ("k8s.yaml", """apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.32.0
          args: ["org/m", "--max-model-len", "4096", "$(EXTRA_ARGS)"]
          env:
            - name: EXTRA_ARGS
              valueFrom: {configMapKeyRef: {name: vllm, key: extra}}
""", "$(EXTRA_ARGS) (set by valueFrom in the cluster)"),
    ("k8s-sh.yaml", """apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.32.0
      command: ["sh", "-c", "vllm serve org/m --max-model-len 4096 $EXTRA_ARGS"]
""", "$EXTRA_ARGS"),
]


@pytest.mark.parametrize("name, text, words", OPEN, ids=[o[0] for o in OPEN])
def test_arguments_the_file_does_not_hold_keep_the_server_unwritten(tmp_path, name, text, words):
    """They may set the length or the other memory knob after the fit's value: nothing is proven then;
    --allow-mismatch writes anyway."""
    (tmp_path / name).write_text(text)
    body = "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n"
    done = apply(tmp_path, name, body)
    assert done.returncode == 2, done.stdout
    assert "its command line has %s, which this file does not hold" % words in done.stderr
    assert (tmp_path / name).read_text() == text
    assert apply(tmp_path, name, body, "--allow-mismatch").returncode == 0
    assert "12345" in (tmp_path / name).read_text()


def test_docker_run_options_are_told_from_the_image(tmp_path):
    """Boolean flags, clustered short flags, `--flag=value` and flags with a value before the image; an
    `--entrypoint` with the program's first word; podman too."""
    text = ("#!/bin/bash\nsudo docker run -it --rm -p 8000:8000 --name=vllm -e HF_TOKEN --gpus all --ipc host \\\n"
            "  vllm/vllm-openai:v0.32.0 org/a --max-model-len 4096\n"
            "podman run -d --device nvidia.com/gpu=all --entrypoint vllm docker.io/vllm/vllm-openai:v0.9.2 \\\n"
            "  serve org/b --served-model-name b\n")
    (tmp_path / "run.sh").write_text(text)
    done = apply(tmp_path, "run.sh", "model: org/a\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n")
    assert done.returncode == 0, done.stderr
    assert "  vllm/vllm-openai:v0.32.0 org/a --max-model-len 12345 --gpu-memory-utilization 0.87\n" in \
        (tmp_path / "run.sh").read_text()
    done = apply(tmp_path, "run.sh", "# vllm: 0.9.2\n# name: b\nmodel: org/b\nmax-model-len: 2048\n"
                 "gpu-memory-utilization: 0.9\n")
    assert done.returncode == 0, done.stderr
    assert "  serve org/b --served-model-name b --max-model-len 2048 --gpu-memory-utilization 0.9\n" in \
        (tmp_path / "run.sh").read_text()


def test_a_docker_image_of_another_vllm_version_is_compared(tmp_path):
    text = "#!/bin/sh\ndocker run --gpus all vllm/vllm-openai:v0.6.3 --model org/m --max-model-len 8192\n"
    (tmp_path / "run.sh").write_text(text)
    done = apply(tmp_path, "run.sh", "model: org/m\nmax-model-len: 4096\ngpu-memory-utilization: 0.9\n")
    assert done.returncode == 2 and "runs vLLM 0.6.3, the fit was found on 0.32.0" in done.stderr


@pytest.mark.parametrize("empty", ['""', "''"])
def test_an_empty_quoted_word_is_a_word_as_bash_passes_it(tmp_path, empty):
    """`vllm serve org/m "" ...`: bash passes an empty argument, a second positional vLLM refuses; the reader
    dropped it (a quoted word with no character in it) and wrote the fit into a server that cannot start."""
    text = "#!/bin/bash\nvllm serve org/m %s --max-model-len 4096\n" % empty
    (tmp_path / "serve.sh").write_text(text)
    assert served(tmp_path / "serve.sh", tmp_path) == ["org/m", "", "--max-model-len", "4096"]
    done = apply(tmp_path, "serve.sh", "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n")
    assert done.returncode == 2 and "empty word" in done.stderr, done.stderr
    assert (tmp_path / "serve.sh").read_text() == text


@pytest.mark.parametrize("text", [
    "#!/bin/bash\nvllm serve org/m --max-model-len 'unclosed\n",
    "#!/bin/bash\nvllm serve org/m --max-model-len $(( 4096 * 2 ))\n",
    "#!/bin/bash\nvllm serve org/m " + "$(" * 5000 + ")" * 5000 + "\n",
])
def test_a_script_vllm_fit_cannot_follow_is_refused_in_one_line(tmp_path, text):
    (tmp_path / "serve.sh").write_text(text)
    done = apply(tmp_path, "serve.sh", "model: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert len(done.stderr) < 600
    assert "Traceback" not in done.stderr and (tmp_path / "serve.sh").read_text() == text


def test_every_script_and_task_is_listed_with_its_origin():
    listed = (SCRIPTS.parent / "SOURCES.md").read_text()
    for path in [*SCRIPTS.iterdir(), *TASKS.iterdir()]:
        assert "| %s/%s |" % (path.parent.name, path.name) in listed, path.name


TASKS = ROOT / "tests" / "data" / "deploy" / "tasks"
TASK_EDITS: List[Tuple[str, str, str, List[str], List[str]]] = [
    ("skypilot-vllm-service.yaml", "meta-llama/Llama-2-7b-chat-hf", "NVIDIA L4",
     ["    --host 0.0.0.0"], ["    --host 0.0.0.0 --max-model-len 12345 --gpu-memory-utilization 0.87"]),
    ("skypilot-serve-openai-api-docker.yaml", "meta-llama/Llama-2-7b-chat-hf", "NVIDIA A10G",
     ["    --host 0.0.0.0"], ["    --host 0.0.0.0 --max-model-len 12345 --gpu-memory-utilization 0.87"]),
    ("skypilot-vllm-llama4.sky.yaml", "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "NVIDIA H200",
     ["    --max-model-len 430000"], ["    --max-model-len 12345 --gpu-memory-utilization 0.87"]),
    ("dstack-vllm-amd.dstack.yml", "meta-llama/Meta-Llama-3.1-70B-Instruct", "AMD Instinct MI300X",
     ["  - MAX_MODEL_LEN=126192", "      --port 8000"],
     ["  - MAX_MODEL_LEN=12345", "      --port 8000 --gpu-memory-utilization 0.87"]),
]


def _apply_task(folder: Path, task: str, model: str, device: str) -> subprocess.CompletedProcess:
    shutil.copy(TASKS / task, folder / task)
    return apply(folder, task, "# device: %s\nmodel: %s\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n"
                 % (device, model))


@pytest.mark.parametrize("task, model, device, removed, added", TASK_EDITS, ids=[t[0] for t in TASK_EDITS])
def test_each_real_skypilot_and_dstack_file_gets_exactly_the_fit(tmp_path, task, model, device, removed, added):
    """The run script's command line, or the `envs`/`env` entry its `$VAR` comes from."""
    before = (TASKS / task).read_text()
    done = _apply_task(tmp_path, task, model, device)
    assert done.returncode == 0, done.stderr
    assert _changed(before, (tmp_path / task).read_text()) == (removed, added)


def _task_run(text: str, folder: Path) -> List[str]:
    """What vLLM gets when the task's script runs: SkyPilot's `run` with its `envs`, dstack's `commands` with its
    `env`, run by bash with only recording stubs on PATH (pip, wget, git ... are not found and do nothing)."""
    import yaml

    task = yaml.safe_load(text)
    if "run" in task:
        script, env = task["run"], {k: str(v) for k, v in (task.get("envs") or {}).items() if v is not None}
        env["SKYPILOT_NUM_GPUS_PER_NODE"] = "8"  # SkyPilot's own, set on the node
    else:
        script = "\n".join(task["commands"])
        env = dict(e.split("=", 1) for e in task.get("env") or [] if "=" in e)
    stubs = folder / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("vllm", "python", "python3"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    record = folder / "record"
    record.write_bytes(b"")
    subprocess.run(["/bin/bash", "-c", script], env={**env, "PATH": str(stubs), RECORD_ENV: str(record)},
                   cwd=str(folder), capture_output=True, timeout=60, check=False)
    runs = [r.split("\x1f")[:-1] for r in record.read_bytes().decode().split("\x1e") if r]
    servers = [vllm_args(r) for r in runs if vllm_args(r) is not None]
    assert len(servers) == 1, runs
    return servers[0]  # type: ignore[return-value]


@pytest.mark.vllm
@pytest.mark.parametrize("task, model, device, removed, added", TASK_EDITS, ids=[t[0] for t in TASK_EDITS])
def test_bash_and_vllm_read_the_fit_from_the_edited_task(tmp_path, task, model, device, removed, added):
    pytest.importorskip("vllm")
    was = vllm_parse(_task_run((TASKS / task).read_text(), tmp_path))
    assert _apply_task(tmp_path, task, model, device).returncode == 0
    now = vllm_parse(_task_run((tmp_path / task).read_text(), tmp_path))
    assert ((now.model_tag or now.model), now.max_model_len, now.gpu_memory_utilization) == (model, 12345, 0.87)
    changed = ("max_model_len", "gpu_memory_utilization")
    assert {k: v for k, v in vars(now).items() if k not in changed} == \
        {k: v for k, v in vars(was).items() if k not in changed}


def test_a_task_on_another_gpu_is_not_lowered_and_its_launch_values_are_not_written(tmp_path):
    """dstack's file asks for MI300X: a lower length from an H100 is refused. A SkyPilot env left null is given
    at launch: a length read from it is not written."""
    done = _apply_task(tmp_path, "dstack-vllm-amd.dstack.yml", "meta-llama/Meta-Llama-3.1-70B-Instruct", "NVIDIA H100")
    assert done.returncode == 2 and "the deployment asks for MI300X, the fit was found on NVIDIA H100" in done.stderr
    text = (TASKS / "skypilot-vllm-llama4.sky.yaml").read_text().replace(
        "  MODEL_NAME:", "  MAX_LEN: null\n  MODEL_NAME:").replace("--max-model-len 430000", "--max-model-len $MAX_LEN")
    (tmp_path / "task.yaml").write_text(text)
    done = apply(tmp_path, "task.yaml", "model: meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8\n"
                 "max-model-len: 12345\ngpu-memory-utilization: 0.87\n")
    assert done.returncode == 2 and "$MAX_LEN (given with --env when the task is launched)" in done.stderr
    assert (tmp_path / "task.yaml").read_text() == text

SHELL_TOKENS = ["vllm serve", "python -u -m vllm.entrypoints.openai.api_server", "docker run", "srun", "-e", "--gpus",
                "vllm/vllm-openai:v0.32.0", "org/m", "--max-model-len", "8192", "--gpu-memory-utilization=0.9",
                "$LEN", "${LEN}", "${LEN:-1}", "$(date)", "`x`", "$1", '"$@"', "LEN=4096", "export LEN=1", "if", "then",
                "fi", "for", "do", "done", "{", "}", "(", ")", ";", "&&", "|", "&", "<<", "<<-", "EOF", "'EOF'", "\t",
                "\n", "\\\n", '"', "'", "#", "\\", "$", "=", "--config", "c.yaml", "source", "read", "<<<", ">", "2>&1"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SHELL_TOKENS), max_size=40).map(" ".join))
def test_any_script_text_is_read_or_refused_in_one_line(text):
    """Whatever a .sh file holds, the reader answers (servers with their options) or refuses with BadInput."""
    try:
        deployment = read_deployment(text, "x.sh", Path("x.sh"))
    except FitError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    for server in deployment.servers:
        assert server.path.startswith("line ") or server.problem
        _ = (server.read_args.effective(), server.open_options, server.model, server.names)
