"""`vllm-fit batch --executor ray`: each entry a Ray task on a node that has what its search needs.

The task asks for GPUs equal to the entry's tensor-parallel size (and its `gpu:` accelerator type),
or exactly the entry's `ray_resources`; it runs the same search as a local batch, with the entry's
interpreter, on that node. The driver writes every output (configs, reports, pictures, index,
summary, JUnit) from the tasks' results as each one ends, so a Ray batch and a local batch write
the same files. A task lost with its worker or node is retried by Ray up to MAX_RETRIES times;
trials already journaled are reused when the cache directory is shared by the nodes. Ray is
imported only here, and only for --executor ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

from ..errors import EnvironmentProblem, FitError, one_line
from ..logs.phases import Phase
from ..trial.listener import Listener
from .batch import BatchSettings, entry_result, error_result, finish_entry, search_entry
from .fleet_file import FleetEntry
from .index import new_index, write_outputs
from .status import BatchIndex

MAX_RETRIES = 2
"""Relaunches of a task whose worker or node died (Ray's own retry; exceptions are not retried)."""


def connect(address: Optional[str]) -> Any:
    """The ray module, connected to the cluster (exit 3 when ray is missing or the cluster unreachable)."""
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem("--executor ray needs the ray package: pip install 'vllm-fit[ray]'") from None
    _check_reachable(address)
    with _stderr_kept() as said:
        try:
            ray.init(address=address or "auto", ignore_reinit_error=True, log_to_driver=True,
                     logging_level=logging.ERROR)
            failure = None
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError by Ray version
            failure = exc
    if failure is None:
        return ray
    if AUTH_FAILED.search(said()):  # Ray's core logs the reason; the exception only says it could not connect
        raise EnvironmentProblem(
            "the Ray cluster at %s refused vllm-fit's connection: token authentication failed (InvalidAuthToken);"
            " run with RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN, or ~/.ray/auth_token as the"
            " cluster has it), or start the cluster with RAY_AUTH_MODE=disabled" % (address or "auto")) from None
    raise EnvironmentProblem("cannot reach a Ray cluster at %s (%s); start one with `ray start --head` or"
                             " pass --ray-address" % (address or "auto", one_line(str(failure), 200))) from None


AUTH_FAILED = re.compile(r"InvalidAuthToken|Unauthenticated|[Aa]uthentication token is missing or incorrect")


@contextlib.contextmanager
def _stderr_kept() -> Iterator[Callable[[], str]]:
    """What the process (Ray's C++ core included) writes to file descriptor 2 meanwhile, kept in a private
    temporary file and written through to the real standard error afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 2)
        text: List[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            data = kept.read(1 << 20).decode("utf-8", "replace")
            text.append(data)
            with contextlib.suppress(OSError):
                os.write(2, data.encode("utf-8"))


def _check_reachable(address: Optional[str], timeout_s: float = 5.0) -> None:
    """A HOST:PORT address must accept a connection: ray.init would otherwise retry for minutes."""
    if not address or address == "auto" or "://" in address or ":" not in address:
        return  # "auto" finds the local cluster or fails fast; ray:// (Ray Client) connects on its own
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass  # reachable; ray.init does the real handshake
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem("cannot reach a Ray cluster at %s (%s); start one with `ray start --head` or"
                                 " fix --ray-address" % (address, getattr(exc, "strerror", None) or exc)) from None


def task_options(entry: FleetEntry) -> Dict[str, Any]:
    """What the entry's task asks Ray for: its ray_resources, else its GPUs (and accelerator type)."""
    resources = entry.placement.get("ray_resources")
    if resources:
        custom = {k: v for k, v in resources.items() if k not in ("CPU", "GPU")}
        return {"num_cpus": resources.get("CPU", 0), "num_gpus": resources.get("GPU", 0), "resources": custom}
    options: Dict[str, Any] = {"num_cpus": 1, "num_gpus": entry.request.tensor_parallel_size}
    if entry.placement.get("gpu"):
        options["accelerator_type"] = ray_accelerator(str(entry.placement["gpu"]))
    return options


RAY_ACCELERATORS = ("B200", "H200", "H100", "A100-80G", "A100-40G", "L40S", "L40", "L4", "A10G", "A100", "V100",
                    "T4")
"""Ray's names of NVIDIA accelerator types (ray.util.accelerators), most specific first."""


def ray_accelerator(name: str) -> str:
    """Ray's accelerator type for a `gpu:` value: `H100`, or NVML's `NVIDIA H100 80GB HBM3`, both give H100.
    An A100 with its memory size is Ray's A100-40G / A100-80G; a name Ray does not list passes as written."""
    text = name.upper().replace("NVIDIA", " ").replace("TESLA", " ").replace("GEFORCE", " ")
    if "A100" in text and ("80G" in text or "40G" in text):
        return "A100-80G" if "80G" in text else "A100-40G"
    words = set(text.replace("-", " ").replace("_", " ").split())
    return next((known for known in RAY_ACCELERATORS if known in words or known == text.strip()), name)


class _PrintListener(Listener):
    """Phase lines on the worker's stdout, which Ray forwards to the driver's terminal."""

    def __init__(self, name: str):
        self.name = name

    def trial_started(self, index: int, llm_kwargs: Any) -> None:
        print("%s: trial %d  max_model_len=%s  launching" % (self.name, index, llm_kwargs.get("max_model_len")),
              flush=True)

    def phase(self, index: int, phase: Phase) -> None:
        print("%s: trial %d  %s" % (self.name, index, phase.value), flush=True)

    def trial_finished(self, record: Any) -> None:
        print("%s: trial %d  %s  %s" % (self.name, record.index, record.outcome.value, record.detail), flush=True)

    def note(self, message: str) -> None:
        print("%s: %s" % (self.name, message), flush=True)


def _search_task(entry: FleetEntry, settings: BatchSettings) -> Any:
    """Runs on the node: the entry's search; an entry that cannot run comes back as its message."""
    try:
        return search_entry(entry, _PrintListener(entry.name), settings)
    except FitError as exc:
        return str(exc)


def run_batch_ray(entries: List[FleetEntry], settings: BatchSettings, listener: Listener, address: Optional[str],
                  max_parallel: int) -> BatchIndex:
    """Run the entries as Ray tasks, at most `max_parallel` at a time; outputs rewritten as each ends."""
    ray = connect(address)
    remote = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(_search_task)
    queue, done = list(entries), []
    pending: Dict[Any, Any] = {}
    try:
        while queue or pending:
            while queue and len(pending) < max_parallel:
                entry = queue.pop(0)
                listener.note("== %s (%s): submitted to Ray %s" % (entry.name, entry.request.model,
                                                                  task_options(entry)))
                pending[remote.options(**task_options(entry)).remote(entry, settings)] = (entry, time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                entry, started = pending.pop(ref)
                done.append(finish_entry(_result(ray, ref, entry, settings, started), settings, listener))
                write_outputs(settings.out_dir, new_index(done, settings.fleet, settings.shard))
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    index = new_index(done, settings.fleet, settings.shard)
    write_outputs(settings.out_dir, index)
    return index


def _result(ray: Any, ref: Any, entry: FleetEntry, settings: BatchSettings, started: float) -> Dict[str, Any]:
    """The entry's index entry from its task: written outputs, or the error that ended it for good."""
    try:
        outcome = ray.get(ref)
    except Exception as exc:  # the task failed for good (retries spent, node lost): an entry result
        return error_result(entry, "the Ray task failed: %s" % one_line(str(exc), 300), time.monotonic() - started)
    if isinstance(outcome, str):
        return error_result(entry, outcome, time.monotonic() - started)
    return entry_result(entry, outcome, settings.out_dir, time.monotonic() - started)
