"""A vLLM server's command line as vLLM's argument parser reads it.

Which programs are vLLM's server (`vllm serve`, the OpenAI and plain api_server modules, KServe's
huggingfaceserver with its vLLM backend); then the options: `--flag value`, `--flag=value`, `_` and
`-` the same in a name (FlexibleArgumentParser), unique prefixes and the short aliases (`-tp 2`), the
number of values each option takes (vllm_options.py, read off vLLM's parser; `-O3` is one word, and
so is a short option with `=`), and the last occurrence
of an option winning (argparse's `store`). `vllm serve`'s positional model wins over `--model`. A word that
holds an option and its value with a space is a stray positional to argparse, kept apart (`Args.merged`), and
an empty word is no model (`stray_word` says why either is refused).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

from .vllm_options import MANY_VALUES, NO_VALUE, ONE_VALUE, OPTIONAL_VALUE, SHORT
from .words import Word

KNOWN = NO_VALUE | MANY_VALUES | ONE_VALUE | OPTIONAL_VALUE
SHELLS = ("sh", "bash", "dash", "ash", "zsh", "ksh")
"""Programs that run a script (`sh -c SCRIPT`)."""
SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
KSERVE_MODULE = "huggingfaceserver"
PYTHON = re.compile(r"(.*/)?python[0-9.]*$")
NEGATIVE = re.compile(r"-[0-9.]+$")
OPTIMIZATION_LEVEL = re.compile(r"-O[^.=]")
"""`-O3`, `-Odecode`: vLLM's optimization level (its compilation level before 0.11), value and flag in one word."""
PYTHON_FLAG = re.compile(r"-[bBdEhiIOqsSuvVxPR]+$|-[XW]$|-[XW].+$")


class Program(Enum):
    """The server program a command runs."""

    SERVE = "vllm serve"
    API_SERVER = "python -m vllm.entrypoints.openai.api_server"
    KSERVE = "python -m huggingfaceserver (KServe, vLLM backend)"


def is_shell(word: Word) -> bool:
    """The word names a shell (`/bin/bash`, `sh`)."""
    return os.path.basename(word.text) in SHELLS


def program_of(words: Sequence[Word]) -> Optional[Tuple[Program, int]]:
    """The server program these words run and how many words name it, else None."""
    texts = [w.text for w in words]
    if len(texts) >= 2 and os.path.basename(texts[0]) == "vllm" and texts[1] == "serve":
        return Program.SERVE, 2
    if not texts or not PYTHON.match(texts[0]):
        return None
    at = 1  # python's own options before -m: -u, -O, -X importtime, -W ignore ...
    while at < len(texts) and PYTHON_FLAG.match(texts[at]):
        at += 2 if texts[at] in ("-X", "-W") else 1
    if texts[at:at + 1] == ["-m"] and at + 1 < len(texts):
        module = texts[at + 1]
        if module in SERVER_MODULES:
            return Program.API_SERVER, at + 2
        if module == "vllm.entrypoints.cli.main" and texts[at + 2:at + 3] == ["serve"]:
            return Program.SERVE, at + 3
        if module == KSERVE_MODULE:
            return Program.KSERVE, at + 2
    return None


def canonical(flag: str) -> str:
    """An option's name as vLLM's parser resolves it: `--gpu_memory_utilization` and `--gpu-memory-util`
    (a unique prefix) are `--gpu-memory-utilization`; `-tp` is `--tensor-parallel-size`."""
    if not flag.startswith("--"):
        return SHORT.get(flag, flag)
    name = "--" + flag[2:].split(".", 1)[0].replace("_", "-")
    if name in KNOWN:
        return name
    longer = [known for known in KNOWN if known.startswith(name)]
    return longer[0] if len(longer) == 1 else name


@dataclass(frozen=True)
class Option:
    """One occurrence of an option: its canonical name, the word that names it, its value words (one for
    `--flag=value`, whose value is the text after `=`)."""

    name: str
    flag: Word
    values: Tuple[Word, ...]
    inline: bool
    """`--flag=value`: the value is part of the flag's own word."""

    @property
    def value(self) -> Optional[str]:
        if self.inline:
            return self.flag.text.split("=", 1)[1]
        return " ".join(v.text for v in self.values) if self.values else None

    def value_word(self) -> Optional[Word]:
        """The word (or the part of the flag's word) that holds a one-value option's value."""
        if self.inline:
            at = self.flag.text.index("=") + 1
            return self.flag.sliced(at, len(self.flag.text))
        return self.values[0] if len(self.values) == 1 else None


@dataclass(frozen=True)
class Args:
    """A server's options in order, its positional words, and the words that hold an option and its value with a
    space ("--max-model-len 4096" as one list item: argparse reads them as stray positionals)."""

    options: Tuple[Option, ...]
    positionals: Tuple[Word, ...]
    merged: Tuple[Word, ...] = ()

    def last(self, name: str) -> Optional[Option]:
        """The occurrence that wins (argparse keeps the last), by canonical name."""
        found = [o for o in self.options if o.name == name]
        return found[-1] if found else None

    def effective(self) -> Dict[str, Optional[str]]:
        """Every option's winning value (None for a flag without a value), by canonical name."""
        return {o.name: o.value for o in self.options}


