"""Trials on the simulated GPU in this process: the fakegpu's LLM driven by the product's own probe code,
its output captured and classified by the real classifier, without a process per trial (property tests
launch thousands). TEST DOUBLE for GPU memory semantics (tests/fakegpu; see tests/fake_worlds.py).

The fake `vllm` and `torch` are swapped into sys.modules only while a trial runs, so this process keeps
its own packages; a trial that would hang raises instead (FAKEWORLD_HANG_RAISES) and is recorded as the
timeout the tool would have seen.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from fake_worlds import FAKEGPU, write_world

from vllm_fit import probe
from vllm_fit.logs.probe_result import ProbeResult
from vllm_fit.strategies.base import Candidate, Observation
from vllm_fit.trial.record import TrialContext, TrialRecord, record_from_run
from vllm_fit.trial.runner import ProcessRun

_FAKE_ROOTS = ("vllm", "torch")
_FAKES: Dict[str, ModuleType] = {}
TRIAL_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "FAKEWORLD_HANG_RAISES": "1"}
"""In-process engine (failures raise where they happen) and hangs that raise instead of sleeping."""


def _ours(names: List[str]) -> List[str]:
    return [name for name in names if name.split(".")[0] in _FAKE_ROOTS]


@contextlib.contextmanager
def _fake_vllm(world_path: Path) -> Iterator[None]:
    """The fake vllm and torch importable, the world named, hangs raising; all undone afterwards."""
    saved = {name: sys.modules.pop(name) for name in _ours(list(sys.modules))}
    sys.modules.update(_FAKES)
    sys.path.insert(0, str(FAKEGPU / "pkg"))
    env = dict(TRIAL_ENV, FAKEWORLD=str(world_path))
    before = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    watch, probe._watch_parent = probe._watch_parent, lambda: None  # no parent to watch in this process
    try:
        yield
    finally:
        probe._watch_parent = watch
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.path.remove(str(FAKEGPU / "pkg"))
        _FAKES.update({name: sys.modules.pop(name) for name in _ours(list(sys.modules))})
        sys.modules.update(saved)


def _probe(world_path: Path, kwargs: Mapping[str, Any], sequences: int) -> Tuple[str, Dict[str, Any]]:
    """The probe's run of one candidate: (its output, its result)."""
    out = io.StringIO()
    with _fake_vllm(world_path), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        result = probe.run({"llm_kwargs": dict(kwargs), "sequences": sequences})
    return out.getvalue(), result


def launch_kwargs(world_path: Path, kwargs: Dict[str, Any], index: int = 1, version: str = "0.32.0",
                  sequences: int = 1) -> TrialRecord:
    """What one trial of these LLM arguments proves in the world at `world_path`."""
    text, result = _probe(world_path, kwargs, sequences)
    exception = str((result.get("exception") or {}).get("type") or "")
    hung = exception.endswith("FakeHang")
    if hung:  # what the runner sees of a trial killed at its timeout: no result, no exit code of its own
        run = ProcessRun([], text, None, None, True, 0.0, result.get("phase"))
    else:
        run = ProcessRun([], text, ProbeResult.parse(result), 0 if result["status"] == probe.STATUS_OK else 1, False,
                         0.0, result.get("phase"))
    return record_from_run(index, kwargs, run, TrialContext(version, 16, sequences=sequences), timeout_s=60.0)


def launch(world_path: Path, model_dir: Path, candidate: Candidate, index: int = 1,
           version: str = "0.32.0") -> TrialRecord:
    """What one trial of `candidate` proves on the simulated device."""
    kwargs = dict(model=str(model_dir), tensor_parallel_size=1, **candidate.engine_args())
    return launch_kwargs(world_path, kwargs, index, version)


def run_objective(objective: Any, world: Mapping[str, Any],
                  limit: int = 60) -> Tuple[Optional[TrialRecord], List[TrialRecord]]:
    """Drive an objective to the end in a fresh copy of the world; (fit record or None, all records)."""
    with tempfile.TemporaryDirectory(prefix="gpu-sim-") as folder:
        root = Path(folder)
        (root / "fake-model").mkdir()
        (root / "fake-model" / "config.json").write_text("{}")  # the fake reads the world's model, not this
        path = write_world(world, root)
        records: List[TrialRecord] = []
        for _ in range(limit):
            history: List[Observation] = [r.observation() for r in records]
            candidate = objective.propose(history)
            if candidate is None:
                index = objective.fit(history)
                return (records[index] if index is not None else None), records
            records.append(launch(path, root / "fake-model", candidate, len(records) + 1, world["vllm_version"]))
    raise AssertionError("objective did not stop: %s" % [r.llm_kwargs for r in records])
