"""The vLLM servers a deployment file runs, each with the command line its runtime really gives vLLM.

One reader for `apply` and `verify`. Each runtime module turns its part of the file into servers:
kubernetes.py (containers, `$(VAR)`, KServe InferenceServices and their runtimes), compose.py
(services, interpolation, the image's entrypoint), helm.py (production-stack `modelSpec` entries,
rendered in the chart's order) and config_file.py (`vllm serve --config` YAML). What they share is
here: the `Server` record, and finding the vLLM invocation in a command, through `sh -c` scripts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import one_line
from . import shell
from .container_run import container_run
from .layout import KeySlot
from .vllm_args import Args, Program, is_shell, open_word, parse, program_of, stray_word
from .words import After, Word

LAUNCHERS = frozenset({"sudo", "srun", "mpirun", "uv", "conda", "mamba", "micromamba", "pixi", "poetry", "pipenv",
                       "apptainer", "singularity", "taskset", "numactl", "nice", "ionice", "chrt", "timeout", "stdbuf",
                       "setsid", "unbuffer"})
"""Programs that run the command after their own words (a script's `srun vllm serve ...`)."""


class ServerKind(Enum):
    """Where a server is declared, which decides how its command line is made."""

    CONTAINER = "Kubernetes container"
    COMPOSE = "compose service"
    HELM = "production-stack modelSpec entry"
    KSERVE = "KServe InferenceService"
    KUBEAI = "KubeAI Model"
    CONFIG = "vllm serve --config file"
    DOCKERFILE = "Dockerfile"
    SCRIPT = "shell script"
    SKYPILOT = "SkyPilot task"
    DSTACK = "dstack configuration"


@dataclass(frozen=True)
class Addition:
    """How a server gets a setting it does not have yet: words after a place in its command line, or a key
    of a mapping (`key`: a Helm value, a --config key, or a new list such as extraArgs that holds the
    flag's words)."""

    after: Optional[After] = None
    slot: Optional[KeySlot] = None
    key: str = ""
    new_list: bool = False


@dataclass
class Server:
    """One vLLM server: where it is, the words its program gets (after the program's own name), the names
    it answers to, and how settings are added to it."""

    file: str
    path: str
    """Its YAML path ("doc 1, spec.template.spec.containers[0]"): everything an edit for it may change."""
    kind: ServerKind
    program: Optional[Program] = None
    words: Tuple[Word, ...] = ()
    names: Tuple[str, ...] = ()
    model: Optional[str] = None
    image: Optional[str] = None
    gpu_labels: Tuple[str, ...] = ()
    additions: Dict[str, Addition] = field(default_factory=dict)
    """By option name ("--max-model-len"), or "*" for any option."""
    problem: str = ""
    """Why its command line cannot be read ("" when it can)."""
    template: bool = False
    """A KServe ServingRuntime: a template InferenceServices use, not a server of its own."""
    disabled: bool = False
    label: str = ""
    """What to call it besides its path (a container's name, the script command it is)."""
    key_style: str = ""
    """"helm" or "config": its settings are mapping keys (numbers written as the chart renders them)."""
    cannot_add: str = ""
    """Why no setting may be added to it ("" when one may)."""
    config_words: Tuple[Word, ...] = ()
    """The options of the `--config` file its vLLM reads (config_mount.py): spliced in before its own."""
    model_from: str = ""
    """Where its model comes from when the file does not hold it (`${MODEL:-org/m}`, a Secret)."""
    config_unread: str = ""
    """The `--config` file its vLLM reads that apply could not read, and why ("" when none)."""

    @property
    def where(self) -> str:
        return "%s (%s)" % (self.path, self.label) if self.label else self.path

    @cached_property
    def args(self) -> Args:
        return parse(self.words)

    @cached_property
    def read_args(self) -> Args:
        """Its options as vLLM gets them: the --config file's first, then its own (which win); only its
        own are ever edited."""
        mine, config = self.args, parse(self.config_words)
        return Args(config.options + mine.options, mine.positionals, mine.merged)

    @property
    def open_options(self) -> str:
        """A word of its command line that may set any option, which the file does not hold, and where it
        comes from ("" when none)."""
        word = open_word(self.program, self.args) if self.program is not None else None
        return word.unknown if word is not None else ""

    @property
    def stray_word(self) -> str:
        """Why a word of its command line is a stray argument to vLLM's parser ("" when none is)."""
        return stray_word(self.program, self.args) if self.program is not None else ""

    def addition(self, option: str) -> Optional[Addition]:
        return self.additions.get(option) or self.additions.get("*")

    def effective(self) -> List[Tuple[str, Optional[str]]]:
        """Every option's winning value, and the positionals, in a comparable form."""
        values = sorted(self.args.effective().items())
        return values + [("positional", w.text) for w in self.args.positionals + self.args.merged]


def normal_model(model: Optional[str]) -> Optional[str]:
    """A model as fits and servers are compared: hf:// and trailing slashes dropped."""
    if not model:
        return None
    return re.sub(r"^hf://", "", model).rstrip("/") or None


@dataclass(frozen=True)
class Invocation:
    """One run of a vLLM server program in a command: the program, its words, and which command of a
    script it is ("" when the command itself is the server)."""

    program: Program
    words: Tuple[Word, ...]
    label: str = ""
    image: str = ""
    """The image a `docker run` in a script starts ("" where the command is not one)."""


def invocations(argv: Sequence[Word], env: Mapping[str, Word], depth: int = 0) -> Tuple[List[Invocation], str]:
    """The vLLM servers an argv runs, directly or through `sh -c SCRIPT [$0 $1 ...]` (a script's own
    `bash -c "..."` followed too, three deep), and the problem that hides them ("" when none)."""
    if not argv or depth > 3:
        return [], ""
    found = program_of(argv)
    if found is not None:
        return [Invocation(found[0], tuple(argv[found[1]:]))], ""
    if not is_shell(argv[0]):
        return [], ""
    at = 1
    runs_script = False
    while at < len(argv) and argv[at].text.startswith("-"):
        runs_script = runs_script or (argv[at].text != "--" and "c" in argv[at].text[1:])
        at += 1
    if not runs_script or at >= len(argv):
        return [], ""
    script = argv[at]
    if script.unknown:
        return [], "the script comes from %s, which this file does not hold" % script.unknown
    try:
        commands = shell.commands(script, env, list(argv[at + 1:]))
    except shell.ShellUnsupported as exc:
        return [], "its %s script has %s, which vllm-fit does not follow" % (argv[0].text, exc)
    runs: List[Invocation] = []
    for number, command in enumerate(commands, start=1):
        label = "command %d of the script" % number if len(commands) > 1 else ""
        run = script_invocation(command, label)
        if run is None and command and is_shell(command[0]):
            inner, problem = invocations(command, env, depth + 1)
            if problem:
                return [], problem
            runs += [Invocation(i.program, i.words, i.label or label, i.image) for i in inner]
        elif run is not None:
            runs.append(run)
    return runs, ""


def script_invocation(command: Sequence[Word], label: str) -> Optional[Invocation]:
    """The vLLM server one command of a script runs: directly, after a launcher (`srun`, `uv run`, `sudo`
    ...), or in the container of a `docker run`; None where it runs none."""
    launched = bool(command) and os.path.basename(command[0].text) in LAUNCHERS
    for start in range(len(command) if launched else min(len(command), 1)):
        container = container_run(command[start:])
        if container is not None:
            found = program_of(container.argv) if container.argv else None
            if found is None or container.argv is None:
                return None
            return Invocation(found[0], tuple(container.argv[found[1]:]), label, container.image.text)
        found = program_of(command[start:])
        if found is not None:
            return Invocation(found[0], tuple(command[start + found[1]:]), label)
    return None


def describe_problem(where: str, problem: str) -> str:
    return one_line("%s: %s" % (where, problem), 400)
