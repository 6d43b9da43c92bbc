"""Every bad input, over all six commands, is refused in one line with exit 2 (3 for the environment).

Each case runs the real CLI in-process with a stand-in interpreter (`--python`, or `python:` in a
fleet) that answers vllm-fit's environment query like a vLLM 0.32 environment and records every
other start, i.e. every trial launch. A case passes when the exit code is the documented one,
stderr is exactly one line without a traceback, the words that name the problem are in it, and
nothing was launched.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Union

import pytest

from vllm_fit import cli


@dataclass(frozen=True)
class Folder:
    """A directory in the sandbox."""


@dataclass(frozen=True)
class Link:
    """A symbolic link in the sandbox, to `target` (formatted like the arguments)."""

    target: str


Content = Union[str, bytes, Folder, Link]


@dataclass(frozen=True)
class Case:
    """One bad input: the command line, the files it needs, the exit code and words expected."""

    id: str
    argv: List[str]
    code: int
    words: str
    files: Dict[str, Content] = field(default_factory=dict)
    env: Dict[str, str] = field(default_factory=dict)


GOOD_CONFIG = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": 4, "num_key_value_heads": 2,
               "num_hidden_layers": 2, "hidden_size": 128, "max_position_embeddings": 32768,
               "torch_dtype": "bfloat16"}


def model_config(**changes) -> str:
    config = dict(GOOD_CONFIG, **changes)
    return json.dumps({k: v for k, v in config.items() if v is not ...})


def search(*args: str, python: bool = True) -> List[str]:
    return ["search", "--model", "{model}", *args, *(["--python", "{python}"] if python else [])]


def fleet(body: str) -> Dict[str, Content]:
    return {"fleet.yaml": "defaults: {python: '{python}'}\n" + body}


def entry(extra: str = "") -> str:
    return "models:\n  - {model: '{model}', name: a%s}\n" % (", " + extra if extra else "")


INDEX = json.dumps({"entries": [{"name": "a", "status": "fit", "config": "configs/a.yaml"}]})
GOOD_SERVE_CONFIG = "model: '{model}'\nmax-model-len: 1024\ngpu-memory-utilization: 0.9\n"


def serve_config(text: str) -> Dict[str, Content]:
    return {"c.yaml": text}


def shard(index: object) -> Dict[str, Content]:
    return {"s1/index.json": index if isinstance(index, str) else json.dumps(index), "s1/configs": Folder()}


SEARCH_VALUES = [
    Case("utilization zero", search("--gpu-memory-utilization", "0"), 2, "greater than 0"),
    Case("utilization above one", search("--gpu-memory-utilization", "1.5"), 2, "(0, 1]"),
    Case("utilization word", search("--gpu-memory-utilization", "lots"), 2, "must be a number"),
    Case("utilization nan", search("--gpu-memory-utilization", "nan"), 2, "--gpu-memory-utilization"),
    Case("utilization inf", search("--gpu-memory-utilization", "inf"), 2, "--gpu-memory-utilization"),
    Case("utilization empty", search("--gpu-memory-utilization", ""), 2, "--gpu-memory-utilization"),
    Case("utilization with unit", search("--gpu-memory-utilization", "90%"), 2, "--gpu-memory-utilization"),
    Case("min above max", search("--min-len", "5000", "--max-len", "4000"), 2, "greater than --max-len"),
    Case("negative max-len", search("--max-len", "-5"), 2, "at least 1"),
    Case("word max-len", search("--max-len", "abc"), 2, "whole number"),
    Case("fractional max-len", search("--max-len", "1.5"), 2, "whole number"),
    Case("huge float max-len", search("--max-len", "1e400"), 2, "whole number"),
    Case("nan max-len", search("--max-len", "NaN"), 2, "whole number"),
    Case("unicode digits max-len", search("--max-len", "\u0663\u0660\u0660"), 2, "whole number"),
    Case("max-len above the model", search("--max-len", "99999999999999999999"), 2, "--max-len"),
    Case("zero min-len", search("--min-len", "0"), 2, "at least 1"),
    Case("zero granularity", search("--granularity", "0"), 2, "at least 1, got '0'; e.g. --granularity 128"),
    Case("granularity above max", search("--max-len", "64", "--granularity", "100"), 2, "no multiple"),
    Case("engine arg without value", search("--engine-arg", "enforce_eager"), 2, "KEY=VALUE"),
    Case("engine arg without key", search("--engine-arg", "=3"), 2, "KEY=VALUE"),
    Case("engine arg is max-len", search("--engine-arg", "max_model_len=5"), 2, "--max-len"),
    Case("engine arg is utilization", search("--engine-arg", "gpu_memory_utilization=0.5"), 2,
         "--gpu-memory-utilization"),
    Case("engine arg is kv bytes", search("--engine-arg", "kv_cache_memory_bytes=5"), 2, "--kv-cache-memory"),
    Case("engine arg is tp", search("--engine-arg", "tensor_parallel_size=2"), 2, "--tensor-parallel-size"),
    Case("engine arg is model", search("--engine-arg", "model=x"), 2, "--model"),
    Case("engine arg twice", search("--engine-arg", "a=1", "--engine-arg", "a=2"), 2, "twice"),
    Case("engine arg broken json", search("--engine-arg", 'compilation_config={"level":'), 2, "JSON"),
    Case("engine arg broken list", search("--engine-arg", "x=[1, 2"), 2, "JSON"),
    Case("kv size unit", search("--kv-cache-memory", "12XB"), 2, "unknown unit"),
    Case("kv size negative", search("--kv-cache-memory", "-1"), 2, "not a size"),
    Case("kv size fraction of a byte", search("--kv-cache-memory", "1.5B"), 2, "--kv-cache-memory"),
    Case("kv size zero", search("--kv-cache-memory", "0"), 2, "--kv-cache-memory"),
    Case("kv size overflow", search("--kv-cache-memory", "1" + "0" * 400), 2, "--kv-cache-memory"),
    Case("kv size nan", search("--kv-cache-memory", "nanGiB"), 2, "--kv-cache-memory"),
    Case("kv and utilization", search("--kv-cache-memory", "64MiB", "--gpu-memory-utilization", "0.9"), 2,
         "only one"),
    Case("trial timeout zero", search("--trial-timeout", "0"), 2, "greater than 0"),
    Case("trial timeout inf", search("--trial-timeout", "inf"), 2, "--trial-timeout"),
    Case("retries negative", search("--retries", "-1"), 2, "--retries"),
    Case("retries word", search("--retries", "some"), 2, "--retries"),
    Case("retry wait huge", search("--retry-wait", "1e9"), 2, "--retry-wait"),
    Case("retry wait negative", search("--retry-wait", "-1"), 2, "--retry-wait"),
    Case("tp not dividing heads", search("--tensor-parallel-size", "3"), 2, "attention heads"),
    Case("tp zero", search("--tensor-parallel-size", "0"), 2, "at least 1"),
    Case("unknown strategy", search("--strategy", "guess"), 2, "guess"),
    Case("unknown via", search("--via", "http"), 2, "http"),
    Case("via from the environment unknown", search(), 2, "VLLM_FIT_VIA", env={"VLLM_FIT_VIA": "grpc"}),
    Case("concurrency zero", search("--concurrency", "0"), 2, "e.g. --concurrency 8"),
    Case("concurrency above max_num_seqs", search("--concurrency", "4", "--engine-arg", "max_num_seqs=2"), 2,
         "max_num_seqs"),
    Case("unknown explore weights", search("--explore-weights", "fake"), 2, "fake"),
    Case("unknown knob", search("--target-len", "100", "--search", "magic"), 2, "magic"),
    Case("max utilization tiny", search("--max-utilization", "0.001"), 2, "1%"),
    Case("max utilization above one", search("--max-utilization", "1.5"), 2, "(0, 1]"),
    Case("max utilization with fixed utilization",
         search("--max-utilization", "0.9", "--gpu-memory-utilization", "0.9"), 2, "does not apply"),
    Case("target-len zero", search("--target-len", "0"), 2, "at least 1"),
    Case("target-len with bisect", search("--target-len", "100", "--strategy", "bisect"), 2, "does not apply"),
    Case("kv granularity without target", search("--kv-granularity", "1MiB"), 2, "does not apply"),
    Case("kv granularity zero",
         search("--target-len", "100", "--search", "kv-cache-memory", "--kv-granularity", "0"), 2,
         "--kv-granularity"),
    Case("target-len above the model", search("--target-len", "999999"), 2, "--target-len"),
    Case("unknown option", search("--frobnicate", "1"), 2, "--frobnicate"),
    Case("no model", ["search"], 2, "--model"),
    Case("empty model", ["search", "--model", "", "--python", "{python}"], 2, "--model"),
]

SEARCH_FILES = [
    Case("model directory missing", ["search", "--model", "{tmp}/nope", "--python", "{python}"], 3,
         "does not exist"),
    Case("model name typo", ["search", "--model", "my-modle", "--python", "{python}"], 2,
         "my-modle is not a local model directory"),
    Case("model is a file", ["search", "--model", "/etc/passwd", "--python", "{python}"], 2, "config.json"),
    Case("model without config", ["search", "--model", "{tmp}/empty", "--python", "{python}"], 2, "config.json",
         {"empty": Folder()}),
    Case("config not json", search(), 2, "config.json", {"m/config.json": "{not json"}),
    Case("config kv heads out of range", search(), 2, "num_kv_heads must be a whole number",
         {"m/config.json": model_config(num_kv_heads=10 ** 12)}),
    Case("config a list", search(), 2, "config.json", {"m/config.json": "[1, 2]"}),
    Case("config empty", search(), 2, "config.json", {"m/config.json": ""}),
    Case("config invalid utf-8", search(), 2, "config.json", {"m/config.json": b'{"a": "\xff\xfe"}'}),
    Case("config nan length", search(), 2, "max_position_embeddings must be a finite number",
         {"m/config.json": model_config().replace("32768", "NaN")}),
    Case("config huge length", search(), 2, "max_position_embeddings",
         {"m/config.json": model_config().replace("32768", "1e400")}),
    Case("config word length", search(), 2, "max_position_embeddings",
         {"m/config.json": model_config(max_position_embeddings="long")}),
    Case("config every layer kv-shared", search(), 2, "num_kv_shared_layers must be a whole number below",
         {"m/config.json": model_config(num_kv_shared_layers=999)}),
    Case("config per-layer sizes as words", search(), 2, "intermediate_size must be a whole number",
         {"m/config.json": model_config(intermediate_size=["big", "big"])}),
    Case("config negative window layers", search(), 2, "max_window_layers must be a whole number from 0",
         {"m/config.json": model_config(max_window_layers=-1)}),
    Case("rope factor word", search(), 2, "rope",
         {"m/config.json": model_config(rope_scaling={"rope_type": "linear", "factor": "x"})}),
    Case("rope factor null", search(), 2, "rope",
         {"m/config.json": model_config(rope_scaling={"rope_type": "linear", "factor": None})}),
    Case("config a folder", search(), 2, "config.json", {"m/config.json": Folder()}),
    Case("out not yaml", search("--out", "{tmp}/fit.txt"), 2, ".yaml"),
    Case("out under a file", search("--out", "/etc/passwd/x.yaml"), 2, "/etc/passwd"),
    Case("out is a folder", search("--out", "{tmp}/outdir.yaml"), 2, "outdir.yaml", {"outdir.yaml": Folder()}),
    Case("out is a device", search("--out", "{tmp}/dev.yaml"), 2, "dev.yaml", {"dev.yaml": Link("/dev/null")}),
    Case("out is a symlink", search("--out", "{tmp}/link.yaml"), 2, "symlink",
         {"link.yaml": Link("{tmp}/real.yaml"), "real.yaml": "x: 1\n"}),
    Case("out folder missing", search("--out", "{tmp}/no/such/fit.yaml"), 2, "does not exist"),
    Case("report under proc", search("--report", "/proc/x.json"), 2, "/proc"),
    Case("report is a folder", search("--report", "{tmp}"), 2, "folder"),
    Case("report same as out", search("--out", "{tmp}/a.yaml", "--report", "{tmp}/a.yaml"), 2, "same"),
    Case("cache dir is a file", search("--cache-dir", "{tmp}/afile"), 2, "afile", {"afile": "x"}),
    Case("cache dir under proc", search("--cache-dir", "/proc/vllm-fit-cache"), 2, "/proc"),
    Case("work dir is a file", search("--work-dir", "{tmp}/afile"), 2, "afile", {"afile": "x"}),
    Case("work dir under proc", search("--work-dir", "/proc/vllm-fit-work"), 2, "/proc"),
    Case("python is ls", search("--python", "/bin/ls", python=False), 2, "not a Python interpreter"),
    Case("python is a folder", search("--python", "{tmp}", python=False), 2, "{tmp}"),
    Case("python missing", search("--python", "/nonexistent/python", python=False), 2, "no such executable"),
    Case("python not executable", search("--python", "{tmp}/plain", python=False), 2, "plain",
         {"plain": "#!/bin/sh\n"}),
    Case("cache dir with a file for fits", search("--cache-dir", "{tmp}/cache"), 2, "cache", {"cache/fits": "x"}),
]

BATCH = [
    Case("fleet missing", ["batch", "{tmp}/none.yaml", "--out-dir", "{tmp}/o"], 2, "none.yaml"),
    Case("fleet not yaml", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "fleet.yaml",
         {"fleet.yaml": "models: [\n"}),
    Case("fleet a list", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "fleet.yaml",
         {"fleet.yaml": "- a\n- b\n"}),
    Case("fleet empty", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "models",
         {"fleet.yaml": ""}),
    Case("fleet without models", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "models",
         fleet("models: []\n")),
    Case("fleet unknown top key", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "modles",
         fleet("modles: []\n")),
    Case("fleet unknown entry key", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "max_lenn",
         fleet(entry("max_lenn: 5"))),
    Case("fleet unknown default key", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "colour",
         {"fleet.yaml": "defaults: {colour: red}\n" + entry()}),
    Case("fleet duplicate key", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "duplicate",
         fleet("models:\n  - {model: '{model}', name: a, name: b}\n")),
    Case("fleet python tag", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "fleet.yaml",
         fleet("models:\n  - !!python/object/apply:os.system ['true']\n")),
    Case("fleet alias bomb", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "aliases",
         fleet("x: {engine_args: {a: &a [x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a],\n"
               "  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c],\n"
               "  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e],\n"
               "  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f], h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g],\n"
               "  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h], j: &j [*i,*i,*i,*i,*i,*i,*i,*i,*i],\n"
               "  k: &k [*j,*j,*j,*j,*j,*j,*j,*j,*j], l: &l [*k,*k,*k,*k,*k,*k,*k,*k,*k],\n"
               "  m: &m [*l,*l,*l,*l,*l,*l,*l,*l,*l]}}\n" + entry())),
    Case("fleet invalid utf-8", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "fleet.yaml",
         {"fleet.yaml": b"models:\n  - {model: '\xff'}\n"}),
    Case("fleet date value", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "max_len",
         fleet(entry("max_len: 2024-01-01"))),
    Case("fleet granularity zero", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "granularity",
         fleet(entry("granularity: 0"))),
    Case("fleet utilization seven", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2,
         "gpu_memory_utilization", fleet(entry("gpu_memory_utilization: 7"))),
    Case("fleet strategy magic", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "magic",
         fleet(entry("strategy: magic"))),
    Case("fleet engine arg key not a string", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2,
         "engine_args", fleet(entry("engine_args: {1: 2}"))),
    Case("fleet engine args a list", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "engine_args",
         fleet(entry("engine_args: [a, b]"))),
    Case("fleet entry without model", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "model",
         fleet("models:\n  - {name: a}\n")),
    Case("fleet entry a string", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "fleet.yaml",
         fleet("models:\n  - just-a-name\n")),
    Case("fleet duplicate names", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "duplicate name",
         fleet("models:\n  - {model: '{model}', name: a}\n  - {model: '{model}', name: a}\n")),
    Case("fleet name escapes", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "name",
         fleet("models:\n  - {model: '{model}', name: ../../evil}\n")),
    Case("fleet both knobs", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "only one",
         fleet(entry("gpu_memory_utilization: 0.9, kv_cache_memory: 1GiB"))),
    Case("fleet ray resources", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "ray_resources",
         fleet(entry("ray_resources: {CPU: -1}"))),
    Case("fleet gpu a number", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "gpu",
         fleet(entry("gpu: 5"))),
    Case("fleet python missing", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "no such executable",
         {"fleet.yaml": "defaults: {python: /nonexistent/python}\n" + entry()}),
    Case("fleet max-len as engine arg", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o"], 2, "max_model_len",
         fleet(entry("engine_args: {max_model_len: 5}"))),
    Case("batch shard beyond", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--shard", "3/2"], 2,
         "--shard", fleet(entry())),
    Case("batch shard word", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--shard", "x"], 2,
         "--shard", fleet(entry())),
    Case("batch shard zero", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--shard", "0/0"], 2,
         "--shard", fleet(entry())),
    Case("batch tolerance negative", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--tolerance", "-1"],
         2, "--tolerance", fleet(entry())),
    Case("batch baseline missing", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--baseline",
                                    "{tmp}/nobase"], 2, "nobase", fleet(entry())),
    Case("batch baseline a list", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--baseline",
                                   "{tmp}/base.json"], 2, "base.json", {**fleet(entry()), "base.json": "[]"}),
    Case("batch out-dir a file", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/afile"], 2, "afile",
         {**fleet(entry()), "afile": "x"}),
    Case("batch cache-dir a file", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--cache-dir",
                                    "{tmp}/afile"], 2, "afile", {**fleet(entry()), "afile": "x"}),
    Case("batch no out-dir", ["batch", "{tmp}/fleet.yaml"], 2, "--out-dir", fleet(entry())),
    Case("batch unknown executor", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--executor", "slurm"], 2,
         "slurm", fleet(entry())),
    Case("batch max-parallel zero", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--executor", "ray",
                                     "--max-parallel", "0"], 2, "--max-parallel", fleet(entry())),
    Case("batch ray address without ray", ["batch", "{tmp}/fleet.yaml", "--out-dir", "{tmp}/o", "--ray-address",
                                           "127.0.0.1:6379"], 2, "--executor ray", fleet(entry())),
]

DEPLOYMENT = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
              "      image: vllm/vllm-openai:v0.32.0\n      args: [/mnt/models, --max-model-len, '1024']\n")

VERIFY = [
    Case("verify deployment unmapped path", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2,
         "--map-path /mnt/models=DIR", serve_config(DEPLOYMENT)),
    Case("verify map-path malformed", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--map-path", "models"],
         2, "CONTAINER_PATH=LOCAL_PATH", serve_config(DEPLOYMENT)),
    Case("verify map-path missing folder", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--map-path",
                                            "/mnt/models={tmp}/nowhere"], 2, "does not exist",
         serve_config(DEPLOYMENT)),
    Case("verify deployment via llm", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--via", "llm", "--map-path",
                                       "/mnt/models={model}"], 2, "--via llm applies to --config",
         serve_config(DEPLOYMENT)),
    Case("verify no server", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "holds no vLLM server",
         serve_config("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")),
    Case("verify missing config", ["verify", "{tmp}/none.yaml", "--python", "{python}"], 2, "none.yaml"),
    Case("verify unknown via", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--via", "rpc"], 2, "rpc",
         serve_config("model: m\nmax-model-len: 8\n")),
    Case("verify not yaml", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         serve_config("model: [\n")),
    Case("verify a list", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         serve_config("- a\n")),
    Case("verify empty", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml", serve_config("")),
    Case("verify without model", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "model",
         serve_config("max-model-len: 1024\n")),
    Case("verify tp word", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "tensor-parallel-size",
         serve_config(GOOD_SERVE_CONFIG + "tensor-parallel-size: two\n")),
    Case("verify length unit", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "max-model-len",
         serve_config("model: '{model}'\nmax-model-len: 32x\n")),
    Case("verify length negative", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "max-model-len",
         serve_config("model: '{model}'\nmax-model-len: -1\n")),
    Case("verify utilization seven", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2,
         "gpu-memory-utilization", serve_config("model: '{model}'\nmax-model-len: 64\ngpu-memory-utilization: 7\n")),
    Case("verify python tag", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         serve_config("model: !!python/object/apply:os.system ['true']\n")),
    Case("verify duplicate key", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "duplicate",
         serve_config(GOOD_SERVE_CONFIG + "max-model-len: 2048\n")),
    Case("verify invalid utf-8", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         {"c.yaml": b"model: '\xff'\n"}),
    Case("verify config a folder", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         {"c.yaml": Folder()}),
    Case("verify junit under proc", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--junit", "/proc/x.xml"],
         2, "/proc", serve_config(GOOD_SERVE_CONFIG)),
    Case("verify junit a folder", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--junit", "{tmp}"],
         2, "folder", serve_config(GOOD_SERVE_CONFIG)),
    Case("verify report device", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--report", "/dev/null"],
         2, "/dev/null", serve_config(GOOD_SERVE_CONFIG)),
    Case("verify tolerance two", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--tolerance", "2"],
         2, "--tolerance", serve_config(GOOD_SERVE_CONFIG)),
    Case("verify python ls", ["verify", "{tmp}/c.yaml", "--python", "/bin/ls"], 2, "not a Python interpreter",
         serve_config(GOOD_SERVE_CONFIG)),
    Case("verify timeout zero", ["verify", "{tmp}/c.yaml", "--python", "{python}", "--trial-timeout", "0"],
         2, "--trial-timeout", serve_config(GOOD_SERVE_CONFIG)),
    Case("verify model missing", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 3, "does not exist",
         serve_config("model: '{tmp}/nomodel'\nmax-model-len: 1024\n")),
    Case("verify engine key not a string", ["verify", "{tmp}/c.yaml", "--python", "{python}"], 2, "c.yaml",
         serve_config(GOOD_SERVE_CONFIG + "1: 2\n")),
]

COMPARE = [
    Case("compare old missing", ["compare", "{tmp}/none.json", "{tmp}/new.json"], 2, "none.json",
         {"new.json": INDEX}),
    Case("compare old a list", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "old.json",
         {"old.json": "[]", "new.json": INDEX}),
    Case("compare old empty object", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "old.json",
         {"old.json": "{}", "new.json": INDEX}),
    Case("compare entry without name", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "name",
         {"old.json": json.dumps({"entries": [{"status": "fit"}]}), "new.json": INDEX}),
    Case("compare entry without status", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "status",
         {"old.json": json.dumps({"entries": [{"name": "a"}]}), "new.json": INDEX}),
    Case("compare unknown status", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "great",
         {"old.json": json.dumps({"entries": [{"name": "a", "status": "great"}]}), "new.json": INDEX}),
    Case("compare not json", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "old.json",
         {"old.json": "{", "new.json": INDEX}),
    Case("compare invalid utf-8", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "old.json",
         {"old.json": b'{"entries": "\xff"}', "new.json": INDEX}),
    Case("compare folder without index", ["compare", "{tmp}/olddir", "{tmp}/new.json"], 2, "olddir",
         {"olddir": Folder(), "new.json": INDEX}),
    Case("compare out under proc", ["compare", "{tmp}/new.json", "{tmp}/new.json", "--out", "/proc/x.md"], 2,
         "/proc", {"new.json": INDEX}),
    Case("compare out a folder", ["compare", "{tmp}/new.json", "{tmp}/new.json", "--out", "{tmp}"], 2,
         "folder", {"new.json": INDEX}),
    Case("compare one argument", ["compare", "{tmp}/new.json"], 2, "NEW", {"new.json": INDEX}),
    Case("compare entries not a list", ["compare", "{tmp}/old.json", "{tmp}/new.json"], 2, "old.json",
         {"old.json": json.dumps({"entries": {"a": 1}}), "new.json": INDEX}),
]

MERGE = [
    Case("merge shard missing", ["merge", "{tmp}/nos", "--out-dir", "{tmp}/o"], 2, "nos"),
    Case("merge shard without index", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "index.json",
         {"s1": Folder()}),
    Case("merge index a list", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "index.json", shard([])),
    Case("merge index not json", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "index.json", shard("{")),
    Case("merge absolute config", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "/etc/hostname",
         shard({"entries": [{"name": "a", "status": "fit", "config": "/etc/hostname"}]})),
    Case("merge escaping report", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "evil",
         shard({"entries": [{"name": "a", "status": "fit", "report": "../../x/evil.txt"}]})),
    Case("merge out-dir a file", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/afile"], 2, "afile",
         {**shard({"entries": []}), "afile": "x"}),
    Case("merge no out-dir", ["merge", "{tmp}/s1"], 2, "--out-dir", shard({"entries": []})),
    Case("merge entry twice", ["merge", "{tmp}/s1", "{tmp}/s2", "--out-dir", "{tmp}/o"], 2, "more than one shard",
         {**shard({"entries": [{"name": "a", "status": "error"}]}),
          "s2/index.json": json.dumps({"entries": [{"name": "a", "status": "error"}]})}),
    Case("merge unknown status", ["merge", "{tmp}/s1", "--out-dir", "{tmp}/o"], 2, "great",
         shard({"entries": [{"name": "a", "status": "great"}]})),
    Case("merge no shard", ["merge", "--out-dir", "{tmp}/o"], 2, "SHARD_DIR"),
]

REPORT = json.dumps({"trials": []})
PLOT = [
    Case("plot report missing", ["plot", "{tmp}/none.json", "--out", "{tmp}/p.svg"], 2, "none.json"),
    Case("plot report not json", ["plot", "{tmp}/r.json", "--out", "{tmp}/p.svg"], 2, "r.json", {"r.json": "{"}),
    Case("plot report a list", ["plot", "{tmp}/r.json", "--out", "{tmp}/p.svg"], 2, "not a vllm-fit report",
         {"r.json": "[]"}),
    Case("plot report an index", ["plot", "{tmp}/r.json", "--out", "{tmp}/p.svg"], 2, "not a vllm-fit report",
         {"r.json": INDEX}),
    Case("plot out not a picture", ["plot", "{tmp}/r.json", "--out", "{tmp}/p.txt"], 2, ".svg",
         {"r.json": REPORT}),
    Case("plot out under proc", ["plot", "{tmp}/r.json", "--out", "/proc/p.svg"], 2, "/proc", {"r.json": REPORT}),
    Case("plot without out", ["plot", "{tmp}/r.json"], 2, "--out", {"r.json": REPORT}),
]

CASES = SEARCH_VALUES + SEARCH_FILES + BATCH + VERIFY + COMPARE + MERGE + PLOT


def test_the_suite_is_large_enough():
    assert len(CASES) >= 100
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.fixture
def sandbox(tmp_path):
    """A folder with a model, and a stand-in interpreter that records launches in `launches`."""
    site = tmp_path / "standin-site" / "vllm"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('__version__ = "0.32.0"\n')
    launches = tmp_path / "launches"
    python = tmp_path / "standin-python"
    python.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then PYTHONPATH="%s" exec "%s" "$@"; fi\n'
                      'echo "$@" >> "%s"\nexit 1\n' % (site.parent, sys.executable, launches))
    python.chmod(0o755)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(model_config())
    return tmp_path


def _materialise(root: Path, files: Dict[str, Content], fmt) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() or path.is_symlink():
            path.unlink()
        if isinstance(content, Folder):
            path.mkdir(exist_ok=True)
        elif isinstance(content, Link):
            path.symlink_to(fmt(content.target))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(fmt(content))


def formatter(sandbox: Path):
    """The cases' {tmp}, {model} and {python} placeholders filled in for this sandbox."""
    values = {"tmp": str(sandbox), "model": str(sandbox / "m"), "python": str(sandbox / "standin-python")}

    def fmt(text: str) -> str:
        for key, value in values.items():
            text = text.replace("{%s}" % key, value)
        return text

    return fmt


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_with_its_code_and_no_launch(case, sandbox, capsys, monkeypatch):
    fmt = formatter(sandbox)

    _materialise(sandbox, case.files, fmt)
    monkeypatch.chdir(sandbox)
    monkeypatch.setenv("HF_HOME", str(sandbox / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sandbox / "xdg"))
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exited:
        cli.main([fmt(arg) for arg in case.argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("vllm-fit: "), err
    assert exited.value.code == case.code, err
    assert fmt(case.words) in err, err
    assert not (sandbox / "launches").exists(), "launched: %s" % (sandbox / "launches").read_text()


def test_written_files_keep_normal_permissions(tmp_path):
    """The atomic write honours the umask (0644 by default), not mkstemp's 0600."""
    from vllm_fit.files.atomic import write_text_atomic

    previous = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "a.yaml", "x: 1\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.yaml").stat().st_mode) == 0o644


