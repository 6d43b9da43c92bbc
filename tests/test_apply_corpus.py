"""`vllm-fit apply` on real deployment files (tests/data/deploy, origins in SOURCES.md), one test per file:
the lines that change, and the values vLLM gets afterwards, found without vllm-fit's reader (the real
shell and vLLM's own argument parser: tests/deploy_oracle.py) where the file runs a command; or the
refusal, with nothing written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Sequence, Tuple

import pytest
from conftest import ROOT
from deploy_oracle import container_argv, container_at, run_recorded, vllm_args, vllm_parse

CORPUS = ROOT / "tests" / "data" / "deploy"


def fit_file(folder: Path, model: str, length: int, util: float, name: str = "", vllm: str = "0.32.0",
             settings: Sequence[str] = ()) -> Path:
    lines = ["# vllm-fit: 0.3.0", "# vllm: %s" % vllm]
    if name:
        lines.append("# name: %s" % name)
    lines += ["model: %s" % model, "max-model-len: %d" % length, "gpu-memory-utilization: %s" % util, *settings]
    path = folder / "fit.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def apply(tmp_path: Path, file: str, model: str, length: int, util: float, name: str = "",
          extra: Sequence[str] = (), settings: Sequence[str] = (),
          vllm: str = "0.32.0") -> Tuple[subprocess.CompletedProcess, str, str]:
    shutil.copy(CORPUS / file, tmp_path / file)
    before = (tmp_path / file).read_text()
    fit_file(tmp_path, model, length, util, name, vllm, settings)
    done = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", file, *extra],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    return done, before, (tmp_path / file).read_text()


def changed(before: str, after: str) -> Tuple[List[str], List[str]]:
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    return ([x[1:] for x in lines if x.startswith("-") and not x.startswith("---")],
            [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")])


EDITS: List[Tuple[str, str, int, float, str, List[str], List[str]]] = [
    ("lws-vllm-gpu.yaml", "meta-llama/Llama-3.1-405B-Instruct", 32768, 0.92, "",
     ["                 python3 -m vllm.entrypoints.openai.api_server --port 8080 --model"
      " meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline_parallel_size 2\""],
     ["                 python3 -m vllm.entrypoints.openai.api_server --port 8080 --model"
      " meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline_parallel_size 2 --max-model-len 32768"
      " --gpu-memory-utilization 0.92\""]),
    ("gke-gemma3-1b-vllm.yaml", "google/gemma-3-1b-it", 32768, 0.92, "", [],
     ["        - --max-model-len=32768", "        - --gpu-memory-utilization=0.92"]),
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", 65536, 0.9, "",
     ["                python3 -m vllm.entrypoints.openai.api_server --port 8080 --model deepseek-ai/DeepSeek-R1"
      " --tensor-parallel-size 8 --pipeline-parallel-size 2\""],
     ["                python3 -m vllm.entrypoints.openai.api_server --port 8080 --model deepseek-ai/DeepSeek-R1"
      " --tensor-parallel-size 8 --pipeline-parallel-size 2 --max-model-len 65536 --gpu-memory-utilization 0.9\""]),
    ("aibrix-pd-model.yaml", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 32768, 0.92, "decode",
     ["                      --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"],
     ["                      --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
      " --max-model-len 32768 --gpu-memory-utilization 0.92"]),
    ("aibrix-quickstart-model.yaml", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 24576, 0.9, "",
     ['            - "12288" # 24k length, this is to avoid "The model\'s max seq len (131072) is larger than the'
      ' maximum number of tokens that can be stored in KV cache" issue.'],
     ['            - "24576" # 24k length, this is to avoid "The model\'s max seq len (131072) is larger than the'
      ' maximum number of tokens that can be stored in KV cache" issue.',
      "            - --gpu-memory-utilization", '            - "0.9"']),
    ("k8s-args-only-old-image.yaml", "meta-llama/Llama-3.2-3B-Instruct", 32768, 0.9, "",
     ['          - "8192"'], ['          - "32768"', "          - --gpu-memory-utilization", '          - "0.9"']),
    ("vllm-chart-values.yaml", "/data", 2048, 0.5, "",
     ['  command: ["vllm", "serve", "/data/", "--served-model-name", "opt-125m", "--enforce-eager", "--dtype",'
      ' "bfloat16", "--block-size", "16", "--host", "0.0.0.0", "--port", "8000"]'],
     ['  command: ["vllm", "serve", "/data/", "--served-model-name", "opt-125m", "--enforce-eager", "--dtype",'
      ' "bfloat16", "--block-size", "16", "--host", "0.0.0.0", "--port", "8000", "--max-model-len", "2048",'
      ' "--gpu-memory-utilization", "0.5"]']),
    ("kserve-isvc-vllm-container.yaml", "/mnt/models", 4096, 0.9, "", [],
     ["          - --max-model-len", '          - "4096"', "          - --gpu-memory-utilization",
      '          - "0.9"']),
    ("kserve-isvc-huggingfaceserver.yaml", "meta-llama/Llama-2-7b-chat-hf", 4096, 0.9, "", [],
     ["      - --max-model-len=4096", "      - --gpu-memory-utilization=0.9"]),
    ("kserve-isvc-llama3-vllm-backend.yaml", "meta-llama/meta-llama-3-8b-instruct", 8192, 0.9, "", [],
     ["        - --max-model-len=8192", "        - --gpu-memory-utilization=0.9"]),
    ("kserve-isvc-storageuri-flow.yaml", "Qwen/Qwen2.5-0.5B-Instruct", 32768, 0.9, "",
     ['      args: ["--model_name=qwen"]'],
     ['      args: ["--model_name=qwen", "--max-model-len=32768", "--gpu-memory-utilization=0.9"]']),
    ("openshift-servingruntime-isvc.yaml", "Qwen/Qwen3-0.6B", 32768, 0.9, "", [],
     ['      args: ["--max-model-len=32768", "--gpu-memory-utilization=0.9"]']),
    ("compose-lora-folded.yaml", "meta-llama/Meta-Llama-3.1-8B-Instruct", 32768, 0.9, "",
     ["      --port 8000"], ["      --port 8000 --max-model-len 32768"]),
    ("pstack-chart-values-head.yaml", "mistralai/Mistral-7B-Instruct-v0.2", 32768, 0.92, "",
     ["      maxModelLen: 16384", '        - "0.4"'], ["      maxModelLen: 32768", '        - "0.92"']),
    ("pstack-values-02-basic-config.yaml", "meta-llama/Llama-3.1-8B-Instruct", 32768, 0.92, "",
     ["      maxModelLen: 4096", '      extraArgs: ["--disable-log-requests", "--gpu-memory-utilization", "0.8"]'],
     ["      maxModelLen: 32768", '      extraArgs: ["--disable-log-requests", "--gpu-memory-utilization", "0.92"]']),
    ("pstack-values-04-multiple-models.yaml", "mistralai/Mistral-7B-Instruct-v0.2", 1048576, 0.92, "",
     ["      maxModelLen: 4096"], ['      maxModelLen: "1048576"', "      gpuMemoryUtilization: 0.92"]),
    ("pstack-values-10-disagg-prefill.yaml", "Qwen/Qwen3-8B", 32768, 0.92, "llama-decode", [],
     ["        maxModelLen: 32768", "        gpuMemoryUtilization: 0.92"]),
    ("pstack-values-15a-raycluster.yaml", "distilbert/distilgpt2", 1024, 0.5, "", [],
     ["      maxModelLen: 1024", "      gpuMemoryUtilization: 0.5"]),
    ("pstack-values-25-v100-single-gpu.yaml", "Qwen/Qwen2.5-0.5B-Instruct", 32768, 0.9, "",
     ["      maxModelLen: 16384"], ["      maxModelLen: 32768"]),
    # vLLM images up to 0.11.0 run the api_server module, which takes --model (vllm serve of 0.10 would refuse it)
    ("k8s-gateway-lora-old-image.yaml", "meta-llama/Llama-3.1-8B-Instruct", 32768, 0.92, "",
     ['        - "16384"', '        - "0.90"'], ['        - "32768"', '        - "0.92"']),
    ("compose-devstral-old-image.yaml", "unsloth/Devstral-Small-2507-bnb-4bit", 65536, 0.9, "",
     ['    command: ["--model", "unsloth/Devstral-Small-2507-bnb-4bit", "--served-model-name", "devstral",'
      ' "--quantization", "bitsandbytes", "--load_format", "bitsandbytes", "--tool-call-parser", "mistral",'
      ' "--enable-auto-tool-choice", "--max-model-len", "64000", "--pipeline-parallel-size", "2"]'],
     ['    command: ["--model", "unsloth/Devstral-Small-2507-bnb-4bit", "--served-model-name", "devstral",'
      ' "--quantization", "bitsandbytes", "--load_format", "bitsandbytes", "--tool-call-parser", "mistral",'
      ' "--enable-auto-tool-choice", "--max-model-len", "65536", "--pipeline-parallel-size", "2",'
      ' "--gpu-memory-utilization", "0.9"]']),
    # Vertex AI's pytorch-vllm-serve image runs its args as a command: `python -m vllm.entrypoints.api_server`
    ("cloudrun-vertex-args-only.yaml", "/models/gemma-2-9b", 4096, 0.9, "",
     ["        - --gpu-memory-utilization=0.95",
      "        - --max-model-len=3968 # GPU メモリの都合上 --max-model-len を指定"],
     ["        - --gpu-memory-utilization=0.9",
      "        - --max-model-len=4096 # GPU メモリの都合上 --max-model-len を指定"]),
    ("kubeai-llama-3.1-8b-fp8-l4.yaml", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 20480, 0.93, "",
     ["    - --max-model-len=16384", "    - --gpu-memory-utilization=0.9"],
     ["    - --max-model-len=20480", "    - --gpu-memory-utilization=0.93"]),
]


@pytest.mark.parametrize("file, model, length, util, name, removed, added", EDITS, ids=[e[0] for e in EDITS])
def test_each_real_file_gets_exactly_the_fit(tmp_path, file, model, length, util, name, removed, added):
    done, before, after = apply(tmp_path, file, model, length, util, name)
    assert done.returncode == 0, done.stderr
    assert changed(before, after) == (removed, added)
    check = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", "--to", file, "--check"],
                           cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr  # the edited file is the fit, read back


SHELL_ORACLE: List[Tuple[str, str, str, int, Any, List[Any], Sequence[str], str]] = [
    # file, model, name, document, container path, the servers' containers (path -> fitted?), entrypoint, the
    # vLLM the fit was found on (the image's, so that a lower value is written)
    ("lws-vllm-gpu.yaml", "meta-llama/Llama-3.1-405B-Instruct", "", 0,
     ["spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers", 0], [True], (), "0.32.0"),
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", "", 0,
     ["spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers", 0], [True], (), "0.32.0"),
    ("gke-gemma3-1b-vllm.yaml", "google/gemma-3-1b-it", "", 0, ["spec", "template", "spec", "containers", 0], [True],
     (), "0.32.0"),
    ("aibrix-pd-model.yaml", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "decode", 0,
     ["spec", "template", "spec", "roles", 1, "template", "spec", "containers", 0], [True], (), "0.32.0"),
    ("aibrix-pd-model.yaml", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "decode", 0,
     ["spec", "template", "spec", "roles", 0, "template", "spec", "containers", 0], [False], (), "0.32.0"),
    ("k8s-args-only-old-image.yaml", "meta-llama/Llama-3.2-3B-Instruct", "", 0,
     ["spec", "template", "spec", "containers", 0], [True], ("python3", "-m", "vllm.entrypoints.openai.api_server"),
     "0.32.0"),
    ("cloudrun-vertex-args-only.yaml", "/models/gemma-2-9b", "", 0, ["spec", "template", "spec", "containers", 0],
     [True], (), "0.32.0"),
    ("k8s-gateway-lora-old-image.yaml", "meta-llama/Llama-3.1-8B-Instruct", "", 2,
     ["spec", "template", "spec", "containers", 0], [True], ("python3", "-m", "vllm.entrypoints.openai.api_server"),
     "0.10.1"),
]


@pytest.mark.vllm
@pytest.mark.parametrize("file, model, name, document, keys, fitted, entrypoint, vllm", SHELL_ORACLE,
                         ids=["%s-%s" % (s[0], s[4][-1] if len(s[4]) < 8 else s[4][4]) for s in SHELL_ORACLE])
def test_the_shell_and_vllm_read_the_fit_from_the_edited_file(tmp_path, file, model, name, document, keys, fitted,
                                                              entrypoint, vllm):
    """The edited container run by /bin/sh with stub servers; the recorded argv parsed by vLLM's parser."""
    pytest.importorskip("vllm")
    done, before, after = apply(tmp_path, file, model, 12345, 0.87, name, vllm=vllm)
    assert done.returncode == 0, done.stderr
    for text, expect_fit in ((before, False), (after, fitted[0])):
        runs = [vllm_args(r) for r in run_recorded(container_argv(container_at(text, document, keys), entrypoint),
                                                    tmp_path)]
        servers = [r for r in runs if r is not None]
        assert len(servers) == 1, runs
        parsed = vllm_parse(servers[0])
        assert (parsed.model_tag or parsed.model) == model
        if expect_fit:
            assert (parsed.max_model_len, parsed.gpu_memory_utilization) == (12345, 0.87)
        else:
            assert parsed.max_model_len != 12345 and parsed.gpu_memory_utilization != 0.87


