"""Hostile and odd inputs (issue 21): nothing clobbered, nothing followed, nothing leaked, nothing hangs.

Each case runs the real CLI in-process in the bad-input sandbox (a stand-in interpreter records any
launch) and passes when the exit code is the documented one, stderr is one line naming the problem,
nothing was launched, and nothing in the sandbox changed: the same files with the same bytes, no
folder created (a before/after listing). Property tests feed random and hostile bytes, YAML and JSON
to every reader: each answers or refuses with BadInput, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Dict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bad_input import (
    GOOD_CONFIG,
    Case,
    Folder,
    Link,
    _materialise,
    entry,
    fleet,
    formatter,
    model_config,
    sandbox,
    search,
)

from vllm_fit import cli
from vllm_fit.errors import FitError

assert sandbox  # the fixture, imported for this module's tests

DEEP = "[" * 200 + "]" * 200
DEEP_YAML = "models: " + "[" * 200 + "]" * 200 + "\n"
INDEX_A = json.dumps({"entries": [{"name": "a", "status": "fit", "config": "configs/a.yaml",
                                   "fit": {"max_model_len": 4096}}]})
SERVE = "model: '{model}'\nmax-model-len: 1024\n"


def _fifo(name: str) -> Dict[str, object]:
    return {name: "FIFO"}


CASES = [
    # --- outputs that would replace inputs
    Case("report over the model's config.json", search("--report", "{model}/config.json"), 2,
         "config.json of the model"),
    Case("report over the model's config via a link", search("--report", "r.json"), 2, "config.json of the model",
         {"r.json": Link("{model}/config.json")}),
    Case("work dir is the model folder", search("--work-dir", "{model}"), 2, "--work-dir"),
    Case("verify report over its config", ["verify", "c.yaml", "--report", "c.yaml", "--python", "{python}"], 2,
         "is an input", {"c.yaml": SERVE}),
    Case("compare --out over an input", ["compare", "old.json", "new.json", "--out", "old.json"], 2, "is an input",
         {"old.json": INDEX_A, "new.json": INDEX_A}),
    Case("plot --out over its report", ["plot", "r.svg", "--out", "r.svg"], 2, "is an input", {"r.svg": "{}"}),
    Case("merge into a shard", ["merge", "s1", "s2", "--out-dir", "s1"], 2, "input",
         {"s1/index.json": INDEX_A.replace('"a"', '"b"'), "s1/configs/b.yaml": SERVE, "s2/index.json": INDEX_A,
          "s2/configs/a.yaml": SERVE}),
    Case("merge copies a linked config", ["merge", "s2", "--out-dir", "all"], 2, "link",
         {"s2/index.json": INDEX_A, "s2/configs/a.yaml": Link("{model}/config.json")}),
    Case("merge through a linked configs folder", ["merge", "s2", "--out-dir", "all"], 2, "link",
         {"s2/index.json": INDEX_A, "elsewhere/a.yaml": SERVE, "s2/configs": Link("{tmp}/elsewhere")}),
    Case("batch into its baseline", ["batch", "fleet.yaml", "--out-dir", "base", "--baseline", "base"], 2, "input",
         {**fleet(entry()), "base/index.json": INDEX_A}),
    Case("batch index.json is a link", ["batch", "fleet.yaml", "--out-dir", "out"], 2, "symlink",
         {**fleet(entry()), "out/index.json": Link("{tmp}/elsewhere.json"), "elsewhere.json": "{}"}),
    Case("batch report path is a folder", ["batch", "fleet.yaml", "--out-dir", "out"], 2, "a folder",
         {**fleet(entry()), "out/reports/a.json": Folder()}),
    # --- pipes and devices never read
    Case("fleet file is a pipe", ["batch", "fleet.yaml", "--out-dir", "out"], 2, "is a pipe", _fifo("fleet.yaml")),
    Case("verify config is a pipe", ["verify", "c.yaml", "--python", "{python}"], 2, "is a pipe", _fifo("c.yaml")),
    Case("baseline is a pipe", ["batch", "fleet.yaml", "--out-dir", "out", "--baseline", "b.json"], 2, "is a pipe",
         {**fleet(entry()), "b.json": "FIFO"}),
    Case("compared index is a pipe", ["compare", "old.json", "new.json"], 2, "is a pipe",
         {"old.json": "FIFO", "new.json": INDEX_A}),
    Case("plotted report is a pipe", ["plot", "r.json", "--out", "r.svg"], 2, "is a pipe", _fifo("r.json")),
    Case("config.json is a pipe", search(), 2, "is a pipe", {"m/config.json": "FIFO"}),
    Case("fleet file is /dev/zero", ["batch", "/dev/zero", "--out-dir", "out"], 2, "a device"),
    # --- nesting and numbers
    Case("deeply nested fleet", ["batch", "fleet.yaml", "--out-dir", "out"], 2, "nested", {"fleet.yaml": DEEP_YAML}),
    Case("deeply nested engine argument", search("--engine-arg", "x=" + DEEP), 2, "nested"),
    Case("deeply nested config.json", search(), 2, "nested", {"m/config.json": DEEP}),
    Case("NaN in a compared index", ["compare", "old.json", "new.json"], 2, "NaN",
         {"old.json": INDEX_A.replace("4096", "NaN"), "new.json": INDEX_A}),
    Case("a word where the index has a number", ["compare", "old.json", "new.json"], 2, "max_model_len",
         {"old.json": INDEX_A.replace("4096", '"long"'), "new.json": INDEX_A}),
    Case("kv-cache-tokens in superscript", ["compare", "a", "b"], 0, "",
         {"a/x.yaml": "# kv-cache-tokens: \u00b2\n" + SERVE, "b/x.yaml": SERVE}),
    # --- config.json that cannot be a model
    *[Case("config.json %s" % label, search(), 2, words, {"m/config.json": model_config(**change)})
      for label, change, words in [
          ("with 0 layers", {"num_hidden_layers": 0}, "num_hidden_layers"),
          ("with -1 layers", {"num_hidden_layers": -1}, "num_hidden_layers"),
          ("with 1e12 layers", {"num_hidden_layers": 10**12}, "num_hidden_layers"),
          ("with layers as text", {"num_hidden_layers": "32"}, "num_hidden_layers"),
          ("with head_dim 0", {"head_dim": 0}, "head_dim"),
          ("with 4.5 heads", {"num_attention_heads": 4.5}, "num_attention_heads"),
          ("with 0 KV heads", {"num_key_value_heads": 0}, "num_key_value_heads"),
          ("with dtype float128", {"torch_dtype": "float128"}, "float128"),
          ("with architectures a string", {"architectures": "LlamaForCausalLM"}, "architectures"),
          ("with rope_scaling a list", {"rope_scaling": [1, 2]}, "rope_scaling"),
          ("with text_config a list", {"text_config": [1]}, "text_config"),
          ("with an MLA latent of true", {"model_type": "deepseek_v2", "kv_lora_rank": True,
                                          "qk_rope_head_dim": 64}, "kv_lora_rank"),
          ("with a chunk of -8192", {"model_type": "llama4_text", "attention_chunk_size": -8192},
           "attention_chunk_size"),
          ("with a mamba state of 1e12", {"model_type": "granitemoehybrid", "mamba_d_state": 10**12},
           "mamba_d_state"),
          ("with mamba heads as text", {"model_type": "granitemoehybrid", "mamba_n_heads": "8"}, "mamba_n_heads"),
          ("with 0 DeltaNet value heads", {"model_type": "qwen3_next", "linear_num_value_heads": 0},
           "linear_num_value_heads"),
          ("with a mamba inner size as text", {"model_type": "falcon_h1", "mamba_d_ssm": "3072"}, "mamba_d_ssm"),
          ("with -64 mamba heads", {"model_type": "zamba2", "n_mamba_heads": -64}, "n_mamba_heads"),
          ("with a convolution 1e9 wide", {"model_type": "lfm2", "conv_dim": 10 ** 9}, "conv_dim"),
          ("with a convolution kernel of 0", {"model_type": "lfm2", "conv_L_cache": 0}, "conv_L_cache"),
      ]],
    # --- verify configs that cannot serve
    Case("verify config with an empty model", ["verify", "c.yaml", "--python", "{python}"], 2, "model",
         {"c.yaml": "model: ''\nmax-model-len: 1024\n"}),
    Case("verify config with a length of 10^30", ["verify", "c.yaml", "--python", "{python}"], 2, "max-model-len",
         {"c.yaml": "model: '{model}'\nmax-model-len: 1000000000000000000000000000000\n"}),
    Case("verify config over the model's maximum", ["verify", "c.yaml", "--python", "{python}"], 2,
         "over the model's maximum", {"c.yaml": "model: '{model}'\nmax-model-len: 65536\n"}),
    Case("verify config with negative KV bytes", ["verify", "c.yaml", "--python", "{python}"], 2,
         "kv-cache-memory-bytes", {"c.yaml": SERVE + "kv-cache-memory-bytes: -5\n"}),
    # --- engine arguments the tool owns, and nonsense counts
    Case("engine arg config", search("--engine-arg", "config=x.yaml"), 2, "config"),
    Case("engine arg in capitals", search("--engine-arg", "MAX_MODEL_LEN=5"), 2, "lowercase"),
    Case("engine arg port with llm", search("--engine-arg", "port=8000", "--via", "llm"), 2, "port"),
    Case("engine arg max_num_seqs -1", search("--engine-arg", "max_num_seqs=-1"), 2, "max_num_seqs"),
    Case("fleet engine arg max_num_seqs 0", ["batch", "fleet.yaml", "--out-dir", "out"], 2, "max_num_seqs",
         fleet(entry("engine_args: {max_num_seqs: 0}"))),
    Case("concurrency of 10^15", search("--concurrency", "999999999999999"), 2, "--concurrency"),
    Case("shard 1/10^20", ["batch", "fleet.yaml", "--out-dir", "out", "--shard", "1/100000000000000000000"], 2,
         "--shard", fleet(entry())),
    # --- the environment
    Case("a 100 KB model name", ["search", "--model", "x" * 100000, "--python", "{python}"], 2, "characters"),
    Case("a model under a user who does not exist", ["search", "--model", "~nosuchuser-vllm-fit/x", "--python",
                                                      "{python}"], 3, "does not exist"),
]


def _listing(root: Path) -> Dict[str, str]:
    """Every path under root with what it is and, for files, a hash of the bytes."""
    found = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[str(path)] = "link:" + os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                found[str(path)] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "other:%o" % stat.S_IFMT(info.st_mode)
    return found


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_input_changes_nothing(case, sandbox, capsys, monkeypatch):
    fmt = formatter(sandbox)

    fifos = [name for name, content in case.files.items() if content == "FIFO"]
    _materialise(sandbox, {k: v for k, v in case.files.items() if v != "FIFO"}, fmt)
    for name in fifos:
        path = sandbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        os.mkfifo(path)
    monkeypatch.chdir(sandbox)
    monkeypatch.setenv("HF_HOME", str(sandbox / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sandbox / "xdg"))
    before = _listing(sandbox)
    with pytest.raises(SystemExit) as exited:
        cli.main([fmt(arg) for arg in case.argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert exited.value.code == case.code, err
    if case.code:
        assert err.count("\n") == 1 and err.startswith("vllm-fit: "), err
        assert fmt(case.words) in err, err
    assert not (sandbox / "launches").exists(), "launched: %s" % (sandbox / "launches").read_text()
    after = _listing(sandbox)
    assert after == before, "changed: %s" % sorted(set(after.items()) ^ set(before.items()))


def test_yaml_merge_keys_are_read():
    from vllm_fit.files.yaml_text import strict_load

    assert strict_load("base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  b: 3\n")["x"] == {"a": 1, "b": 3}


def test_junit_is_well_formed_with_control_characters():
    import xml.dom.minidom

    from vllm_fit.export.junit import Verdict, junit_xml

    text = junit_xml("s", [{"name": "a\x01", "status": "failed", "verdict": Verdict.FAILED, "message": "x\x07y",
                            "details": "\x1b[31mred\x1b[0m"}])
    xml.dom.minidom.parseString(text)


def test_nested_secrets_never_reach_a_file(tmp_path):
    """hf_overrides={"api_key": ...} and extra=[{"token": ...}]: redacted in reports, left out of configs,
    scrubbed from logs."""
    from vllm_fit.export.yaml_config import render_config
    from vllm_fit.redact import public_args, secret_values

    args = {"model": "m", "max_model_len": 8, "hf_overrides": {"api_key": "sekret-value-1"},
            "extra": [{"token": "sekret-value-2"}], "max_num_seqs": 2}
    text = render_config(args, [])
    assert "sekret" not in text and "hf-overrides" not in text.split("#")[0] and "max-num-seqs: 2" in text
    assert "sekret" not in json.dumps(public_args(args))
    assert sorted(secret_values(args)) == ["sekret-value-1", "sekret-value-2"]


def test_the_journal_and_lock_refuse_links_and_folders(tmp_path):
    from vllm_fit.errors import EnvironmentProblem
    from vllm_fit.store import FitStore

    store = FitStore(tmp_path / "cache")
    (tmp_path / "cache" / "journals").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    (tmp_path / "cache" / "journals" / "f.jsonl").symlink_to(outside)
    with pytest.raises(EnvironmentProblem, match="symlink"):
        store.journal("f").load()
    (tmp_path / "cache" / "journals" / "g.lock").mkdir()
    with pytest.raises(EnvironmentProblem, match="folder"), store.lock("g"):
        pass
    assert outside.read_text() == "keep\n"


def test_written_files_never_copy_setuid_or_world_write(tmp_path):
    from vllm_fit.files.atomic import write_text_atomic

    target = tmp_path / "a.yaml"
    target.write_text("old\n")
    target.chmod(0o4777)
    previous = os.umask(0o022)
    try:
        write_text_atomic(target, "new\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


# --- every reader answers or refuses, whatever the bytes ---------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.text(max_size=300),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
                 lambda inner: st.one_of(st.lists(inner, max_size=4),
                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                 max_leaves=20).map(json.dumps),
)


def _readers(path: Path):
    from vllm_fit.export.json_report import read_report
    from vllm_fit.export.yaml_config import read_comment_facts, read_config
    from vllm_fit.files.reading import read_json
    from vllm_fit.files.yaml_text import read_yaml
    from vllm_fit.fleet.fleet_file import load_fleet
    from vllm_fit.fleet.index import load_index
    from vllm_fit.prepare.modelinfo import read_model_info

    return [lambda: read_yaml(path, "file"), lambda: read_json(path, "file"), lambda: load_index(path),
            lambda: read_report(path), lambda: read_config(path), lambda: read_comment_facts(path),
            lambda: load_fleet(str(path), {}, "python3"), lambda: read_model_info(str(path.parent))]


@settings(max_examples=60, deadline=None)
@given(text=HOSTILE_TEXT)
def test_every_reader_answers_or_refuses(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("reader")
    path = folder / "config.json"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    for read in _readers(path):
        try:
            read()
        except FitError as exc:  # refused: what a reader may do with a file it cannot use, in one line
            assert str(exc) and "\n" not in str(exc).strip(), str(exc)


assert GOOD_CONFIG  # the bad-input suite's config, imported for the sandbox's model


def test_a_20_mb_value_in_a_fleet_is_refused(sandbox, capsys, monkeypatch):
    (sandbox / "fleet.yaml").write_text("defaults: {python: '%s'}\nmodels:\n  - {model: '%s', name: a, engine_args:"
                                        " {hf_overrides: {x: '%s'}}}\n" % (sandbox / "standin-python",
                                                                           sandbox / "m", "y" * (20 << 20)))
    monkeypatch.chdir(sandbox)
    with pytest.raises(SystemExit) as exited:
        cli.main(["batch", "fleet.yaml", "--out-dir", "out"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "hf_overrides" in err and err.count("\n") == 1, err
    assert not (sandbox / "launches").exists() and not (sandbox / "out").exists()


@pytest.mark.parametrize("experts", [{"0": {"head_dim": "a"}}, "8", [8], -1, 1.5])
def test_counts_of_odd_types_leave_the_weights_estimate_unknown(experts):
    """num_experts, num_key_value_heads or head_dim of a type that is no count: the estimate is None, not a
    TypeError out of the model reading (found by a local fuzz of hub configs with odd fields)."""
    from vllm_fit.prepare.modelinfo import config_weights_bytes

    base = {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512, "intermediate_size": 1024,
            "vocab_size": 1000, "torch_dtype": "bfloat16"}
    assert config_weights_bytes(dict(base)) is not None
    for key in ("num_experts", "num_local_experts", "num_key_value_heads", "head_dim"):
        assert config_weights_bytes(dict(base, **{key: experts})) is None