def parse(words: Sequence[Word]) -> Args:
    """The options and positionals of the words after the program's name."""
    options: List[Option] = []
    positionals: List[Word] = []
    merged: List[Word] = []
    at = 0
    while at < len(words):
        word = words[at]
        text = word.text
        if text == "--":
            positionals += words[at + 1:]
            break
        if not looks_like_option(text):
            (merged if _dashed(text) else positionals).append(word)
            at += 1
            continue
        if "=" in text:  # --flag=value, and argparse's -tp=2; vLLM's dotted -cc.level=3 too
            options.append(Option(canonical(text.split("=", 1)[0]), word, (), True))
            at += 1
            continue
        if OPTIMIZATION_LEVEL.match(text):  # -O3, -Odecode: the level is in the word (FlexibleArgumentParser)
            options.append(Option("-O", word, (), False))
            at += 1
            continue
        name = canonical(text)
        taken = _values(name, words, at + 1, dotted="." in text)
        options.append(Option(name, word, tuple(words[at + 1:at + 1 + taken]), False))
        at += 1 + taken
    return Args(tuple(options), tuple(positionals), tuple(merged))


def _dashed(text: str) -> bool:
    """A word starting with `-` that is not a negative number nor `-` alone."""
    return text.startswith("-") and not NEGATIVE.match(text) and text != "-"


def looks_like_option(text: str) -> bool:
    """argparse's test: a dashed word is an option unless it holds a space in its name ("--max-model-len 4096" as
    one word is a positional in every version)."""
    return _dashed(text) and not any(c.isspace() for c in text.split("=", 1)[0])


def stray_word(program: Program, args: Args) -> str:
    """Why vLLM's parser takes a word the file holds as a stray argument ("" when none): an option and its value
    written as one word ("--max-model-len 4096" as one list item: `vllm serve` refuses to start, other entry
    points ignore it or refuse), or an empty word after `vllm serve`'s model ("$EXTRA" quoted and empty)."""
    merged = next((w for w in args.merged if not w.unknown), None)
    if merged is not None:
        return ("the word %r holds an option and its value with a space, which vLLM reads as a stray argument"
                " (vllm serve refuses to start; other entry points ignore it); write the option and its value as"
                " two words" % merged.text)
    if program is Program.SERVE and any(not w.text and not w.unknown for w in args.positionals):
        return ("it gives vllm serve an empty word after the model (a quoted empty variable, or \"\"), which vLLM"
                " refuses ('unrecognized arguments'); remove it, or leave the variable unquoted")
    return ""


def _values(name: str, words: Sequence[Word], at: int, dotted: bool = False) -> int:
    """How many of the words from `at` on the option `name` takes as its value: argparse never takes a word
    that looks like an option as a value (an option unknown to this table included: a newer vLLM's flag must
    not swallow the next flag), while vLLM's dotted `--compilation-config.mode 3` takes the next word whatever
    it is."""
    def is_value(index: int) -> bool:
        return index < len(words) and bool(words[index].text) and not looks_like_option(words[index].text)

    if dotted:
        return 1 if at < len(words) else 0
    if name in NO_VALUE:
        return 0
    if name in MANY_VALUES:
        count = 0
        while is_value(at + count):
            count += 1
        return count
    return 1 if is_value(at) else 0


def model_of(program: Program, args: Args) -> Optional[Word]:
    """The model the server loads: `vllm serve`'s positional wins over --model (several different --model
    values: unknown, the version decides); KServe's --model_id or --model_dir."""
    slot = [w for w in args.positionals if w.text or w.unknown]  # an empty word is no model (stray_word)
    if program is Program.SERVE and slot:
        return slot[0]
    given = [o.value_word() for o in args.options if o.name == "--model" and o.value_word() is not None]
    if program is Program.SERVE and len({word.text for word in given if word is not None}) > 1:
        # vllm serve moves the first --model into its positional slot (0.11.1+); before, argparse kept the last
        return Word.made(" or ".join(word.text for word in given if word is not None),
                         unknown="several --model values (vllm serve reads the first, older versions the last)")
    for name in (("--model-id", "--model-dir") if program is Program.KSERVE else ("--model",)):
        option = args.last(name)
        if option is not None and option.value_word() is not None:
            return option.value_word()
    return None


def served_names(program: Program, args: Args) -> List[str]:
    """The names clients use: --served-model-name's values (KServe: --model_name), those the file holds."""
    option = args.last("--model-name" if program is Program.KSERVE else "--served-model-name")
    if option is None:
        return []
    if option.inline:
        return [option.value] if option.value and not option.flag.unknown else []
    return [v.text for v in option.values if not v.unknown]


def open_word(program: Program, args: Args) -> Optional[Word]:
    """A word the file does not hold that may itself be options (`$(EXTRA_ARGS)`, a script's `"$@"`): an
    unknown word that is not the model's slot nor one option's single value. Whatever it sets wins over
    the options before it, so nothing about them is known."""
    extra = args.positionals[1:] if program is Program.SERVE else args.positionals
    listed = [w for o in args.options if o.name in MANY_VALUES for w in o.values]
    return next((w for w in (*extra, *listed) if w.unknown), None)