REFUSALS: List[Tuple[str, str, str, str]] = [
    ("aibrix-pd-model.yaml", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "", "matches 2 servers"),
    ("kserve-isvc-llama3-hf-backend.yaml", "meta-llama/meta-llama-3-8b-instruct", "",
     "runs the huggingface backend, not vLLM"),
    ("kserve-vllmserver-runtime.yaml", "org/model", "", "a template; apply the fit to the InferenceService"),
    ("kuberay-ray-service-vllm.yaml", "meta-llama/Meta-Llama-3-8B-Instruct", "",
     "line 21 names meta-llama/Meta-Llama-3-8B-Instruct, but not in a vLLM command line"),
    ("openshift-llm-d-llminferenceservice.yaml", "Qwen/Qwen3-0.6B", "", "line 13 names Qwen/Qwen3-0.6B"),
    ("kubeai-deepseek-ollama.yaml", "deepseek-r1:1.5b", "", "but not in a vLLM command line"),
    ("compose-tp-folded.yaml", "meta-llama/Llama-3.3-70B-Instruct", "",
     "the image vllm/vllm-openai:v0.6.3.post1 runs vLLM 0.6.3, the fit was found on 0.32.0"),
    ("compose-devstral-old-image.yaml", "unsloth/Devstral-Small-2507-bnb-4bit", "",
     "would lower --max-model-len 64000 -> 8192, but the image vllm/vllm-openai:v0.10.1.1 runs vLLM 0.10.1.1"),
]


