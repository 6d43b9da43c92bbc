"""Docker Compose services as Compose turns them into argv.

`command` and `entrypoint` are a list (one word per item) or a string that Compose splits itself
(go-shellwords: no shell, quotes respected, an operator ends it); `entrypoint` replaces the image's, and
`command` follows it. Without an entrypoint the image's own runs (vLLM's image: `vllm serve`, so the
model may be the first word). Interpolation (`$VAR`, `${VAR:-default}`) happens before, from the shell
that runs Compose and the .env beside the compose file: a variable .env sets is its value (named where it
is, never written: dotenv.py), any other leaves the word unknown here; `$$` is a literal `$`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import shell
from .config_mount import bind_mounts, resolve
from .dotenv import read_dotenv
from .dotenv import resolve as resolve_variable
from .images import image_entrypoint
from .layout import Layout
from .servers import Addition, Server, ServerKind, invocations
from .words import Word
from .yaml_doc import YamlDoc, get, is_null, items, text_of

INTERPOLATION = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def interpolated(word: Word, dotenv: Dict[str, str], split: bool = False) -> Word:
    """The word after Compose's interpolation: `$$` is `$`; a variable `.env` sets is its value (not written in
    this file: the word says where it is); any other leaves the word unknown. `split`: the word is part of a
    command string, which Compose splits after interpolating, so a value of several words is not followed."""
    if "$" not in word.text:
        return word
    out, unknown, sources, at = [], word.unknown, [word.source] if word.source else [], 0
    text = word.text
    while at < len(text):
        if text.startswith("$$", at):
            out.append(("$", -1))
            at += 2
            continue
        found = INTERPOLATION.match(text, at)
        if found:
            value = resolve_variable(found.group(1), dotenv)
            if value is None or (split and re.search(r"[\s'\"\\]", value[0])):
                unknown = unknown or "%s (set where Compose runs)" % shell.shown_expansion(found.group(0))
                out += [(c, -1) for c in found.group(0)]
            else:
                sources.append(value[1])  # its name only: .env holds tokens too, never shown
                out += [(c, -1) for c in value[0]]
            at = found.end()
            continue
        out.append((text[at], word.offsets[at]))
        at += 1
    source = "%s in the .env beside the compose file" % ", ".join("$" + n for n in dict.fromkeys(sources)) \
        if sources else ""
    return Word("".join(c for c, _ in out), tuple(o for _, o in out), word.after, unknown, word.path, None, source)


def _words(node: Optional[Node], layout: Layout, path: str, dotenv: Dict[str, str]) -> Optional[List[Word]]:
    if is_null(node):
        return None
    if isinstance(node, SequenceNode):
        return [interpolated(w, dotenv) for w in layout.words(node, path)]
    if isinstance(node, ScalarNode):
        return _split_interpolated(shell.quoted_shellwords(layout.word(node, path)), dotenv)
    return None


def _split_interpolated(words: List[Tuple[Word, bool]], dotenv: Dict[str, str]) -> List[Word]:
    """A command string's words after interpolation. Compose interpolates before it splits, so a `${VAR:-a b}`
    that the split cut in pieces may be any number of words: each piece is unknown (never a literal); an
    unquoted word that interpolates to nothing (`${ARGS}` with `ARGS=` in .env) is no word."""
    found: List[Word] = []
    spanning = ""
    for word, quoted in words:
        unclosed = re.search(r"\$\{[^}]*$", word.text)
        if unclosed and not spanning:
            spanning = shell.shown_expansion(unclosed.group(0) + "}")
        if not spanning:
            done = interpolated(word, dotenv, split=True)
            if done.text or quoted or not word.text:
                found.append(done)
            continue
        found.append(replace(word, unknown=word.unknown or "%s (set where Compose runs)" % spanning))
        if "}" in word.text and not unclosed:
            spanning = ""  # the expression ends in this piece
    return found


def environment(node: MappingNode, layout: Layout, path: str, dotenv: Dict[str, str]) -> Dict[str, Word]:
    """The service's environment (list of NAME=value, or a mapping), for the shell of a `sh -c` command."""
    found: Dict[str, Word] = {}
    env = get(node, "environment")
    if isinstance(env, SequenceNode):
        for index, item in enumerate(env.value):
            if isinstance(item, ScalarNode) and "=" in item.value:
                word = interpolated(layout.word(item, "%s.environment[%d]" % (path, index)), dotenv)
                name, _, _ = word.text.partition("=")
                found[name] = word.sliced(len(name) + 1, len(word.text))
    elif isinstance(env, MappingNode):
        for name, value in items(env):
            if isinstance(value, ScalarNode):
                found[name] = interpolated(layout.word(value, "%s.environment.%s" % (path, name)), dotenv)
    return found


def services(doc: YamlDoc, layout: Layout, root: MappingNode, number: int) -> List[Server]:
    """The vLLM servers of a compose file's services (a service that cannot be read says why)."""
    found: List[Server] = []
    dotenv = read_dotenv(Path(doc.file).parent)
    for name, service in items(get(root, "services") or root):
        if not isinstance(service, MappingNode):
            continue
        path = "doc %d, services.%s" % (number, name)
        image = _image(text_of(get(service, "image")), dotenv)
        names = tuple(n for n in (name, text_of(get(service, "container_name"))) if n)
        base = partial(Server, doc.file, path, ServerKind.COMPOSE, image=image, names=names)
        try:
            entry = _words(get(service, "entrypoint"), layout, path + ".entrypoint", dotenv)
            command = _words(get(service, "command"), layout, path + ".command", dotenv) or []
        except shell.ShellUnsupported as exc:
            found.append(base(problem="its command has %s" % exc))
            continue
        if entry is None:
            entry = image_entrypoint(image, command) or []
        argv = entry + command
        runs, problem = invocations(argv, environment(service, layout, path, dotenv))
        if problem:
            found.append(base(problem=problem))
            continue
        for run in runs:
            server = base(program=run.program, words=run.words)
            server.label = run.label
            last = run.words[-1].after if run.words else (argv[-1].after if argv else None)
            if last is not None:
                server.additions["*"] = Addition(after=last)
            resolve(server, bind_mounts(service), Path(doc.file).parent)
            found.append(server)
    return found


def _image(image: Optional[str], dotenv: Dict[str, str]) -> Optional[str]:
    """The image name after interpolation (`vllm/vllm-openai:${VLLM_VERSION}`), None where it is not known."""
    if image is None or "$" not in image:
        return image
    word = interpolated(Word.made(image), dotenv)
    return None if word.unknown else word.text
