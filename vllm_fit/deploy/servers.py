"""Find the vLLM servers in a deployment file, and where each of their settings is written.

Read with ruamel.yaml's round-trip loader (safe: no tags that build objects) only for the positions of
the scalars; edits are made in the original text, so every byte outside a changed value stays. Servers:
a container or compose service whose command/args run `vllm serve` or the OpenAI api_server module, or
whose image is vLLM's (its args are the server's); a production-stack `modelSpec` entry (`vllmConfig`
with camelCase keys, `extraArgs`); and a flat `vllm serve --config` mapping (dash-case keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..errors import BadInput, one_line
from .text import Text, Token, words_of

SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)
HELM_KEYS = {"max_model_len": "maxModelLen", "gpu_memory_utilization": "gpuMemoryUtilization",
             "max_num_seqs": "maxNumSeqs", "tensor_parallel_size": "tensorParallelSize"}
"""production-stack's vllmConfig keys (the KV bytes knob has none: it goes to extraArgs)."""


@dataclass
class ArgList:
    """The words of one server's command line, where they live: a YAML list or one shell string."""

    tokens: List[Token]
    append_at: int
    """Where new words go (after the last one)."""
    item_prefix: Optional[str] = None
    """For a block list: the text before a new item's value ("\\n        - "); None for flow or shell."""
    flow: bool = False
    quote: str = '"'


@dataclass
class Server:
    """One vLLM server in a file, and the places its settings are written."""

    file: str
    where: str
    """A human path to it: `doc 2, spec.template.spec.containers[0]`."""
    model: Optional[str] = None
    names: List[str] = field(default_factory=list)
    args: List[ArgList] = field(default_factory=list)
    """The server's command words (command and args, or extraArgs); new flags go to the last list."""
    keys: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    """Mapping settings (helm camelCase or --config dash-case): snake_case name -> value span."""
    key_style: str = ""
    """"helm" or "config" where settings are mapping keys."""
    mapping_end: Optional[int] = None
    mapping_indent: str = ""
    image: Optional[str] = None
    gpu_labels: List[str] = field(default_factory=list)


def _seq_tokens(seq: CommentedSeq, text: Text) -> ArgList:
    """The words of a YAML list of strings (an item may be a shell string of several words)."""
    flow = bool(seq.fa.flow_style())
    tokens: List[Token] = []
    last_end, quote, prefix = None, '"', None
    for index, item in enumerate(seq):
        line, col = seq.lc.item(index)
        start = text.offset(line, col)
        end = text.scalar_end(start, flow)
        raw = text.text[start:end]
        quoted = raw[:1] if raw[:1] in "\"'" else ""
        if quoted:
            quote = quoted
        inner_start, value = (start + 1, raw[1:-1]) if quoted else (start, raw)
        if "\\" in value or (quoted == "'" and "''" in value):
            raise BadInput("an argument with escapes (%s) cannot be edited in place" % one_line(raw, 60))
        if str(item) != value:
            value = str(item)  # a folded or multi-line scalar: its words, without positions to edit
            tokens += [Token(word, -1, -1) for word in value.split()]
        elif len(value.split()) > 1:
            tokens += words_of(value, inner_start)
        else:
            tokens.append(Token(value, inner_start, inner_start + len(value), quoted))
        last_end = end
        if not flow:
            line_start = text.starts[line]
            prefix = "\n" + text.text[line_start:start]
            prefix = prefix if prefix.strip() == "-" else "\n" + " " * (col - 2) + "- "
    if last_end is None:
        raise BadInput("an empty argument list cannot be edited in place")
    return ArgList(tokens, last_end, None if flow else prefix, flow, quote)


def _string_tokens(node: Any, key: Any, text: Text, flow: bool) -> ArgList:
    line, col = node.lc.value(key)
    start = text.offset(line, col)
    end = text.scalar_end(start, flow)
    raw = text.text[start:end]
    quoted = raw[:1] if raw[:1] in "\"'" else ""
    inner = start + 1 if quoted else start
    if "\\" in raw or str(node[key]) != raw[len(quoted):len(raw) - len(quoted)]:
        raise BadInput("a command string that spans lines or has escapes cannot be edited in place")
    return ArgList(words_of(str(node[key]), inner), end - len(quoted), None, False, quoted or '"')


def _is_vllm_command(words: List[str]) -> bool:
    joined = " ".join(words)
    return bool(re.search(r"(^|[\s/])vllm\s+serve\b|(^|\s)--max-model-len\b", joined)) or any(
        m in joined for m in SERVER_MODULES)  # a vLLM-only flag too (KServe's predictor args)


def _model_of(words: List[str]) -> Optional[str]:
    for index, word in enumerate(words):
        if word == "--model" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--model="):
            return word.split("=", 1)[1]
        if word == "serve" and index + 1 < len(words) and not words[index + 1].startswith("-"):
            return words[index + 1]
    return None


def _served_names(words: List[str]) -> List[str]:
    names: List[str] = []
    for index, word in enumerate(words):
        if word == "--served-model-name":
            names += [w for w in words[index + 1:] if not w.startswith("-")][:1]
        elif word.startswith("--served-model-name="):
            names.append(word.split("=", 1)[1])
    return names