@pytest.mark.parametrize("file, model, name, words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_place_and_write_nothing(tmp_path, file, model, name, words):
    done, before, after = apply(tmp_path, file, model, 8192, 0.9, name)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert after == before


def test_a_lower_fit_for_another_vllm_applies_when_allowed(tmp_path):
    done, before, after = apply(tmp_path, "compose-tp-folded.yaml", "meta-llama/Llama-3.3-70B-Instruct", 8192, 0.9,
                                extra=["--allow-mismatch"])
    assert done.returncode == 0, done.stderr
    assert changed(before, after) == (["      --gpu-memory-utilization 0.92", "      --max-model-len 16384"],
                                      ["      --gpu-memory-utilization 0.9", "      --max-model-len 8192"])


OTHER_SETUP: List[Tuple[str, str, List[str], int, int, str]] = [
    # file, model, the settings the fit was found with, its length, the exit code, what the refusal names
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", ["tensor-parallel-size: 16"], 20000, 2,
     "may not hold for this server, found with other settings than it runs with: --tensor-parallel-size 8 here, 16"
     " in the fit; --pipeline-parallel-size 2 here, 1 (not set) in the fit"),  # 16 GPUs split otherwise (MLA's KV)
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", ["tensor-parallel-size: 32"], 20000, 2,
     "--tensor-parallel-size 8 here, 32 in the fit"),  # fewer GPUs a replica: less room
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", ["tensor-parallel-size: 8", "pipeline-parallel-size: 2"],
     20000, 0, ""),
    ("gke-lws-deepseek-r1.yaml", "deepseek-ai/DeepSeek-R1", ["tensor-parallel-size: 8"], 20000, 0, ""),  # more room
    ("pstack-chart-values-head.yaml", "mistralai/Mistral-7B-Instruct-v0.2",
     ["tensor-parallel-size: 1", "enable-lora: true", "max-loras: 4"], 8192, 2,
     "would lower --max-model-len 16384 -> 8192, but the server runs with settings that hold more than the fit's:"
     " --tensor-parallel-size 2 here, 1 in the fit"),
    ("pstack-chart-values-head.yaml", "mistralai/Mistral-7B-Instruct-v0.2",
     ["tensor-parallel-size: 1", "enable-lora: true", "max-loras: 4"], 20000, 0, ""),
    ("pstack-chart-values-head.yaml", "mistralai/Mistral-7B-Instruct-v0.2", ["tensor-parallel-size: 2"], 20000, 2,
     "--enable-lora on here, off (not set) in the fit; --max-loras 4 here, 1 (not set) in the fit"),
    ("pstack-values-25-v100-single-gpu.yaml", "Qwen/Qwen2.5-0.5B-Instruct",
     ["tensor-parallel-size: 2", "dtype: float32"], 20000, 2, "--tensor-parallel-size 1 here, 2 in the fit"),
    ("pstack-values-25-v100-single-gpu.yaml", "Qwen/Qwen2.5-0.5B-Instruct",  # half the bytes: more room
     ["tensor-parallel-size: 1", "dtype: float32"], 20000, 0, ""),
    ("pstack-values-25-v100-single-gpu.yaml", "Qwen/Qwen2.5-0.5B-Instruct",
     ["tensor-parallel-size: 1", "enforce-eager: true", "dtype: bfloat16"], 20000, 0, ""),
    ("compose-tp-folded.yaml", "meta-llama/Llama-3.3-70B-Instruct", ["tensor-parallel-size: 2", "kv-cache-dtype: fp8"],
     20000, 2, "--kv-cache-dtype auto (not set) here, fp8 in the fit"),
    ("compose-tp-folded.yaml", "meta-llama/Llama-3.3-70B-Instruct", ["tensor-parallel-size: 2"], 20000, 2,
     "--enforce-eager on here, off (not set) in the fit"),  # holds more, but the image's vLLM is 0.6.3: lowering 0.92
    ("compose-tp-folded.yaml", "meta-llama/Llama-3.3-70B-Instruct", ["tensor-parallel-size: 2", "enforce-eager: true"],
     20000, 0, ""),
]


