"""vLLM production-stack Helm values: each `modelSpec` entry as the chart renders its vLLM command line.

From helm/templates/deployment-vllm-multi.yaml (vllm-project/production-stack): `vllm serve MODEL_URL
--host 0.0.0.0 --port P`, then LoRA and tool flags, then, only where `vllmConfig` is set, the prefix
caching flag (always), `--max-model-len`, `--dtype`, `--tensor-parallel-size`, `--max-num-seqs`,
`--gpu_memory_utilization`, `--max_loras`, `--runner`, `--convert` (each where its key is), then every
`extraArgs` item, then `--revision`, LMCache's `--kv-transfer-config` and `--chat-template`. So an
option in `extraArgs` beats its vllmConfig key. Helm reads numbers as float64 and renders them with
Go's %v: 1000000 and above come out in e-notation ("1e+06"), which vLLM does not take as a length.
"""

from __future__ import annotations

from decimal import Decimal
from typing import List, Optional

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .layout import Layout
from .servers import Addition, Server, ServerKind
from .vllm_args import Program
from .words import Word
from .yaml_doc import YamlDoc, get, text_of

VALUE_KEYS = (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
              ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
              ("gpuMemoryUtilization", "--gpu_memory_utilization"), ("maxLoras", "--max_loras"),
              ("runner", "--runner"), ("convert", "--convert"))
"""vllmConfig keys the chart passes on, in its order, with the flag it writes."""
KEY_OF = {"--max-model-len": "maxModelLen", "--gpu-memory-utilization": "gpuMemoryUtilization",
          "--max-num-seqs": "maxNumSeqs"}
"""The settings a fit decides that have a vllmConfig key (kv-cache-memory-bytes has none: extraArgs)."""
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def go_float(text: str) -> str:
    """A YAML number as Helm renders it: float64 through Go's %v, the shortest digits, in e-notation where
    the decimal exponent is below -4 or 6 and above ("1.048576e+06")."""
    value = Decimal(repr(float(text))).normalize()
    if value.is_zero() or not value.is_finite():
        return "0" if value.is_zero() else text
    sign, digits, exponent = value.as_tuple()
    shown = "".join(map(str, digits))
    power = len(shown) + int(exponent) - 1
    if power < -4 or power >= 6:
        mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
        return "%s%se%s%02d" % ("-" if sign else "", mantissa, "+" if power >= 0 else "-", abs(power))
    return format(value, "f")


def _rendered(layout: Layout, node: ScalarNode, path: str) -> Word:
    word = layout.word(node, path)
    if node.tag in NUMBER_TAGS:
        text = go_float(node.value)
        if text != word.text:
            return Word(text, (-1,) * len(text), None, "", path, word.token)
    return word


def _flag(on: Optional[Node], yes: str, no: str) -> List[Word]:
    value = text_of(on)
    return [Word.made(yes if value and value.lower() == "true" else no)]


def model_spec(doc: YamlDoc, layout: Layout, entry: MappingNode, path: str) -> Server:
    """One modelSpec entry as a server."""
    name = text_of(get(entry, "name")) or ""
    url = get(entry, "modelURL")
    words: List[Word] = [layout.word(url, path + ".modelURL")] if isinstance(url, ScalarNode) else []
    words += [Word.made(w) for w in ("--host", "0.0.0.0", "--port", "8000")]
    if (text_of(get(entry, "enableLoRA")) or "").lower() == "true":
        words.append(Word.made("--enable-lora"))
    if (text_of(get(entry, "enableTool")) or "").lower() == "true":
        words.append(Word.made("--enable-auto-tool-choice"))
    parser = get(entry, "toolCallParser")
    if isinstance(parser, ScalarNode):
        words += [Word.made("--tool-call-parser"), layout.word(parser, path + ".toolCallParser")]
    config = get(entry, "vllmConfig")
    config_path = path + ".vllmConfig"
    server = Server(doc.file, path, ServerKind.HELM, Program.SERVE, names=(name,) if name else (), label=name,
                    model=text_of(url), key_style="helm")
    if isinstance(config, MappingNode) and config.value:
        if get(config, "enableChunkedPrefill") is not None:
            words += _flag(get(config, "enableChunkedPrefill"), "--enable-chunked-prefill",
                           "--no-enable-chunked-prefill")
        words += _flag(get(config, "enablePrefixCaching"), "--enable-prefix-caching", "--no-enable-prefix-caching")
        for key, flag in VALUE_KEYS:
            value = get(config, key)
            if isinstance(value, ScalarNode):
                words += [Word.made(flag), _rendered(layout, value, "%s.%s" % (config_path, key))]
        extra = get(config, "extraArgs")
        extra_words = layout.words(extra, config_path + ".extraArgs") if isinstance(extra, SequenceNode) else []
        words += extra_words
        slot = layout.key_slot(config, config_path)
        for option, key in KEY_OF.items():
            if slot is not None:
                server.additions[option] = Addition(slot=slot, key=key)
        if extra_words and extra_words[-1].after is not None:
            server.additions["*"] = Addition(after=extra_words[-1].after)
        elif isinstance(extra, SequenceNode) and extra.flow_style:
            server.additions["*"] = Addition(after=layout.empty_flow_list(extra, config_path + ".extraArgs"))
        elif slot is not None and extra is None:
            server.additions["*"] = Addition(slot=slot, key="extraArgs", new_list=True)
    elif config is None:
        server.cannot_add = ("it has no vllmConfig; adding one makes the chart also pass"
                                   " --no-enable-prefix-caching (add vllmConfig with enablePrefixCaching by hand)")
    revision = get(entry, "modelRevision")
    if isinstance(revision, ScalarNode):
        words += [Word.made("--revision"), layout.word(revision, path + ".modelRevision")]
    lmcache = get(entry, "lmcacheConfig")
    if (text_of(get(lmcache, "enabled")) or "").lower() == "true":
        words += [Word.made("--kv-transfer-config"),
                  Word.made("{...}", unknown="the LMCache connector config the chart writes from lmcacheConfig")]
    if text_of(get(entry, "chatTemplate")):
        words += [Word.made("--chat-template"), Word.made("/templates/" + (text_of(get(entry, "chatTemplate")) or ""))]
    server.words = tuple(words)
    repository, tag = text_of(get(entry, "repository")), text_of(get(entry, "tag"))
    server.image = "%s:%s" % (repository or "vllm/vllm-openai", tag) if tag else None
    server.disabled = (text_of(get(entry, "enabled")) or "").lower() == "false"
    return server


def model_specs(doc: YamlDoc, layout: Layout, seq: SequenceNode, path: str) -> List[Server]:
    return [model_spec(doc, layout, entry, "%s[%d]" % (path, index))
            for index, entry in enumerate(seq.value) if isinstance(entry, MappingNode)]
