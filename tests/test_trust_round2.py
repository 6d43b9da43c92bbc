"""Trust, second round (issue 29): alias bombs for every YAML reader, full disks, a full cache after the
fit was found, two batches on one --out-dir, fleets checked whole before a launch, config.json checks,
names shown escaped, relative cache folders. Each case asserts the exit code, one line, no launch and
(where it applies) an unchanged sandbox."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from vllm_fit import cli, store

BOMB = "bomb: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    "b%d: &b%d [%s]\n" % (i, i, ", ".join(["*%s" % ("a" if i == 0 else "b%d" % (i - 1))] * 9)) for i in range(8))


def tool(args: List[Any], cwd: Path, env: Optional[Dict[str, str]] = None,
         **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllm_fit", *map(str, args)], cwd=str(cwd), capture_output=True,
                          text=True, timeout=kwargs.pop("timeout", 60), env=env, **kwargs)


def listing(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("argv, files", [
    (["batch", "f.yaml", "--out-dir", "o"], {"f.yaml": BOMB + "models: []\n"}),
    (["verify", "c.yaml"], {"c.yaml": BOMB + "model: m\nmax-model-len: 8\n"}),
    (["compare", "old", "new"], {"old/a.yaml": BOMB + "model: m\nmax-model-len: 8\n", "new/a.yaml": "model: m\n"}),
    (["apply", "fit.yaml", "--to", "d.yaml"], {"fit.yaml": BOMB + "model: m\nmax-model-len: 8\n",
                                                "d.yaml": "services: {}\n"}),
    (["apply", "fit.yaml", "--to", "d.yaml", "--check"], {"fit.yaml": "model: m\nmax-model-len: 8\n"
                                                                      "gpu-memory-utilization: 0.9\n",
                                                           "d.yaml": BOMB + "services: {}\n"}),
])
def test_an_alias_bomb_is_refused_quickly_by_every_yaml_reader(tmp_path, argv, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = listing(tmp_path)
    started = time.monotonic()
    done = tool(argv, tmp_path)
    assert time.monotonic() - started < 30
    assert done.returncode == 2 and "alias bomb" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert listing(tmp_path) == before


def test_a_yaml_document_that_contains_itself_is_refused(tmp_path):
    (tmp_path / "f.yaml").write_text("models: &m [*m]\n")
    done = tool(["batch", "f.yaml", "--out-dir", "o"], tmp_path)
    assert done.returncode == 2 and "contains itself" in done.stderr


def test_a_full_cache_disk_after_the_fit_keeps_the_fit(fake_world, fake_model, tmp_path, monkeypatch, capsys):
    """TEST DOUBLE (the fakegpu): the cache cannot be written once the fit is found; --out and --report are."""
    env = fake_world()
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cache" / "fits"))

    monkeypatch.setattr(store.FitStore, "store", full)
    with pytest.raises(SystemExit) as exited:
        cli.main(["search", "--model", str(fake_model), "--gpu-memory-utilization", "0.9", "--max-len", "8192",
                  "--out", str(tmp_path / "fit.yaml"), "--report", str(tmp_path / "report.json")])
    err = capsys.readouterr().err
    assert exited.value.code == 0, err
    assert "warning: the fit was not cached" in err and "No space left on device" in err
    assert "max-model-len:" in (tmp_path / "fit.yaml").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["fit"] is not None


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (60, 60))


def test_a_write_that_fails_names_the_file_and_leaves_nothing_half_written(tmp_path):
    for side, length in (("old", 4096), ("new", 8192)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "a.yaml").write_text("model: m\nmax-model-len: %d\ngpu-memory-utilization: 0.9\n" % length)
    done = tool(["compare", "old", "new", "--out", "table.md"], tmp_path, preexec_fn=_small_files)
    assert done.returncode == 3 and "cannot write table.md" in done.stderr and done.stderr.count("\n") == 1
    assert not any(p.name.startswith(".table.md") for p in tmp_path.iterdir())


def test_a_relative_cache_folder_from_the_environment_is_refused(fake_model, tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME="relative/cache")
    env.pop("VLLM_FIT_CACHE_DIR", None)
    done = tool(["search", "--model", fake_model, "--gpu-memory-utilization", "0.9"], tmp_path, env=env)
    assert done.returncode == 2 and "XDG_CACHE_HOME" in done.stderr and "absolute" in done.stderr
    assert not (tmp_path / "relative").exists()


def test_a_second_batch_on_the_same_out_dir_is_refused_at_once(fake_world, fake_model, tmp_path):
    """TEST DOUBLE (the fakegpu, its engine hangs at start): the first batch holds --out-dir."""
    from conftest import default_signals

    env = fake_world(mode="hang_start")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("defaults: {kv_cache_memory: 1GiB}\nmodels:\n  - {model: '%s', name: a}\n" % fake_model)
    args = [sys.executable, "-m", "vllm_fit", "batch", str(fleet), "--out-dir", str(tmp_path / "out")]
    first = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "out" / ".vllm-fit.lock").exists():
            time.sleep(0.1)
        time.sleep(0.5)
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 3, second.stderr
        assert "in use by another vllm-fit batch (pid %d)" % first.pid in second.stderr
        assert second.stderr.count("\n") == 1
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 130
    entries = json.loads((tmp_path / "out" / "index.json").read_text())["entries"]
    assert [(e["name"], e["status"]) for e in entries] == [("a", "interrupted")]  # the first batch's own index
    assert not (tmp_path / "out" / ".vllm-fit.lock").exists()  # removed on release


LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 1024, "vocab_size": 100,
         "intermediate_size": 64, "torch_dtype": "float16", "model_type": "llama"}


@pytest.mark.parametrize("config, words", [
    (dict(LLAMA, num_key_value_heads=8), "num_key_value_heads 8 does not divide num_attention_heads 4"),
    (dict(LLAMA, quantization_config="awq"), "quantization_config must be a mapping"),
    ({"architectures": ["X"], "text_config": {"text_config": LLAMA}}, "text_config holds another text_config"),
    (dict(LLAMA, max_position_embeddings=None), "config.json names no maximum length"),
])
def test_config_json_problems_are_named_before_a_launch(tmp_path, config, words):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    done = tool(["search", "--model", model, "--gpu-memory-utilization", "0.9", "--python", sys.executable,
                 "--no-cache", "--work-dir", tmp_path / "work"], tmp_path)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "work").exists() or not list((tmp_path / "work").rglob("spec.json"))


def test_an_unlimited_tokenizer_length_is_no_limit(tmp_path):
    """transformers writes `"model_max_length": Infinity` for no limit; the config's maximum then holds."""
    from vllm_fit.prepare.modelinfo import read_model_info

    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": Infinity}')
    assert read_model_info(str(tmp_path)).derived_max_len == 1024
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": NaN}')
    with pytest.raises(Exception, match=r"tokenizer_config\.json is not valid JSON"):
        read_model_info(str(tmp_path))


