"""Ask the trial interpreter what it has (vLLM, torch versions) without importing vLLM in it."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from typing import Optional

from ..errors import BadInput, EnvironmentProblem

# Runs in the target interpreter (importlib.metadata needs Python 3.8). Nothing is imported unless no
# metadata and no version file name the vLLM version (a tree that computes it at import time).
_QUERY = r"""
import importlib.util, json, os, sys
out = {"python": sys.version.split()[0], "vllm_found": importlib.util.find_spec("vllm") is not None}
try:
    from importlib import metadata
    names = metadata.packages_distributions() if hasattr(metadata, "packages_distributions") else {}
    for package in ("vllm", "torch"):
        spec = importlib.util.find_spec(package)
        for dist in names.get(package, [package]) if spec and spec.origin else []:
            try:
                owner = metadata.distribution(dist)
            except metadata.PackageNotFoundError:
                continue
            # the distribution must own the module that imports: a tree on PYTHONPATH may shadow it
            if os.path.realpath(str(owner.locate_file(package + "/__init__.py"))) == os.path.realpath(spec.origin):
                out[package] = owner.version
                out[package + "_distribution"] = dist
                break
except ImportError:
    pass
import re
vllm_spec = importlib.util.find_spec("vllm")  # no metadata (a source tree, a stand-in): read the version file
for folder in (vllm_spec.submodule_search_locations or []) if vllm_spec and not out.get("vllm") else []:
    for name in ("_version.py", "version.py", "__init__.py"):
        try:
            text = open(folder + "/" + name).read()
        except OSError:
            continue
        match = re.search(r"^__version__\s*(?::[^=]*)?=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text, re.M)
        if match:
            out["vllm"] = match.group(1)
            break
    if out.get("vllm"):
        break
if out["vllm_found"] and not out.get("vllm"):  # a version computed at import time: ask the module itself
    try:
        import vllm
        out["vllm"] = str(vllm.__version__)
    except Exception as exc:
        out["vllm_error"] = repr(exc)[:300]
for folder in (vllm_spec.submodule_search_locations or []) if vllm_spec else []:
    try:  # the admission gate that counts a whole prompt's blocks in every group, no window cap (#37307)
        text = open(folder + "/v1/core/kv_cache_manager.py").read()
    except OSError:
        continue
    out["whole_prompt_admission"] = "def can_fit_full_sequence" in text and "apply_admission_cap" not in text
    break
torch_spec = importlib.util.find_spec("torch")  # CUDA/HIP versions, read from torch/version.py as text
for folder in (torch_spec.submodule_search_locations or []) if torch_spec else []:
    try:
        text = open(folder + "/version.py").read()
    except OSError:
        continue
    for key in ("cuda", "hip"):
        match = re.search(r"^%s\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]" % key, text, re.M)
        out["torch_" + key] = match.group(1) if match else None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Interpreter:
    """The trial interpreter and what it reports about its packages."""

    python: str
    python_version: str
    vllm_version: Optional[str]
    vllm_distribution: Optional[str]
    torch_version: Optional[str]
    cuda_version: Optional[str] = None
    hip_version: Optional[str] = None
    whole_prompt_admission: bool = False
    """Its V1 scheduler admits a request only where the blocks of its whole prompt are free, counted in every
    KV cache group as if no window freed any (`can_fit_full_sequence`, vLLM 0.19; from the source's text)."""


QUERY_TIMEOUT_S = 20.0
"""The query reads a few files without importing vLLM: an interpreter silent this long is hung."""
_VERSION = re.compile(r"^\d{1,4}\.\d{1,4}(\.\d{1,6})?([.+a-zA-Z0-9_-]{0,64})$")


def inspect_interpreter(python: str, timeout_s: float = QUERY_TIMEOUT_S) -> Interpreter:
    """Query `python`; raise EnvironmentProblem when it cannot run or has no vLLM."""
    try:
        done = subprocess.run([python, "-c", _QUERY], capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem("cannot run the interpreter %s (%s); pass the vLLM environment's"
                                 " python with --python" % (python, exc)) from exc
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
        if not isinstance(info, dict) or "python" not in info:
            raise ValueError("unexpected answer")
    except (IndexError, ValueError) as exc:
        raise BadInput("--python %s is not a Python interpreter that answers (it exited %s without the"
                       " answer; try `%s -c 'import vllm'`); pass the vLLM environment's python"
                       % (python, done.returncode, python)) from exc
    if not info.get("vllm_found"):
        raise EnvironmentProblem("the interpreter %s cannot import vllm; install vLLM there or pass"
                                 " the vLLM environment's python with --python" % python)
    for key in ("python", "vllm", "vllm_distribution", "torch", "torch_cuda", "torch_hip"):
        if info.get(key) is not None and (not isinstance(info[key], str) or len(info[key]) > 100):
            raise EnvironmentProblem("the interpreter %s reports %s %r, which is no version; check its"
                                     " installation" % (python, key, info[key]))
    if info.get("vllm") is not None and not _VERSION.match(info["vllm"]):
        raise EnvironmentProblem("the interpreter %s reports vLLM version %r, which is no vLLM release (such as"
                                 " 0.32.0); check its installation" % (python, info["vllm"]))
    return Interpreter(python, info["python"], info.get("vllm"), info.get("vllm_distribution"),
                       info.get("torch"), info.get("torch_cuda"), info.get("torch_hip"),
                       info.get("whole_prompt_admission") is True)
