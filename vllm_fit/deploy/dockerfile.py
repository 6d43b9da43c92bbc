"""A Dockerfile whose image starts vLLM: the command its last stage runs, as Docker builds it.

Docker's rules (docs.docker.com, Dockerfile reference): a line ending in `\\` continues on the next, and
comment lines inside are dropped; `CMD` and `ENTRYPOINT` in the exec form (a JSON list of strings) run as
written, in the shell form (anything else) as `/bin/sh -c TEXT`; the last of each wins; a shell-form
ENTRYPOINT ignores CMD; an ENTRYPOINT set in a stage drops the CMD its base image had. Without an
ENTRYPOINT the base image's runs (vLLM's image: `vllm serve`, or the api_server module before 0.10), so a
CMD there is its arguments. `ENV` values reach the shell form's `$VAR`; exec-form words are not expanded.
`FROM` names an image (ARG defaults substituted) or an earlier stage, whose settings it inherits. What
`docker run IMAGE ARGS` or a Kubernetes `args:` put in place of CMD is outside the file: what the file
says is what is read and written here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .images import image_entrypoint
from .servers import Addition, Server, ServerKind, invocations
from .shell import ShellUnsupported, shellwords
from .words import After, Place, Token, Word

NAMES = re.compile(r"^(Dockerfile|Containerfile)([._-].*)?$|\.(dockerfile|containerfile)$", re.I)
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}?")


def is_dockerfile(path: Path) -> bool:
    return bool(NAMES.search(path.name))


@dataclass
class _Stage:
    """What a build stage runs: its image, environment, ENTRYPOINT and CMD (argv words, or None where unset)."""

    image: str = ""
    env: Dict[str, Word] = field(default_factory=dict)
    entrypoint: Optional[List[Word]] = None
    entry_shell: bool = False
    cmd: Optional[List[Word]] = None
    line: int = 0


def dockerfile_servers(text: str, file: str) -> List[Server]:
    """The vLLM server the Dockerfile's last stage starts, if any; one it cannot read says why."""
    stages: Dict[str, _Stage] = {}
    stage: Optional[_Stage] = None
    args: Dict[str, str] = {}
    for keyword, word, line in _instructions(text):
        if keyword == "ARG" and stage is None:
            name, _, default = word.text.strip().partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif keyword == "FROM":
            parts = _VARIABLE.sub(lambda m: args.get(m.group(1), m.group(3) or ""), word.text).split()
            parts = [p for p in parts if not p.startswith("--")]
            base = stages.get(parts[0].lower()) if parts else None
            stage = replace(base, env=dict(base.env)) if base else _Stage(image=parts[0] if parts else "")
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages[parts[2].lower()] = stage
        elif stage is None:
            continue
        elif keyword == "ENV":
            try:
                stage.env.update(_env(word))
            except ShellUnsupported as exc:  # Docker refuses to build it
                problem = "its ENV at line %d has %s" % (line, exc)
                found = Server(file, "line %d" % line, ServerKind.DOCKERFILE, problem=problem)
                return [found] if "vllm" in text else []
        elif keyword in ("CMD", "ENTRYPOINT"):
            words, shell = _command(word)
            if keyword == "CMD":
                stage.cmd, stage.line = words, line
            else:
                stage.entrypoint, stage.entry_shell, stage.line = words, shell, line
                stage.cmd = None
    if stage is None or (stage.cmd is None and stage.entrypoint is None):
        return []
    argv = _argv(stage)
    if argv is None:
        return []
    runs, problem = invocations(argv, stage.env)
    path = "line %d" % stage.line
    if problem:
        return [Server(file, path, ServerKind.DOCKERFILE, image=stage.image, problem=problem)]
    servers = []
    for run in runs:
        server = Server(file, path, ServerKind.DOCKERFILE, program=run.program, words=run.words, image=stage.image,
                        label=run.label)
        last = run.words[-1].after if run.words else argv[-1].after
        if last is not None:
            server.additions["*"] = Addition(after=last)
        servers.append(server)
    return servers