def test_control_characters_from_a_fleet_file_are_shown_escaped(tmp_path):
    (tmp_path / "f.yaml").write_text('models:\n  - {model: "/m\\x00\\x1b[31m", name: a}\n')
    done = tool(["batch", "f.yaml", "--out-dir", "o"], tmp_path)
    assert done.returncode == 2 and "\x00" not in done.stderr and "\x1b" not in done.stderr
    assert "\\x00" in done.stderr or "\\x1b" in done.stderr


def test_a_config_naming_another_config_is_refused_before_a_launch(tmp_path):
    (tmp_path / "c.yaml").write_text("model: m\nmax-model-len: 1024\nconfig: other.yaml\n")
    done = tool(["verify", "c.yaml", "--python", sys.executable], tmp_path)
    assert done.returncode == 2 and "names another config file" in done.stderr


def test_plotting_a_report_with_a_huge_model_name_is_quick(tmp_path):
    pytest.importorskip("matplotlib")
    report = json.loads((Path(__file__).parent / "data" / "report-fit-explore.json").read_text())
    report["search"]["model"] = "m" * 200_000
    (tmp_path / "r.json").write_text(json.dumps(report))
    started = time.monotonic()
    done = tool(["plot", "r.json", "--out", "p.svg"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("changes, words", [
    ({"model_type": "deepseek_v32", "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048},
     "multi-head latent attention as model type deepseek_v32 lays it out (kv_lora_rank 512)"),
    ({"attention_chunk_size": 8192}, "chunked local attention (attention_chunk_size 8192) of model type llama"),
    ({"layer_types": ["mamba", "full_attention"]}, "layer types mamba"),
])
def test_the_least_kv_question_names_the_attention_it_cannot_cost(tmp_path, changes, words):
    """Without a GPU, the least KV size of a model whose KV cache config.json does not let the tool cost is
    refused naming that attention kind, never as if config.json were missing (issue 30)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(dict(LLAMA, **changes)))
    done = tool(["search", "--model", model, "--target-len", "512", "--search", "kv-cache-memory", "--python",
                 sys.executable, "--no-cache", "--work-dir", tmp_path / "work"], tmp_path)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "cannot cost the KV cache of " + words in last, done.stderr
    assert "needs the model's config.json" not in done.stderr
    assert not (tmp_path / "work").exists() or not list((tmp_path / "work").rglob("spec.json"))


def test_a_config_with_an_infinite_number_it_does_not_read_is_read(tmp_path):
    """Mamba2 configs carry `"time_step_limit": [0.0, Infinity]` (as a public repository's tests quote a
    checkpoint's config.json, a Swift port's Mamba2 tests); Python's json, and so transformers and vLLM,
    read it. It was refused ("Infinity is not a number vLLM takes", exit 2); the numbers the accounting
    reads are still refused when not finite."""
    from vllm_fit.errors import BadInput
    from vllm_fit.prepare.modelinfo import read_model_info

    mamba2 = ('{"model_type": "mamba2", "num_heads": 4, "head_dim": 4, "vocab_size": 64, "hidden_size": 16,'
              ' "state_size": 8, "num_hidden_layers": 2, "conv_kernel": 3, "n_groups": 2,'
              ' "time_step_limit": [0.0, Infinity], "max_position_embeddings": 4096}')
    (tmp_path / "config.json").write_text(mamba2)
    info = read_model_info(str(tmp_path))
    assert info.derived_max_len == 4096 and info.unmodelled_attention is not None
    (tmp_path / "config.json").write_text(mamba2.replace("4096", "Infinity"))
    with pytest.raises(BadInput, match="max_position_embeddings must be a finite number"):
        read_model_info(str(tmp_path))


@pytest.mark.parametrize("model_type", ["gemma3n_text", "gemma4_text", "mamba2", "falcon_h1", "granitemoehybrid",
                                        "nemotron_h", "bamba", "jamba", "qwen3_5_text", "lfm2_moe", "kimi_linear",
                                        "qwen3_next", "gpt_oss", "exaone4", "olmo3", "cohere2"])
def test_transformers_own_configs_of_decoder_families_are_read(tmp_path, model_type):
    """Each family's config as transformers writes it (its defaults, the shape of the family's hub models):
    never refused as a config.json vLLM cannot read. A sweep of every config class of transformers 5.19
    found Gemma 3n (a per-layer intermediate_size list), the mamba2 families (time_step_limit Infinity)
    and max_window_layers 0 refused; only encoders vLLM does not generate with remain refused."""
    from vllm_fit.prepare.modelinfo import read_model_info

    transformers = pytest.importorskip("transformers")
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip("this transformers has no %s" % model_type)
    config = transformers.CONFIG_MAPPING[model_type]().to_dict()
    (tmp_path / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16"}, default=str))
    info = read_model_info(str(tmp_path))
    assert info.model_type == model_type
