"""Every vLLM server of one deployment file, read by the runtime each part of the file belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from .compose import services
from .config_file import config_server, looks_like_config
from .config_mount import config_flag, config_maps, pod_mounts, resolve
from .dockerfile import dockerfile_servers, is_dockerfile
from .helm import model_specs
from .kubernetes import RUNTIME_KINDS, container, inference_service, kubeai_model, runtimes, workload_labels
from .layout import Layout
from .script_file import is_script, script_servers
from .servers import Server, normal_model
from .task_files import is_dstack, is_skypilot, task_servers
from .vllm_args import model_of, served_names
from .yaml_doc import YamlDoc, get, items, text_of


@dataclass
class Deployment:
    """One file: its text, its YAML and its servers."""

    path: Path
    text: str
    doc: YamlDoc
    servers: List[Server]


def read_deployment(text: str, file: str, path: Path) -> Deployment:
    """The file's servers (BadInput when it is not YAML vllm-fit can read); a shell script's, read as the
    shell runs it."""
    if is_script(text, path) or is_dockerfile(path):
        servers = script_servers(text, file) if is_script(text, path) else dockerfile_servers(text, file)
        for server in servers:
            flag = config_flag(server)
            if flag is not None:
                server.config_unread = "%s (a file where the script runs)" % (flag.text or "--config without a file")
            _identify(server)
        return Deployment(path, text, YamlDoc("", file), servers)
    doc = YamlDoc(text, file)
    return Deployment(path, text, doc, find_servers(doc))


def find_servers(doc: YamlDoc) -> List[Server]:
    """Every vLLM server in the file's documents, with its model and names."""
    layout = Layout(doc)
    known = runtimes(doc)
    maps = config_maps(doc)
    found: List[Server] = []
    for number, root in enumerate(doc.docs, start=1):
        if not isinstance(root, MappingNode):
            continue
        if isinstance(get(root, "services"), MappingNode) and get(root, "kind") is None:
            found += services(doc, layout, root, number)
        elif looks_like_config(root):
            found.append(config_server(doc, layout, root, number))
        elif is_skypilot(root) or is_dstack(root):
            found += task_servers(doc, layout, root, number)
        else:
            found += _walk(doc, layout, root, "doc %d" % number, known, maps)
    for server in found:
        if not (server.config_words or server.config_unread):
            resolve(server, {}, Path(doc.file).parent)
        _identify(server)
    return found


def _walk(doc: YamlDoc, layout: Layout, root: MappingNode, path: str, known: dict,
          maps: Dict[str, Dict[str, str]]) -> List[Server]:
    """Containers, InferenceServices and production-stack entries anywhere in one document."""
    kind = text_of(get(root, "kind"))
    owner = [n for n in [text_of(get(get(root, "metadata"), "name"))] if n]
    template = kind in RUNTIME_KINDS
    found: List[Server] = []
    if kind == "InferenceService":
        found += inference_service(doc, layout, root, path, known)
    if kind == "Model" and (text_of(get(root, "apiVersion")) or "").startswith("kubeai.org/"):
        return kubeai_model(doc, layout, root, path)
    stack: List[Tuple[Node, str, List[str], Optional[Node]]] = [(root, "", [], None)]
    while stack:
        node, where, labels, pod = stack.pop()
        full = "%s, %s" % (path, where) if where else path
        if isinstance(node, MappingNode):
            labels = labels + workload_labels(node)
            pod = node if get(node, "containers") is not None else pod  # whose volumes its containers mount
            if where.endswith("spec.predictor.model") and kind == "InferenceService":
                continue
            specs = get(node, "modelSpec")
            if isinstance(specs, SequenceNode):
                found += model_specs(doc, layout, specs, "%s.modelSpec" % full if where else "%s, modelSpec" % path)
                continue
            if get(node, "command") is not None or get(node, "args") is not None or \
                    (get(node, "image") is not None and where.split(".")[-1].startswith("containers[")):
                servers = container(doc, layout, node, full, owner, labels, template)
                for server in servers:
                    resolve(server, pod_mounts(node, pod, maps), Path(doc.file).parent)
                if servers:
                    found += servers
                    continue
            for key, value in reversed(items(node)):
                stack.append((value, "%s.%s" % (where, key) if where else key, labels, pod))
        elif isinstance(node, SequenceNode):
            for index in reversed(range(len(node.value))):
                stack.append((node.value[index], "%s[%d]" % (where, index), labels, pod))
    return found


def _identify(server: Server) -> None:
    """The model and the names clients use, from the server's own options."""
    if server.program is None:
        return
    model = model_of(server.program, server.read_args)
    if model is not None and not model.unknown:
        server.model = server.model or model.text
    elif server.model is None and model is not None:
        server.model_from = model.unknown
    server.model = normal_model(server.model)
    server.names = tuple(dict.fromkeys([*server.names, *served_names(server.program, server.read_args)]))
