"""A shell script that starts vLLM (`serve.sh`, a Slurm batch script): its servers, read as the shell runs it.

The whole file is one script (shell.py): its own assignments set the variables of the commands after
them, `$1` and `"$@"` are the arguments it is given where it runs (unknown here), a variable it does not
set comes from that environment (unknown too), here-documents are input, not commands. A command runs a
server directly (`vllm serve`, `python -m vllm.entrypoints.openai.api_server`), after a launcher (`srun`,
`uv run` ...), or in a `docker run` / `podman run` container (container_run.py). A fit is written where
the value is (the option's word, or the assignment a `$VAR` comes from); a missing option after the
command's last word, on its line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Mapping, Sequence, Tuple

from . import shell
from .servers import Addition, Invocation, Server, ServerKind, invocations, script_invocation
from .vllm_args import is_shell
from .words import Word

SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".sbatch", ".slurm", ".pbs", ".lsf")
SHEBANG = re.compile(r"\A(\ufeff)?#![ \t]*\S*\b(env[ \t]+(-\S+[ \t]+)*)?(ba|da|z|k|a)?sh\b")


def is_script(text: str, path: Path) -> bool:
    """A shell script, by its name or its `#!` line."""
    return path.suffix.lower() in SUFFIXES or bool(SHEBANG.match(text))


def script_runs(script: Word, env: Mapping[str, Word]) -> Tuple[List[Tuple[Invocation, List[Word]]], str]:
    """The vLLM servers a script starts, each with the whole command that runs it, and the problem that
    hides them ("" when none)."""
    try:
        commands = shell.commands(script, env, None)
    except shell.ShellUnsupported as exc:
        return [], "it has %s, which vllm-fit does not follow" % exc
    runs = []
    for command in commands:
        run = script_invocation(command, "")
        if run is None and command and is_shell(command[0]):  # bash -c "vllm serve ..."
            inner, problem = invocations(command, env)
            if problem:
                return [], problem
            runs += [(found, command) for found in inner]
        elif run is not None:
            runs.append((run, command))
    return runs, ""


def line_of(text: str, command: Sequence[Word]) -> int:
    """The file line a command starts on (its first character written in the file)."""
    first = next((at for word in command for at in word.offsets if at >= 0), 0)
    return text.count("\n", 0, first) + 1


def server_of_run(server: Server, run: Invocation, command: Sequence[Word]) -> Server:
    """A server given its program, its words, and where a missing option goes (after its last word)."""
    server.program, server.words = run.program, run.words
    server.image = server.image or run.image or None
    last = run.words[-1].after if run.words else command[-1].after
    if last is not None:
        server.additions["*"] = Addition(after=last)
    return server


def script_servers(text: str, file: str) -> List[Server]:
    """Every vLLM server the script starts; one that cannot be read (an unclosed quote) says why."""
    runs, problem = script_runs(Word(text, tuple(range(len(text))), path="script"), {})
    if problem:
        return [Server(file, "the script", ServerKind.SCRIPT, problem=problem)] if "vllm" in text else []
    servers: List[Server] = []
    for number, (run, command) in enumerate(runs, start=1):
        path = "line %d" % line_of(text, command)
        if any(s.path == path for s in servers):
            path += " (server %d)" % number
        servers.append(server_of_run(Server(file, path, ServerKind.SCRIPT), run, command))
    return servers