def _container(node: CommentedMap, text: Text, file: str, where: str, labels: List[str]) -> Optional[Server]:
    """A container (Kubernetes) or service (compose) that runs vLLM's server, else None."""
    lists = []
    for key in ("command", "args"):
        value = node.get(key)
        if isinstance(value, CommentedSeq) and len(value):
            lists.append(_seq_tokens(value, text))
        elif isinstance(value, str):
            lists.append(_string_tokens(node, key, text, bool(node.fa.flow_style())))
    words = [t.text for arglist in lists for t in arglist.tokens]
    image = node.get("image") if isinstance(node.get("image"), str) else None
    if not (_is_vllm_command(words) or (image and re.search(r"vllm", image, re.I) and lists)):
        return None
    names = _served_names(words)
    if isinstance(node.get("name"), str):
        names.append(node["name"])
    return Server(file, where, _model_of(words), names, lists, image=image, gpu_labels=labels)


def _helm_entry(node: CommentedMap, text: Text, file: str, where: str) -> Server:
    config = node.get("vllmConfig")
    server = Server(file, where, str(node.get("modelURL")) if node.get("modelURL") else None,
                    [str(node["name"])] if node.get("name") else [], key_style="helm")
    if isinstance(config, CommentedMap):
        for name, key in HELM_KEYS.items():
            if key in config:
                line, col = config.lc.value(key)
                start = text.offset(line, col)
                server.keys[name] = (start, text.scalar_end(start, bool(config.fa.flow_style())))
        extra = config.get("extraArgs")
        if isinstance(extra, CommentedSeq) and len(extra):
            server.args = [_seq_tokens(extra, text)]
        server.mapping_end, server.mapping_indent = _mapping_tail(config, text)
    tag = node.get("tag")
    server.image = "%s:%s" % (node.get("repository") or "vllm", tag) if isinstance(tag, str) else None
    return server


def _mapping_tail(node: CommentedMap, text: Text) -> Tuple[Optional[int], str]:
    """Where a new key of a block mapping goes (the end of its last line) and its indentation."""
    if node.fa.flow_style() or not len(node):
        return None, ""
    last = list(node.keys())[-1]
    _, col = node.lc.key(last)
    value = node[last]
    if isinstance(value, (CommentedMap, CommentedSeq)):
        return None, ""  # the last key holds a block: no safe place to append
    vline, vcol = node.lc.value(last)
    end = text.scalar_end(text.offset(vline, vcol), False)
    newline = text.text.find("\n", end)
    return (newline if newline >= 0 else len(text.text)), " " * col


def _config_file(node: CommentedMap, text: Text, file: str, where: str) -> Server:
    server = Server(file, where, str(node["model"]), [str(n) for n in (node.get("served-model-name") or [])]
                    if isinstance(node.get("served-model-name"), list) else
                    [str(node["served-model-name"])] if node.get("served-model-name") else [], key_style="config")
    for key in node:
        if isinstance(key, str) and not isinstance(node[key], (CommentedMap, CommentedSeq)):
            line, col = node.lc.value(key)
            start = text.offset(line, col)
            server.keys[key.replace("-", "_")] = (start, text.scalar_end(start, bool(node.fa.flow_style())))
    server.mapping_end, server.mapping_indent = _mapping_tail(node, text)
    return server


GPU_LABEL_KEYS = re.compile(r"gpu|accelerator|nvidia\.com/gpu\.product", re.I)


def _labels(node: Any) -> List[str]:
    """GPU names a pod spec or service declares (nodeSelector values, accelerator labels, a `gpu:` key)."""
    found = []
    selector = node.get("nodeSelector") if isinstance(node, CommentedMap) else None
    for mapping in (selector, node):
        if isinstance(mapping, CommentedMap):
            for key, value in mapping.items():
                if isinstance(key, str) and isinstance(value, str) and GPU_LABEL_KEYS.search(key):
                    found.append(value)
    return found


def find_servers(text: str, file: str) -> List[Server]:
    """Every vLLM server in a (multi-document) YAML text; BadInput when it is not YAML."""
    yaml = YAML(typ="rt")
    try:
        docs = list(yaml.load_all(text))
    except (YAMLError, ValueError) as exc:
        raise BadInput("%s is not YAML vllm-fit can edit (%s); fix it first, it is left as it is"
                       % (file, one_line(str(exc), 200))) from None
    positions = Text(text)
    servers: List[Server] = []
    for number, doc in enumerate(docs, start=1):
        flat = isinstance(doc, CommentedMap) and not any(isinstance(v, CommentedMap) for v in doc.values())
        if flat and "model" in doc and "max-model-len" in doc:  # a `vllm serve --config` file
            servers.append(_config_file(doc, positions, file, "doc %d" % number))
            continue
        _walk(doc, positions, file, "doc %d, " % number, [], servers)
    return servers


def _walk(node: Any, text: Text, file: str, where: str, labels: List[str], servers: List[Server]) -> None:
    if isinstance(node, CommentedMap):
        labels = labels + _labels(node)
        if "vllmConfig" in node or ("modelURL" in node and "name" in node):
            servers.append(_helm_entry(node, text, file, where))
            return
        if "command" in node or "args" in node:
            found = _container(node, text, file, where, labels)
            if found is not None:
                servers.append(found)
                return
        for key, value in node.items():
            path = "%s%s%s" % (where, "." if where[-1:] != " " else "", key)
            if key == "services" and isinstance(value, CommentedMap):  # compose: a service's name is a name too
                for name, service in value.items():
                    before = len(servers)
                    _walk(service, text, file, "%s.%s" % (path, name), labels, servers)
                    for server in servers[before:]:
                        server.names.append(str(name))
                continue
            _walk(value, text, file, path, labels, servers)
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            _walk(value, text, file, "%s[%d]" % (where, index), labels, servers)