DEVICE_CASES = [
    ("unknown visible device", ["--gpu-memory-utilization", "0.9"], {"CUDA_VISIBLE_DEVICES": "3"}, 3,
     "CUDA_VISIBLE_DEVICES=3"),
    ("tp above the visible devices", ["--tensor-parallel-size", "2"], {}, 2, "needs 2 devices"),
    ("kv size above the device", ["--kv-cache-memory", "500GiB"], {}, 2, "device's total memory"),
    ("busy device with require-idle", ["--require-idle"], {"OTHERS": "1"}, 3, "not idle"),
]


@pytest.mark.parametrize("args, env, code, words", [case[1:] for case in DEVICE_CASES],
                         ids=[case[0] for case in DEVICE_CASES])
def test_device_checks_refuse_before_a_launch(args, env, code, words, fake_world, fake_model, tmp_path):
    """TEST DOUBLE: the fakegpu's NVML (tests/fakegpu/pkg/pynvml.py) plays one 80 GiB device in the parent."""
    import subprocess

    others = [{"pid": 4242, "name": "jupyter", "gib": 10.0}] if env.pop("OTHERS", None) else []
    world = dict(fake_world(others=others), **env)
    done = subprocess.run([sys.executable, "-m", "vllm_fit", "search", "--model", str(fake_model), *args],
                          env=world, capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "world.json.state").exists(), "a trial was launched"
