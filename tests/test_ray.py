"""`batch --executor ray` on a real local Ray cluster (CPU resources only) with real vLLM (CPU backend).

The cluster is started by the tests (`ray start --head`); the fleet entries ask for `{CPU: 1}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
EXPECTED = {"tiny-33-blocks": 4096, "tiny-40-blocks": 4864, "tiny-57-blocks": 7168}


def vllm_fit(python, env, *args, timeout=900):
    return subprocess.run([python, "-m", "vllm_fit", *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_executor_ray_without_ray_is_one_line_and_exit_3(tmp_path, fake_model):
    blocker = tmp_path / "block" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no ray here')\n")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models:\n  - {model: '%s', name: a, kv_cache_memory: 1GiB}\n" % fake_model)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "block"))
    done = vllm_fit(sys.executable, env, "batch", fleet, "--out-dir", tmp_path / "out", "--executor", "ray")
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert "vllm-fit[ray]" in done.stderr and not (tmp_path / "out" / "index.json").exists()


def test_an_unreachable_cluster_is_one_line_and_exit_3(tmp_path, fake_model):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models:\n  - {model: '%s', name: a, kv_cache_memory: 1GiB}\n" % fake_model)
    done = vllm_fit(sys.executable, dict(os.environ), "batch", fleet, "--out-dir", tmp_path / "out", "--executor",
                    "ray", "--ray-address", "127.0.0.1:%d" % _free_port(), timeout=60)
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and "cannot reach a Ray cluster" in done.stderr


def test_ray_options_need_the_ray_executor(tmp_path, fake_model):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models:\n  - {model: '%s', name: a}\n" % fake_model)
    done = vllm_fit(sys.executable, dict(os.environ), "batch", fleet, "--out-dir", tmp_path / "o", "--max-parallel", 2)
    assert done.returncode == 2 and "--executor ray" in done.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ray_env(base, home: str, auth: str = "disabled"):
    """Ray's environment for a test: its own home (whatever ~/.ray holds, a token from an earlier
    `ray.init(address="local")` included, plays no part) and an explicit authentication mode."""
    return dict(base, HOME=home, RAY_AUTH_MODE=auth, RAY_USAGE_STATS_ENABLED="0")


@contextlib.contextmanager
def started_cluster(env, cpus: int = 2):
    """`ray start --head` in a temporary folder; on exit only its own processes are stopped (`ray stop`
    would stop every Ray instance of the user)."""
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # Ray's socket paths must stay short
    port = _free_port()
    subprocess.run([str(RAY), "start", "--head", "--port", str(port), "--num-cpus", str(cpus), "--num-gpus", "0",
                    "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp], env=env,
                   check=True, capture_output=True, timeout=180)
    try:
        yield "127.0.0.1:%d" % port
    finally:
        mine = [p for p in psutil.process_iter(["cmdline"]) if any(temp in a for a in (p.info["cmdline"] or []))]
        for process in mine:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _, alive = psutil.wait_procs(mine, timeout=20)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        shutil.rmtree(temp, ignore_errors=True)


pytestmark = pytest.mark.xdist_group("ray-cluster")
"""One worker runs this file: its tests share the module's Ray cluster (`make test` hands out the other tests one
by one)."""


@pytest.fixture(scope="module")
def ray_home():
    home = tempfile.mkdtemp(prefix="rh", dir="/tmp")
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster(ray_home):
    """A one-node Ray cluster with 2 CPUs and no GPU; its address. Only it is stopped at the end."""
    with started_cluster(ray_env(os.environ, ray_home)) as address:
        yield address


@pytest.fixture
def cluster_env(real_env, ray_home):
    """The tool's environment for the test cluster: the same Ray home and authentication mode."""
    return ray_env(real_env, ray_home)


def test_a_cluster_that_wants_a_token_is_named_as_such(tmp_path, fake_model):
    """A cluster started with token authentication, and a driver without the token: the message says so."""
    cluster_home, driver_home = tempfile.mkdtemp(prefix="rc", dir="/tmp"), tempfile.mkdtemp(prefix="rd", dir="/tmp")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models:\n  - {model: '%s', name: a, kv_cache_memory: 1GiB}\n" % fake_model)
    os.makedirs(os.path.join(cluster_home, ".ray"))
    with open(os.path.join(cluster_home, ".ray", "auth_token"), "w") as token:
        token.write("0123456789abcdef" * 4)  # what ray.init(address="local") leaves behind
    try:
        with started_cluster(ray_env(os.environ, cluster_home, auth="token"), cpus=1) as address:
            env = dict(os.environ, HOME=driver_home, RAY_USAGE_STATS_ENABLED="0")
            env.pop("RAY_AUTH_MODE", None)
            done = vllm_fit(sys.executable, env, "batch", fleet, "--out-dir", tmp_path / "out", "--executor", "ray",
                            "--ray-address", address, timeout=300)
    finally:
        shutil.rmtree(cluster_home, ignore_errors=True)
        shutil.rmtree(driver_home, ignore_errors=True)
    assert done.returncode == 3, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "token authentication failed (InvalidAuthToken)" in last and "RAY_AUTH_MODE" in last


