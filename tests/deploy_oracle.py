"""What a deployment really runs, found without vllm-fit's reader: for the apply tests' independent checks.

A container's command and args (read with PyYAML, `$(VAR)` expanded from literal env values) are run
by the real /bin/sh with stub `vllm`, `python3` and `ray` programs on PATH that record their argv;
the recorded vLLM argv is then parsed by vLLM's own argument parser (the installed vLLM's
make_arg_parser). So a test that an edit reached vLLM rests on the shell and on vLLM, not on the code
under test.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

RECORD_ENV = "VLLM_FIT_TEST_RECORD"
STUB = """#!/bin/sh
for a in "$0" "$@"; do printf '%s\\037' "$a"; done >> "$VLLM_FIT_TEST_RECORD"
printf '\\036' >> "$VLLM_FIT_TEST_RECORD"
"""
SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")


def k8s_expand(word: str, env: Dict[str, str]) -> str:
    """The kubelet's `$(NAME)` expansion (`$$` escapes; an undefined name stays as written)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


def container_at(text: str, document: int, keys: Sequence[Any]) -> Dict[str, Any]:
    """The mapping at `keys` in the n-th YAML document of `text` (PyYAML's safe loader)."""
    node: Any = [d for d in yaml.safe_load_all(text) if d is not None][document]
    for key in keys:
        node = node[key]
    return node


def container_argv(container: Dict[str, Any], entrypoint: Sequence[str] = ()) -> List[str]:
    """command + args as the kubelet passes them (the image's entrypoint where there is no command)."""
    env: Dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = k8s_expand(str(entry["value"]), env)
    command = container.get("command")
    words = list(command) if command is not None else list(entrypoint)
    return [k8s_expand(str(w), env) for w in words + list(container.get("args") or [])]


def run_recorded(argv: Sequence[str], tmp: Path) -> List[List[str]]:
    """Run argv with stub servers on PATH; the argv of every stub run, in order."""
    stubs = tmp / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("vllm", "python3", "python", "ray"):
        path = stubs / name
        path.write_text(STUB)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    record = tmp / "record"
    record.write_bytes(b"")
    env = {"PATH": "%s:/usr/bin:/bin" % stubs, RECORD_ENV: str(record), "HOME": str(tmp)}
    if Path(argv[0]).name in ("vllm", "python3", "python"):
        argv = [str(stubs / Path(argv[0]).name), *argv[1:]]
    # A login shell (bash -lc) would reset PATH from /etc/profile and lose the stubs: run it as plain -c.
    argv = [argv[0], *[w.replace("l", "") if w.startswith("-") and not w.startswith("--") and "c" in w else w
                       for w in argv[1:2]], *argv[2:]]
    subprocess.run(list(argv), env=env, cwd=str(tmp), capture_output=True, timeout=60, check=False)
    runs = [r for r in record.read_bytes().decode().split("\x1e") if r]
    return [[w for w in r.split("\x1f")[:-1]] for r in runs]


def vllm_args(run: List[str]) -> Optional[List[str]]:
    """The words after the program's name, where the run is vLLM's server; None otherwise."""
    name = Path(run[0]).name
    if name == "vllm" and run[1:2] == ["serve"]:
        return run[2:]
    if name.startswith("python") and run[1:2] == ["-m"] and run[2:3] and run[2] in SERVER_MODULES:
        return run[3:]
    return None


_PARSER: Any = None


def vllm_parse(args: Sequence[str]) -> Any:
    """The namespace vLLM's own parser makes of a server's arguments (its parse_args: `_` in names, --config)."""
    global _PARSER
    if _PARSER is None:
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # before the module split
            from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]
        try:
            from vllm.entrypoints.launchers.cli_args import make_arg_parser
        except ImportError:
            from vllm.entrypoints.openai.cli_args import make_arg_parser  # type: ignore[no-redef]
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        _PARSER = make_arg_parser(FlexibleArgumentParser())
    return _PARSER.parse_args(list(args))


_SERVE: Any = None


def vllm_serve_model(args: Sequence[str]) -> str:
    """The model `vllm serve ARGS` loads, by vLLM's own CLI: its top-level parser moves the first `--model`
    into the positional slot, and the serve command takes that slot over --model."""
    global _SERVE
    if _SERVE is None:
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        _SERVE = FlexibleArgumentParser()
        ServeSubcommand().subparser_init(_SERVE.add_subparsers(dest="subparser"))
    parsed = _SERVE.parse_args(["serve", *args])
    return parsed.model_tag if parsed.model_tag is not None else parsed.model
