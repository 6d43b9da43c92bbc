"""Kubernetes containers and KServe InferenceServices as the kubelet and KServe turn them into argv.

A container's argv is `command` (or the image's entrypoint) followed by `args` (or nothing); each list
item is one word; `$(VAR)` is expanded from the container's `env` (earlier entries only inside env
values, `$$` an escaped `$`, an undefined name left as written), before any shell sees it. A KServe
InferenceService's predictor `model` runs its ServingRuntime's container with the runtime's args
first and its own `args` after them, `{{.Name}}` rendered; the runtime is the one named in the same
files, else KServe's default for the model format. A KubeAI Model with the VLLM engine runs the
api_server with its own `args` last. Values that only the cluster knows (`valueFrom`, `envFrom`) leave
a word unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Dict, List, Optional, Tuple

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .images import image_entrypoint, is_vllm_image
from .layout import Layout
from .servers import Addition, Server, ServerKind, invocations
from .vllm_args import Program
from .words import Word
from .yaml_doc import YamlDoc, get, is_null, items, text_of

RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
GPU_LABEL_KEYS = re.compile(r"gpu|accelerator|nvidia\.com/gpu\.product", re.I)
KSERVE_DEFAULT_ARGS = {
    "huggingface": (Program.KSERVE, ["--model_name={{.Name}}", "--model_dir=/mnt/models"]),
    "vllm": (Program.API_SERVER, ["--port=8080", "--served-model-name={{.Name}}", "--model=/mnt/models"]),
}
"""kserve-huggingfaceserver and kserve-vllmserver (config/runtimes/ in kserve/kserve)."""


@dataclass
class Env:
    """A container's environment as `$(VAR)` sees it, and whether envFrom may define more."""

    values: Dict[str, Word]
    open: bool


def environment(node: MappingNode, layout: Layout, path: str) -> Env:
    """The container's `env` entries in order (each value expanded with the earlier ones)."""
    values: Dict[str, Word] = {}
    entries = get(node, "env")
    for index, entry in enumerate(entries.value if isinstance(entries, SequenceNode) else []):
        name = text_of(get(entry, "name"))
        if name is None:
            continue
        value = get(entry, "value")
        if isinstance(value, ScalarNode):
            values[name] = expand(layout.word(value, "%s.env[%d].value" % (path, index)), Env(dict(values), False))
        else:
            values[name] = Word.made("$(%s)" % name, unknown="$(%s) (set by valueFrom in the cluster)" % name)
    return Env(values, get(node, "envFrom") is not None)


def expand(word: Word, env: Env) -> Word:
    """`$(NAME)` expanded as the kubelet does (its characters keep the offsets of the env value)."""
    if "$" not in word.text:
        return word
    text, offsets = word.text, word.offsets
    out: List[Tuple[str, int]] = []
    unknown = word.unknown
    at = 0
    while at < len(text):
        if text[at] == "$" and text[at + 1:at + 2] == "$":
            out.append(("$", -1))
            at += 2
            continue
        if text[at] == "$" and text[at + 1:at + 2] == "(":
            close = text.find(")", at + 2)
            name = text[at + 2:close] if close > 0 else None
            if name is not None and name in env.values:
                value = env.values[name]
                out += list(zip(value.text, value.offsets))
                unknown = unknown or value.unknown
                at = close + 1
                continue
            if name is not None and env.open:
                unknown = unknown or "$(%s) (perhaps from envFrom)" % name
        out.append((text[at], offsets[at]))
        at += 1
    changed = "".join(c for c, _ in out) != text or tuple(o for _, o in out) != offsets
    return Word("".join(c for c, _ in out), tuple(o for _, o in out), word.after, unknown, word.path,
                None if changed else word.token)


def _command_words(node: MappingNode, key: str, layout: Layout, path: str, env: Env) -> Optional[List[Word]]:
    value = get(node, key)
    if is_null(value):
        return None
    if isinstance(value, SequenceNode):
        return [expand(w, env) for w in layout.words(value, "%s.%s" % (path, key))]
    return [Word.made(str(getattr(value, "value", "")), unknown="%s is not a list (Kubernetes needs one)" % key)]


def container(doc: YamlDoc, layout: Layout, node: MappingNode, path: str, owner: List[str],
              labels: List[str], template: bool) -> List[Server]:
    """The vLLM servers one container runs (usually none or one)."""
    env = environment(node, layout, path)
    command = _command_words(node, "command", layout, path, env)
    args = _command_words(node, "args", layout, path, env)
    image = text_of(get(node, "image"))
    if command is None:
        entry = image_entrypoint(image, args or [])
        if entry is None:
            return []
        command = entry
    argv = command + (args or [])
    runs, problem = invocations(argv, env.values)
    name = text_of(get(node, "name"))
    base = partial(Server, doc.file, path, ServerKind.CONTAINER, image=image, gpu_labels=tuple(labels),
                   template=template)
    if problem:
        if not (is_vllm_image(image) or "vllm" in " ".join(w.text for w in argv)):
            return []
        return [base(names=tuple(n for n in [name, *owner] if n), label=name or "", problem=problem)]
    servers = []
    for run in runs:
        label = ", ".join(x for x in (name, run.label) if x)
        server = base(program=run.program, words=run.words, label=label)
        server.names = tuple(n for n in [name, *owner] if n)
        last = run.words[-1].after if run.words else (argv[-1].after if argv else None)
        if last is not None:
            server.additions["*"] = Addition(after=last)
        servers.append(server)
    return servers


