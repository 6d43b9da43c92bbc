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
from typing import List

from . import shell
from .servers import Addition, Server, ServerKind, script_invocation
from .words import Word

SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".sbatch", ".slurm", ".pbs", ".lsf")
SHEBANG = re.compile(r"\A(\ufeff)?#![ \t]*\S*\b(env[ \t]+(-\S+[ \t]+)*)?(ba|da|z|k|a)?sh\b")


def is_script(text: str, path: Path) -> bool:
    """A shell script, by its name or its `#!` line."""
    return path.suffix.lower() in SUFFIXES or bool(SHEBANG.match(text))


def script_servers(text: str, file: str) -> List[Server]:
    """Every vLLM server the script starts; one that cannot be read (an unclosed quote) says why."""
    script = Word(text, tuple(range(len(text))), path="script")
    try:
        commands = shell.commands(script, {}, None)
    except shell.ShellUnsupported as exc:
        if "vllm" not in text:
            return []
        return [Server(file, "the script", ServerKind.SCRIPT, problem="it has %s, which vllm-fit does not follow"
                       % exc)]
    servers: List[Server] = []
    for number, command in enumerate(commands, start=1):
        run = script_invocation(command, "")
        if run is None:
            continue
        first = next((at for word in command for at in word.offsets if at >= 0), 0)
        path = "line %d" % (text.count("\n", 0, first) + 1)
        if any(s.path == path for s in servers):
            path += " (command %d)" % number
        server = Server(file, path, ServerKind.SCRIPT, program=run.program, words=run.words, image=run.image or None)
        last = run.words[-1].after if run.words else command[-1].after
        if last is not None:
            server.additions["*"] = Addition(after=last)
        servers.append(server)
    return servers
