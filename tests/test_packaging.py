"""The README's install line on a fresh environment: the wheel `make dist` builds installs with its
dependencies into a new virtual environment, and the command and the Python API work there."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

from vllm_fit import __version__


@pytest.mark.vllm  # slow: builds and installs (the packages come from the index)
def test_the_built_wheel_installs_and_runs_in_a_fresh_environment(tmp_path):
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = list((tmp_path / "dist").glob("vllm_fit-%s-py3-none-any.whl" % __version__))
    names = zipfile.ZipFile(wheel).namelist()
    assert "vllm_fit/probe.py" in names and "vllm_fit/deploy/vllm_options.py" in names
    assert not any(name.startswith("tests/") for name in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    shown = subprocess.run([str(venv / "bin" / "vllm-fit"), "--version"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and __version__ in shown.stdout, shown.stdout + shown.stderr
    api = subprocess.run([str(venv / "bin" / "python"), "-c", "import vllm_fit; print(callable(vllm_fit.search))"],
                         capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert api.stdout.strip() == "True", api.stderr
