"""The deployment reader's pieces against references: scalar positions against ruamel.yaml's own values,
the shell splitter against shlex and a real /bin/sh, Helm's number rendering against Go's %v."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from vllm_fit.deploy.helm import go_float
from vllm_fit.deploy.scalars import scalar_offsets
from vllm_fit.deploy.shell import commands
from vllm_fit.deploy.words import Word

WORD_CHARS = st.text(st.sampled_from("abc-=/.:_0123456789 'XYZ\"$\\"), min_size=1, max_size=12)


def scalars(text):
    todo = list(YAML(typ="safe", pure=True).compose_all(text))
    while todo:
        node = todo.pop()
        if isinstance(node.value, str):
            yield node
        else:
            todo.extend(c for pair in node.value for c in (pair if isinstance(pair, tuple) else (pair,)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from("ab -:#'\"\\x\t"), min_size=1, max_size=10), min_size=1, max_size=4),
       st.sampled_from(["plain", "single", "double", "literal", "folded", "folded-strip"]))
def test_every_located_character_is_the_one_the_parser_read(lines, style):
    """Where a scalar's characters are located at all, each located one is that character in the file."""
    if style == "plain":
        body = "a: " + "\n  ".join(line.strip() or "x" for line in lines) + "\n"
    elif style == "single":
        body = "a: '" + "\n  ".join(line.replace("'", "''") for line in lines) + "'\n"
    elif style == "double":
        body = 'a: "' + "\n  ".join(line.replace("\\", "\\\\").replace('"', '\\"') for line in lines) + '"\n'
    else:
        header = {"literal": "|", "folded": ">", "folded-strip": ">-"}[style]
        body = "a: %s\n" % header + "".join("  %s\n" % line.replace("\t", " ") for line in lines)
    try:
        nodes = list(scalars(body))
    except Exception:
        return  # not YAML: nothing to locate
    for node in nodes:
        offsets = scalar_offsets(body, node)
        if offsets is None:
            continue
        assert len(offsets) == len(node.value)
        assert all(o < 0 or body[o] == c for c, o in zip(node.value, offsets)), (body, node.value, offsets)


@pytest.mark.parametrize("text", ["a: >\n  vllm serve m\n  --port 8000\n", "a: |\n  x \\\n  y\n",
                                  "a:\n  - |\n    one\n    two\n", 'a: "x; \n   y"\n', "a: 'it''s'\n"])
def test_common_shapes_are_located_whole(text):
    assert all(scalar_offsets(text, n) is not None for n in scalars(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(WORD_CHARS, min_size=1, max_size=6))
def test_words_split_as_shlex_and_sh_do(words):
    """A command line of quoted and escaped words: the same words as shlex.split and as /bin/sh passes on."""
    line = " ".join(words)
    try:
        expected = shlex.split(line)
    except ValueError:
        return
    if any(c in line for c in "$`") or not expected:
        return  # expansions are the shell's business (tested below with a real shell)
    script = Word(line, tuple(range(len(line))))
    found = commands(script, {}, [])
    assert [w.text for c in found for w in c] == expected


def test_expansions_match_a_real_shell():
    script = 'exec vllm serve "$MODEL" --x=${LEN} $ARGS "$@" --y \'$HOME\''
    env = {"MODEL": "org/m x", "LEN": "4096", "ARGS": "--a 1  --b"}
    positional = ["sh", "--p=1", "two words"]
    words = [Word(v, (-1,) * len(v)) for v in env.values()]
    found = commands(Word(script, tuple(range(len(script)))), dict(zip(env, words)),
                     [Word(p, (-1,) * len(p)) for p in positional])
    real = subprocess.run(["sh", "-c", script.replace("exec vllm serve", "printf '%s\\n'"), *positional],
                          env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert [w.text for w in found[0]][2:] == real


@pytest.mark.parametrize("text, rendered", [("16384", "16384"), ("0.9", "0.9"), ("0.90", "0.9"), ("1000000", "1e+06"),
                                            ("1048576", "1.048576e+06"), ("131072", "131072"), ("0.00001", "1e-05"),
                                            ("0.0001", "0.0001"), ("999999", "999999")])
def test_helm_renders_numbers_as_go_does(text, rendered):
    """Go's fmt %v of a float64 (what Helm's `quote` prints for a YAML number)."""
    assert go_float(text) == rendered
