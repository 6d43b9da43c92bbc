"""`docker run` and `podman run` in a script: the image and the words its entrypoint gets.

`docker run [OPTIONS] IMAGE [ARG...]`: the image is the first word that is neither an option nor an
option's value, and every word after it goes to the container. Whether an option takes a value is read
off the CLI's own flag list (docs.docker.com `docker container run`; podman-run(1)): the flags below are
booleans, every other option takes the next word unless written `--flag=value`. `--entrypoint X`
replaces the image's entrypoint with the one program X (and drops its CMD); `--entrypoint ""` leaves the
arguments to run as the command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .images import image_entrypoint
from .words import Word

ENGINES = ("docker", "podman", "nerdctl", "nvidia-docker")
BOOLEAN_LONG = frozenset({
    "--detach", "--disable-content-trust", "--help", "--init", "--interactive", "--no-healthcheck",
    "--oom-kill-disable", "--publish-all", "--privileged", "--quiet", "--read-only", "--rm", "--sig-proxy",
    "--tty", "--use-api-socket",
    # podman's own
    "--env-host", "--http-proxy", "--no-hosts", "--read-only-tmpfs", "--replace", "--rmi", "--tls-verify",
    "--passwd"})
BOOLEAN_SHORT = frozenset("dtiPq")


@dataclass(frozen=True)
class ContainerRun:
    """One `docker run`: its image and the argv its container starts (entrypoint + arguments), None where
    the image runs no vLLM server vllm-fit knows."""

    image: Word
    argv: Optional[List[Word]]


def container_run(words: Sequence[Word]) -> Optional[ContainerRun]:
    """The container a `docker|podman [container] run ...` command starts, else None."""
    texts = [w.text for w in words]
    if not texts or os.path.basename(texts[0]) not in ENGINES:
        return None
    at = 2 if texts[1:2] == ["run"] else 3 if texts[1:3] == ["container", "run"] else 0
    if not at:
        return None
    entrypoint: Optional[Word] = None
    while at < len(words) and texts[at].startswith("-") and texts[at] != "-":
        flag = texts[at]
        if flag == "--":
            at += 1
            break
        takes = _takes_value(flag)
        if flag.split("=", 1)[0] == "--entrypoint":
            entrypoint = words[at].sliced(len("--entrypoint="), len(flag)) if "=" in flag else \
                words[at + 1] if at + 1 < len(words) else None
        at += 1 + takes
    if at >= len(words):
        return None
    image, args = words[at], list(words[at + 1:])
    if entrypoint is None:
        entry = image_entrypoint(image.text, args)
        return ContainerRun(image, entry + args if entry is not None else None)
    return ContainerRun(image, ([entrypoint] if entrypoint.text else []) + args)


def _takes_value(flag: str) -> int:
    """How many words after this option word are its value (0 or 1)."""
    if flag.startswith("--"):
        return 0 if "=" in flag or flag in BOOLEAN_LONG else 1
    letters = flag[1:]
    if "=" in letters:
        return 0
    for index, letter in enumerate(letters):
        if letter not in BOOLEAN_SHORT:
            return 0 if index < len(letters) - 1 else 1  # -p8000:8000 holds its value; -dp takes the next
    return 0