@pytest.mark.parametrize("file, model, settings, length, code, words", OTHER_SETUP,
                         ids=["%s-%d" % (s[0], i) for i, s in enumerate(OTHER_SETUP)])
def test_a_fit_found_with_other_settings_than_the_server_runs_is_refused(tmp_path, file, model, settings, length,
                                                                         code, words):
    """Every fit vllm-fit writes records its search's tensor-parallel-size and engine arguments. Where a server
    runs with values of those that leave less room (fewer GPUs, wider dtypes, CUDA graphs, LoRA), the fit is
    refused; where they leave more, only a lower value is (the fit holds there, but is short)."""
    util = 0.95 if file.startswith("compose") and code == 0 else 0.9  # 0.95: no lowering on the 0.6.3 image
    done, before, after = apply(tmp_path, file, model, length, util, settings=settings)
    assert done.returncode == code and words in done.stderr, done.stderr
    if code:
        assert after == before and done.stderr.count("\n") == 1
        assert apply(tmp_path, file, model, length, util, settings=settings,
                     extra=["--allow-mismatch"])[0].returncode == 0
    else:
        assert any(str(length) in line for line in changed(before, after)[1])


def test_every_corpus_file_is_listed_with_its_origin():
    listed = (CORPUS / "SOURCES.md").read_text()
    for path in CORPUS.glob("*.yaml"):
        assert "| %s |" % path.name in listed, path.name