def _argv(stage: _Stage) -> Optional[List[Word]]:
    """ENTRYPOINT + CMD as Docker joins them (the base image's entrypoint where none is set here)."""
    cmd = stage.cmd or []
    if stage.entrypoint is not None:
        return stage.entrypoint if stage.entry_shell else stage.entrypoint + cmd
    entry = image_entrypoint(stage.image, cmd)
    return (entry + cmd) if entry is not None else (cmd or None)


def _instructions(text: str) -> List[Tuple[str, Word, int]]:
    """Each instruction: its keyword, its arguments as one located word (continuations joined), its line."""
    found: List[Tuple[str, Word, int]] = []
    lines = text.split("\n")
    at, number = 0, 0
    while number < len(lines):
        line, start, first_line = lines[number], at, number + 1
        at += len(line) + 1
        number += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        chars: List[Tuple[str, int]] = []
        while True:
            body = line.rstrip("\r")
            continued = body.rstrip().endswith("\\")
            if continued:
                body = body.rstrip()[:-1]
            chars += [(c, start + i) for i, c in enumerate(body)]
            if not continued or number >= len(lines):
                break
            while number < len(lines) and (not lines[number].strip() or lines[number].lstrip().startswith("#")):
                at += len(lines[number]) + 1
                number += 1  # blank and comment lines inside a continuation are dropped
            if number >= len(lines):
                break
            line, start = lines[number], at
            at += len(line) + 1
            number += 1
        joined = "".join(c for c, _ in chars)
        keyword = re.match(r"\s*(\S+)\s*", joined)
        if keyword is None:
            continue
        rest = chars[keyword.end():]
        word = Word("".join(c for c, _ in rest).rstrip(), tuple(o for _, o in rest)[:len("".join(
            c for c, _ in rest).rstrip())], path="line %d" % first_line)
        found.append((keyword.group(1).upper(), word, first_line))
    return found


def _command(word: Word) -> Tuple[List[Word], bool]:
    """CMD or ENTRYPOINT arguments: the exec form's JSON strings, else `/bin/sh -c TEXT` (True: shell form)."""
    try:
        value = json.loads(word.text)
    except ValueError:
        value = None
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return [Word.made("/bin/sh"), Word.made("-c"), word], True
    return _json_strings(word), False


def _json_strings(word: Word) -> List[Word]:
    """The strings of a JSON list, each located (an escaped character is not written where it reads)."""
    found: List[Word] = []
    text, at = word.text, word.text.index("[") + 1
    close = word.text.rindex("]")
    while True:
        start = text.find('"', at, close)
        if start < 0:
            break
        chars: List[Tuple[str, int]] = []
        at = start + 1
        while text[at] != '"':
            if text[at] == "\\":
                escaped = json.loads('"%s"' % (text[at:at + 6] if text[at + 1] == "u" else text[at:at + 2]))
                chars.append((escaped, -1))
                at += 6 if text[at + 1] == "u" else 2
            else:
                chars.append((text[at], word.offsets[at]))
                at += 1
        end = word.offsets[at] + 1
        at += 1
        after = After(end, Place.FLOW_ITEM, '"', path=word.path, value_quote='"')
        found.append(Word("".join(c for c, _ in chars), tuple(o for _, o in chars), after, "", word.path,
                          Token(word.offsets[start], end, '"')))
    return found


def _env(word: Word) -> Dict[str, Word]:
    """ENV NAME=value ... (quotes removed as Docker does), or the old ENV NAME value; a value that expands
    another variable is not known here."""
    words = shellwords(word)
    if words and "=" not in words[0].text:
        name = words[0].text
        value = word.sliced(len(word.text) - len(word.text.lstrip()) + len(name), len(word.text))
        value = value.sliced(len(value.text) - len(value.text.lstrip()), len(value.text))
        return {name: _known(name, value)}
    found = {}
    for item in words:
        name, equals, _ = item.text.partition("=")
        if equals:
            found[name] = _known(name, item.sliced(len(name) + 1, len(item.text)))
    return found


def _known(name: str, value: Word) -> Word:
    if "$" in value.text:
        return Word.made(value.text, unknown="$%s (ENV expands %s as the image is built)" % (name, value.text))
    return value
