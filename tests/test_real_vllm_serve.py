"""`--via serve` on real vLLM (CPU backend, the tiny model): every trial is vLLM's OpenAI server on the
YAML it would deliver, proven over HTTP. The server always runs the multiprocess engine (its default).

40 blocks of 64 KiB hold one sequence of at most 39 x 128 = 4992 tokens (one block is the null block).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time

import psutil
import pytest
from conftest import BLOCK_BYTES, default_signals

pytestmark = pytest.mark.vllm


def served_env(real_env):
    env = dict(real_env)
    env.pop("VLLM_FIT_VIA")  # the product's default: serve
    return env


def tool(vllm_python, env, *args):
    return [vllm_python, "-m", "vllm_fit", *[str(a) for a in args]]


def body_of(path):
    """A YAML file without its comment lines: what vllm serve reads."""
    return "".join(line + "\n" for line in path.read_text().splitlines() if not line.startswith("#"))


def server_ports(work):
    """The ports the trials' servers were started on (from each trial's spec)."""
    ports = []
    for spec in sorted(work.glob("run-*/trial-*/spec.json")):
        args = json.loads(spec.read_text())["server_args"]
        ports.append(int(args[args.index("--port") + 1]))
    return ports


def port_is_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_serve_fits_4992_at_40_blocks_proven_over_http_and_delivers_the_served_file(
        vllm_python, tiny_model, real_env, tmp_path):
    out, report_path, work = tmp_path / "fit.yaml", tmp_path / "report.json", tmp_path / "work"
    done = subprocess.run(tool(vllm_python, real_env, "search", "--model", tiny_model, "--engine-arg",
                               "enforce_eager=true", "--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 1,
                               "--out", out, "--report", report_path, "--work-dir", work),
                          env=served_env(real_env), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["search"]["via"] == "serve"
    assert report["launches"] == 1  # the length 40 pages hold, served, and proven by its own pool
    fit = report["fit"]
    assert fit["max_model_len"] == 4992 and fit["kv_cache_blocks"] == 40
    http = fit["request"]["http"]
    assert http["status_codes"] == [200] and http["usage"][0]["total_tokens"] == 4992
    assert http["health"] == 200 and 'num_gpu_blocks="40"' in http["metrics_line"]
    assert body_of(out) == http["config"], "the delivered YAML is not the file that was served"
    assert "over HTTP" in out.read_text()
    ports = server_ports(work)
    assert len(ports) == report["launches"] and all(port_is_free(p) for p in ports)


def test_verify_serves_a_deployment_config_with_serve_only_keys(vllm_python, tiny_model, real_env, tmp_path):
    secret = "sk-verify-0123456789abcdef"
    config = tmp_path / "deploy.yaml"
    config.write_text("# kv-cache-tokens: 5120\nmodel: %s\nmax-model-len: 4992\nkv-cache-memory-bytes: %d\n"
                      "enforce-eager: true\nhost: 0.0.0.0\nport: 8000\napi-key: %s\nserved-model-name: tiny\n"
                      "uvicorn-log-level: warning\n" % (tiny_model, 40 * BLOCK_BYTES, secret))
    report = tmp_path / "verify.json"
    done = subprocess.run(tool(vllm_python, real_env, "verify", config, "--report", report),
                          env=served_env(real_env), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert verdict["status"] == "ok" and verdict["via"] == "serve"
    assert verdict["overridden"] == {"host": "0.0.0.0", "port": 8000}
    assert "host and port set to the loopback" in verdict["message"]
    assert verdict["trial"]["request"]["total_tokens"] == 4992
    assert secret not in report.read_text() and secret not in done.stdout + done.stderr

    too_long = tmp_path / "too-long.yaml"  # 40 blocks hold 4992: the server's engine core process refuses 8192
    too_long.write_text(config.read_text().replace("max-model-len: 4992", "max-model-len: 8192"))
    failed = subprocess.run(tool(vllm_python, real_env, "verify", too_long, "--report", report),
                            env=served_env(real_env), capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert verdict["status"] != "ok" and verdict["trial"]["outcome"] == "kv_too_small", verdict  # classified
    assert verdict["trial"]["capacity"]["estimated_max_len"] == 4992


def test_ctrl_c_during_a_serve_trial_leaves_no_process_and_no_bound_port(vllm_python, tiny_model, real_env,
                                                                         tmp_path):
    work = tmp_path / "work"
    searching = subprocess.Popen(
        tool(vllm_python, real_env, "search", "--model", tiny_model, "--engine-arg", "enforce_eager=true",
             "--kv-cache-memory", 40 * BLOCK_BYTES, "--work-dir", work),
        env=served_env(real_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=default_signals)  # a suite run under nohup or in the background ignores SIGINT
    deadline = time.monotonic() + 240
    log = None
    while time.monotonic() < deadline:
        logs = sorted(work.glob("run-*/trial-001/output.log"))
        log = logs[0] if logs else None
        if log and "Starting to load model" in log.read_text():
            break
        time.sleep(0.5)
    assert log is not None, searching.communicate(timeout=60)
    trial_pids = [p.pid for p in psutil.Process(searching.pid).children(recursive=True)]
    assert trial_pids
    searching.send_signal(signal.SIGINT)
    _, err = searching.communicate(timeout=120)
    assert searching.returncode == 130, err
    assert not [pid for pid in trial_pids if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE], "server processes outlived the tool"
    assert all(port_is_free(port) for port in server_ports(work))


def test_two_searches_at_once_serve_on_different_ports(vllm_python, tiny_model, real_env, tmp_path):
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        env = dict(served_env(real_env), VLLM_FIT_CACHE_DIR=str(tmp_path / name / "cache"))
        runs.append(subprocess.Popen(
            tool(vllm_python, env, "search", "--model", tiny_model, "--engine-arg", "enforce_eager=true",
                 "--kv-cache-memory", 40 * BLOCK_BYTES, "--max-len", 4992, "--out", tmp_path / name / "fit.yaml",
                 "--work-dir", tmp_path / name / "work"),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    ports_a, ports_b = server_ports(tmp_path / "a" / "work"), server_ports(tmp_path / "b" / "work")
    assert ports_a and ports_b and not set(ports_a) & set(ports_b)
    for name in ("a", "b"):
        assert "max-model-len: 4992" in (tmp_path / name / "fit.yaml").read_text()


def test_concurrency_2_at_40_blocks_holds_two_full_length_sequences_served_together(
        vllm_python, tiny_model, real_env, tmp_path):
    """39 usable blocks hold two sequences of 19 blocks: 2 x ceil((L - 1) / 128) <= 39 gives L = 2433."""
    out, report_path = tmp_path / "fit.yaml", tmp_path / "report.json"
    done = subprocess.run(tool(vllm_python, real_env, "search", "--model", tiny_model, "--engine-arg",
                               "enforce_eager=true", "--kv-cache-memory", 40 * BLOCK_BYTES, "--granularity", 1,
                               "--concurrency", 2, "--out", out, "--report", report_path),
                          env=served_env(real_env), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    fit = report["fit"]
    assert fit["max_model_len"] == 2433 and report["proven"] is True
    assert fit["concurrency"]["held_by_pool"] == 2 and fit["concurrency"]["peak_running"] == 2
    assert fit["request"]["served_tokens"] == [2433, 2433] and fit["request"]["http"]["status_codes"] == [200, 200]
    winner = next(t for t in report["trials"] if t["index"] == fit["trial"])
    assert winner["max_len_hint"] == 2433  # vLLM's numbers: 2434 needs 2 x 20 blocks, 39 are usable
    assert "max-num-seqs: 2" in out.read_text() and report["launches"] <= 2


def test_concurrency_2_least_kv_for_2048_is_exact_to_the_block(vllm_python, tiny_model, real_env, tmp_path):
    """Two sequences of 2048 need 2 x 16 blocks plus the null block: 33 blocks of 64 KiB."""
    report_path = tmp_path / "report.json"
    done = subprocess.run(tool(vllm_python, real_env, "search", "--model", tiny_model, "--engine-arg",
                               "enforce_eager=true", "--target-len", 2048, "--search", "kv-cache-memory",
                               "--kv-granularity", "64KiB", "--concurrency", 2, "--report", report_path),
                          env=real_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["fit"]["kv_cache_memory_bytes"] == 33 * BLOCK_BYTES and report["proven"] is True
    assert report["fit"]["concurrency"]["held_by_pool"] == 2
    assert report["fit"]["request"]["served_tokens"] == [2048, 2048]