def _config_mount(tmp_path: Path, config_edit=None) -> Path:
    """The compose folder with its bind-mounted vLLM option file (config-mount/ in the corpus)."""
    folder = tmp_path / "config-mount"
    shutil.copytree(CORPUS / "config-mount", folder)
    if config_edit is not None:
        path = folder / "config" / "vllm.yaml"
        path.write_text(config_edit(path.read_text()))
    fit_file(folder, "meta-llama/Llama-3.1-8B-Instruct", 24576, 0.9, settings=["tensor-parallel-size: 1"])
    return folder


def _apply_in(folder: Path, *files: str) -> subprocess.CompletedProcess:
    targets = [word for file in files for word in ("--to", file)]
    return subprocess.run([sys.executable, "-m", "vllm_fit", "apply", "fit.yaml", *targets], cwd=str(folder),
                          capture_output=True, text=True, timeout=120)


def test_a_config_file_bind_mounted_beside_the_compose_file_is_read(tmp_path):
    """`vllm serve --config /etc/vllm/config.yaml`, the file mounted from ./config/vllm.yaml: the model and the
    values come from that file, the fit goes on the command line (which wins over it); a utilization already
    the fit's is left alone."""
    folder = _config_mount(tmp_path)
    before = (folder / "compose.yaml").read_text()
    done = _apply_in(folder, "compose.yaml")
    assert done.returncode == 0, done.stderr
    assert "--max-model-len 32768 -> 24576" in done.stderr
    assert changed(before, (folder / "compose.yaml").read_text()) == (
        ["        exec vllm serve --config /etc/vllm/config.yaml"],
        ["        exec vllm serve --config /etc/vllm/config.yaml --max-model-len 24576"])
    assert "max-model-len: 32768" in (folder / "config" / "vllm.yaml").read_text()  # never edited from there


