"""A `vllm serve --config` YAML file as vLLM reads it: each key an option (dashes or underscores), in
the file's order; `true` is the flag, `false` its `--no-` form, a list its values, `model` the model."""

from __future__ import annotations

import json
from typing import List

from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from .layout import Layout
from .servers import Addition, Server, ServerKind
from .vllm_args import KNOWN, NO_VALUE, Program
from .words import Word
from .yaml_doc import YamlDoc, items, plain

NOT_CONFIG = ("apiVersion", "kind", "services", "spec", "metadata", "servingEngineSpec")


def looks_like_config(root: object, with_model: bool = True) -> bool:
    """A mapping of vLLM options (with a model, unless `with_model` is False): what `vllm serve --config`
    reads."""
    if not isinstance(root, MappingNode):
        return False
    keys = [name for name, _ in items(root)]
    if ("model" not in keys and with_model) or not keys or any(k in NOT_CONFIG for k in keys):
        return False
    known = [k for k in keys if "--" + k.replace("_", "-") in KNOWN]
    return len(known) * 3 >= len(keys) * 2


def config_server(doc: YamlDoc, layout: Layout, root: MappingNode, number: int) -> Server:
    """The file as one server: its keys as the options vLLM makes of them."""
    path = "doc %d" % number
    words: List[Word] = []
    underscores = 0
    for name, value in items(root):
        flag = "--" + name.replace("_", "-")
        underscores += 1 if "_" in name else -1 if "-" in name else 0
        key_path = "%s.%s" % (path, name)
        if isinstance(value, ScalarNode):
            if (value.tag or "").endswith(":bool"):
                on = value.value.lower() == "true"
                if on or "--no-" + flag[2:] in NO_VALUE:
                    words.append(Word.made(flag if on else "--no-" + flag[2:]))
                continue
            words += [Word.made(flag), layout.word(value, key_path)]
        elif isinstance(value, SequenceNode):
            words += [Word.made(flag), *layout.words(value, key_path)]
        else:
            words += [Word.made(flag), Word.made(json.dumps(plain(value), default=str))]
    server = Server(doc.file, path, ServerKind.CONFIG, Program.SERVE, tuple(words), key_style="config",
                    label="vllm serve --config")
    slot = layout.key_slot(root, path)
    if slot is not None:
        server.additions["*"] = Addition(slot=slot, key="_" if underscores > 0 else "-")
    return server