def _fleet(tmp_path, tiny_model) -> Path:
    text = (ROOT / "configs" / "tiny-fleet.yaml").read_text().replace(".cache/tiny-llama", str(tiny_model))
    text = text.replace("  granularity: 128\n", "  granularity: 128\n  ray_resources: {CPU: 1}\n")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def _without_times(index):
    return [{k: v for k, v in e.items() if k not in ("wall_time_s",)} for e in index["entries"]]


@pytest.mark.vllm
def test_the_tiny_fleet_on_ray_writes_what_a_local_batch_writes(ray_cluster, vllm_python, tiny_model, cluster_env,
                                                                 tmp_path):
    real_env = cluster_env
    fleet = _fleet(tmp_path, tiny_model)
    done = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", tmp_path / "ray", "--executor", "ray",
                    "--ray-address", ray_cluster, "--max-parallel", 2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tiny-40-blocks: trial 1" in done.stdout + done.stderr  # the live lines reach the driver
    index = json.loads((tmp_path / "ray" / "index.json").read_text())
    assert {e["name"]: e["fit"]["max_model_len"] for e in index["entries"]} == EXPECTED
    assert all(e["status"] == "fit" for e in index["entries"])
    # the same fleet run locally, served from the cache the Ray batch filled: the same configs and index
    local = vllm_fit(vllm_python, real_env, "batch", fleet, "--out-dir", tmp_path / "local")
    assert local.returncode == 0, local.stderr[-3000:]
    local_index = json.loads((tmp_path / "local" / "index.json").read_text())
    assert sorted(e["name"] for e in local_index["entries"]) == sorted(EXPECTED)
    assert {e["name"]: e["fit"] for e in local_index["entries"]} == {e["name"]: e["fit"] for e in index["entries"]}
    for name in EXPECTED:
        strip = lambda text: [line for line in text.splitlines() if not line.startswith("# written")]  # noqa: E731
        assert strip((tmp_path / "ray" / "configs" / (name + ".yaml")).read_text()) == \
            strip((tmp_path / "local" / "configs" / (name + ".yaml")).read_text())
    junit = (tmp_path / "ray" / "junit.xml").read_text()
    assert 'tests="3" failures="0" errors="0"' in junit
    assert (tmp_path / "ray" / "summary.md").read_text().count("| fit |") == 3


@pytest.mark.vllm
def test_a_killed_worker_is_retried_and_the_batch_completes(ray_cluster, vllm_python, tiny_model, cluster_env,
                                                            tmp_path):
    real_env = cluster_env
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("defaults: {engine_args: {enforce_eager: true}, granularity: 128, ray_resources: {CPU: 1}}\n"
                     "models:\n  - {model: '%s', name: solo, kv_cache_memory: 2560KiB}\n" % tiny_model)
    tool = subprocess.Popen([vllm_python, "-m", "vllm_fit", "batch", str(fleet), "--out-dir", str(tmp_path / "out"),
                             "--executor", "ray", "--ray-address", ray_cluster], env=real_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(tool.stdout), daemon=True)
    reader.start()
    deadline, killed = time.monotonic() + 300, None
    while time.monotonic() < deadline and killed is None:
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                worker = proc.parent() if "probe.py" in " ".join(proc.info["cmdline"] or []) else None
                title = " ".join(worker.cmdline()) if worker is not None else ""
                if "ray::" in title or "default_worker" in title:  # a trial this cluster's worker runs
                    killed = worker.pid
                    worker.send_signal(signal.SIGKILL)  # kill the Ray worker that runs its search
                    break
        time.sleep(0.5)
    assert killed, "no trial started"
    assert tool.wait(timeout=600) == 0, "".join(lines)[-3000:]
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["entries"][0]["status"] == "fit" and index["entries"][0]["fit"]["max_model_len"] == 4992


def test_gpu_names_map_to_ray_accelerator_types():
    from vllm_fit.fleet.ray_executor import ray_accelerator

    assert ray_accelerator("H100") == "H100"
    assert ray_accelerator("NVIDIA H100 80GB HBM3") == "H100"
    assert ray_accelerator("NVIDIA A100-SXM4-40GB") == "A100-40G"
    assert ray_accelerator("a100-80g") == "A100-80G"
    assert ray_accelerator("NVIDIA L4") == "L4" and ray_accelerator("NVIDIA A10G") == "A10G"
    assert ray_accelerator("Tesla T4") == "T4"
    assert ray_accelerator("MI300X") == "MI300X"  # not an NVIDIA name Ray lists: passed as written