def test_the_option_file_itself_gets_the_fit(tmp_path):
    """Applying to the `vllm serve --config` file (what `search --out` writes): its keys are edited in place
    (this was refused as "shared through a YAML anchor" before: the whole document is that server)."""
    folder = _config_mount(tmp_path)
    config = folder / "config" / "vllm.yaml"
    before = config.read_text()
    done = _apply_in(folder, "config/vllm.yaml")
    assert done.returncode == 0, done.stderr
    assert changed(before, config.read_text()) == (["max-model-len: 32768"], ["max-model-len: 24576"])


@pytest.mark.parametrize("edit, words", [
    (lambda text: text.replace("gpu-memory-utilization: 0.90", "kv-cache-memory-bytes: 20GiB"),
     "it sets --kv-cache-memory-bytes (in its --config file), which decides the KV cache instead of"
     " --gpu-memory-utilization"),
    (lambda text: text + "tensor-parallel-size: 2\n",
     "would lower --max-model-len 32768 -> 24576, but the server runs with settings that hold more than the fit's:"
     " --tensor-parallel-size 2 here, 1 in the fit"),
    (None, "options from /etc/vllm/config.yaml (mounted from"),
], ids=["other knob in the file", "parallelism in the file", "file not there"])
def test_what_the_mounted_option_file_sets_is_compared_like_the_command_line(tmp_path, edit, words):
    folder = _config_mount(tmp_path, edit)
    if edit is None:
        (folder / "config" / "vllm.yaml").unlink()
    before = (folder / "compose.yaml").read_text()
    done = _apply_in(folder, "compose.yaml")
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert (folder / "compose.yaml").read_text() == before
