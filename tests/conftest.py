"""Shared fixtures: the fake GPU world (test double) and, for integration tests, real vLLM on CPU."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from hypothesis import settings

# Property tests explore many worlds, the same ones on every run (CI must not flake on a new draw);
# HYPOTHESIS_PROFILE=explore draws new worlds each run.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

from fake_worlds import environment, fixture_model, fixture_world, write_world  # noqa: E402


def _starts_real_vllm(item: pytest.Item) -> bool:
    """The item's file is marked `vllm` as a whole: every test in it starts real vLLM (tens of seconds each)."""
    marks = getattr(getattr(item, "module", None), "pytestmark", [])
    return any(mark.name == "vllm" for mark in (marks if isinstance(marks, list) else [marks]))


def pytest_collection_modifyitems(items: list) -> None:
    """Longest first: the tests of the files that start real vLLM (tens of seconds each), then the rest, each in
    their order. `make test` runs pytest-xdist with `--dist loadgroup`, which hands out tests one by one in this
    order (after the xdist groups), so the run ends on short tests on both workers. Handed out by file, the
    families file alone kept one worker busy as long as all the other files kept the other (2026-12-07: 39 of 41
    minutes)."""
    items.sort(key=lambda item: 0 if _starts_real_vllm(item) else 1)


@pytest.fixture
def fake_world(tmp_path) -> Callable[..., Dict[str, str]]:
    """Write a simulated GPU world (tests/fake_worlds.fixture_world's numbers) and return the environment
    that makes trials use it; each call starts the world afresh (no trial has run in it).

    TEST DOUBLE: the shared fakegpu (tests/fakegpu: vLLM, torch, pynvml, nvidia-smi) replaces the real
    ones through PYTHONPATH and PATH.
    """

    def make(**overrides: Any) -> Dict[str, str]:
        path = write_world(fixture_world(**overrides), tmp_path)
        env = environment(path)
        env["VLLM_FIT_CACHE_DIR"] = str(tmp_path / "cache")
        return env

    return make


@pytest.fixture
def fake_model(tmp_path) -> Path:
    """A model directory with a config.json only (the fake vLLM loads nothing): the fixture worlds' model."""
    from simulator.worlds import config_json

    model = tmp_path / "fake-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config_json(fixture_model())))
    return model


def plan_for(python: str, work_dir: Path, timeout_s: float, env: Dict[str, str], version: str = "0.32.0",
             block_size: int = 16, **extra: Any):
    """A TrialPlan for tests that launch single trials by hand."""
    from vllm_fit.trial.record import TrialContext
    from vllm_fit.trial.run import TrialPlan

    return TrialPlan(python=python, base_kwargs={}, timeout_s=timeout_s, env=env, work_dir=work_dir,
                     context=TrialContext(version, block_size), **extra)


def default_signals() -> None:
    """preexec_fn for a tool a test interrupts: SIGINT back to its default in the child (a suite run in
    the background or under nohup ignores it, and an ignored SIGINT is inherited)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


# --- real vLLM (CPU backend) ------------------------------------------------------------------

BLOCK_BYTES = 128 * 512
"""One CPU KV block of the tiny model: 128 tokens x 512 bytes per token."""


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The interpreter of the vLLM CPU environment ($VLLM_FIT_TEST_PYTHON, else .venv/bin/python)."""
    python = os.environ.get("VLLM_FIT_TEST_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
    if not Path(python).exists():
        pytest.fail("no vLLM environment at %s: run `make setup` (or set VLLM_FIT_TEST_PYTHON)" % python)
    return python


@pytest.fixture(scope="session")
def tiny_model(vllm_python) -> Path:
    """The tiny local Llama (made once, kept under .cache/)."""
    import subprocess

    out = ROOT / ".cache" / "tiny-llama"
    subprocess.run([vllm_python, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out


@pytest.fixture
def real_env(tmp_path) -> Dict[str, str]:
    """Environment for real CPU trials: in-process engine (8 s a trial instead of 20), own cache."""
    env = dict(os.environ)
    env["VLLM_FIT_CACHE_DIR"] = str(tmp_path / "cache")
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    env["VLLM_FIT_VIA"] = "llm"  # search logic offline (8 s a trial); tests/test_real_vllm_serve.py serves
    env["VLLM_TARGET_DEVICE"] = "cpu"
    env.pop("PYTHONPATH", None)
    return env