def workload_labels(node: Node) -> List[str]:
    """GPU names a pod spec declares (nodeSelector values, accelerator labels)."""
    found = []
    for mapping in (get(node, "nodeSelector"), node):
        for key, value in items(mapping) if isinstance(mapping, MappingNode) else []:
            text = text_of(value)
            if text and GPU_LABEL_KEYS.search(key):
                found.append(text)
    return found


def runtimes(doc: YamlDoc) -> Dict[str, MappingNode]:
    """The KServe ServingRuntimes in a file, by name."""
    found: Dict[str, MappingNode] = {}
    for root in doc.docs:
        if isinstance(root, MappingNode) and text_of(get(root, "kind")) in RUNTIME_KINDS:
            name = text_of(get(get(root, "metadata"), "name"))
            if name:
                found[name] = root
    return found


def inference_service(doc: YamlDoc, layout: Layout, root: MappingNode, path: str,
                      known_runtimes: Dict[str, MappingNode]) -> List[Server]:
    """A KServe InferenceService's predictor `model`: its runtime's container with the service's args."""
    predictor = get(get(root, "spec"), "predictor")
    model = get(predictor, "model")
    if not isinstance(model, MappingNode):
        return []
    name = text_of(get(get(root, "metadata"), "name")) or ""
    model_path = "%s, spec.predictor.model" % path
    fmt = (text_of(get(get(model, "modelFormat"), "name")) or "").lower()
    runtime_name = text_of(get(model, "runtime"))
    own_args = get(model, "args")
    own = layout.words(own_args, model_path + ".args") if isinstance(own_args, SequenceNode) else []
    runtime = known_runtimes.get(runtime_name or "")
    base = partial(Server, doc.file, model_path, ServerKind.KSERVE, label=name, names=(name,))
    if runtime is not None:
        containers = get(get(runtime, "spec"), "containers")
        first = containers.value[0] if isinstance(containers, SequenceNode) and containers.value else None
        if not isinstance(first, MappingNode):
            return []
        env = environment(first, layout, "runtime")
        head = [_rendered(w, name) for w in (_command_words(first, "command", layout, "runtime", env) or [])]
        runtime_args = [_rendered(w, name) for w in (_command_words(first, "args", layout, "runtime", env) or [])]
        if not head:
            head = image_entrypoint(text_of(get(first, "image")), runtime_args + own) or []
        argv = head + runtime_args + own
        image = text_of(get(first, "image"))
    elif fmt in KSERVE_DEFAULT_ARGS:
        program, defaults = KSERVE_DEFAULT_ARGS[fmt]
        head = [Word.made(w) for w in program.value.split()]
        argv = head + [_rendered(Word.made(a), name) for a in defaults] + own
        image, env = None, Env({}, False)
    else:
        return []
    runs, problem = invocations(argv, env.values)
    if problem or not runs:
        return [base(problem=problem or "its runtime %s runs no vLLM server vllm-fit knows"
                       % (runtime_name or fmt))] if (problem or runtime is not None) else []
    run = runs[-1]
    server = base(program=run.program, words=run.words, image=image)
    storage = text_of(get(model, "storageUri"))
    server.model = storage
    if own:
        server.additions["*"] = Addition(after=own[-1].after)
    elif own_args is not None and isinstance(own_args, SequenceNode) and own_args.flow_style:
        server.additions["*"] = Addition(after=layout.empty_flow_list(own_args, model_path + ".args"))
    else:
        slot = layout.key_slot(model, model_path)
        if slot is not None:
            server.additions["*"] = Addition(slot=slot, key="args", new_list=True)
    backend = server.args.last("--backend")
    if backend is not None and backend.value and backend.value.lower() != "vllm":
        server.problem = "it runs the %s backend, not vLLM (--backend=%s)" % (backend.value, backend.value)
    return [server]


def _rendered(word: Word, name: str) -> Word:
    """A runtime's word with KServe's `{{.Name}}` rendered; runtime words belong to the runtime, which other
    services share, so none of their characters is editable from a service."""
    text = word.text.replace("{{.Name}}", name).replace("{{ .Name }}", name)
    return Word.made(text, word.unknown)


def kubeai_model(doc: YamlDoc, layout: Layout, root: MappingNode, path: str) -> List[Server]:
    """A KubeAI Model with the VLLM engine: `python3 -m vllm.entrypoints.openai.api_server --model=REPO
    --served-model-name=NAME` and then the Model's `args` (internal/modelcontroller/engine_vllm.go)."""
    spec = get(root, "spec")
    if (text_of(get(spec, "engine")) or "").upper() != "VLLM" or not isinstance(spec, MappingNode):
        return []
    name = text_of(get(get(root, "metadata"), "name")) or ""
    url = text_of(get(spec, "url")) or ""
    own_args = get(spec, "args")
    spec_path = "%s, spec" % path
    own = layout.words(own_args, spec_path + ".args") if isinstance(own_args, SequenceNode) else []
    made = [Word.made("--model=" + re.sub(r"^[a-z0-9]+://", "", url)), Word.made("--served-model-name=" + name)]
    profile = (text_of(get(spec, "resourceProfile")) or "").split(":")[0]
    server = Server(doc.file, spec_path, ServerKind.KUBEAI, Program.API_SERVER, tuple(made + own), (name,),
                    url or None, gpu_labels=(profile,) if profile else (), label=name)
    if own and own[-1].after is not None:
        server.additions["*"] = Addition(after=own[-1].after)
    else:
        slot = layout.key_slot(spec, spec_path)
        if slot is not None:
            server.additions["*"] = Addition(slot=slot, key="args", new_list=True)
    return [server]
