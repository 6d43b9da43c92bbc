"""The `--config` YAML a server's vLLM reads besides its command line.

vLLM splices that file's options in right after `serve [MODEL]`, so the command line's own options win
over it, and it may set what decides whether a fit holds (the other memory knob, the parallelism).
Where the file is known, its options are read (never edited from here: a fit goes on the command line,
which wins): a Compose bind mount of a file beside the compose file, or a Kubernetes ConfigMap of the
same file mounted into the container. Anywhere else it is a file apply does not read, and nothing is
written for that server unless --allow-mismatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import BadInput
from .config_file import config_server, looks_like_config
from .layout import Layout
from .servers import Server
from .words import Word
from .yaml_doc import YamlDoc, get, items, text_of

MAX_CONFIG_BYTES = 1 << 20
"""A --config file larger than this is not read (a vLLM option file is a few hundred bytes)."""


@dataclass(frozen=True)
class Mount:
    """What is mounted at a container path: a host path (Compose, relative to the compose file) or the files
    of a ConfigMap in the same file (path inside the mount -> text; "" when the mount is one file)."""

    host: str = ""
    files: Dict[str, str] = field(default_factory=dict)
    what: str = ""


def config_flag(server: Server) -> Optional[Word]:
    """The file vLLM reads its options from: the value of the first `--config` (vLLM reads only that one)."""
    for option in server.args.options:
        if option.name == "--config":
            return option.value_word() or Word.made("")
    return None


def bind_mounts(service: MappingNode) -> Dict[str, Mount]:
    """A compose service's bind mounts of host paths, by container path (short `./host:/container[:ro]` and
    long `{type: bind, source, target}` syntax; named volumes and interpolated paths left out)."""
    found: Dict[str, Mount] = {}
    for item in _list(get(service, "volumes")):
        source = target = None
        if isinstance(item, ScalarNode):
            parts = item.value.split(":")
            if len(parts) >= 2:
                source, target = parts[0], parts[1]
        elif isinstance(item, MappingNode) and text_of(get(item, "type")) in (None, "bind"):
            source, target = text_of(get(item, "source")), text_of(get(item, "target"))
        if source and target and "$" not in source and re.match(r"[./~]", source):
            found[target.rstrip("/") or "/"] = Mount(host=source)
    return found


def config_maps(doc: YamlDoc) -> Dict[str, Dict[str, str]]:
    """The ConfigMaps of a file: name -> key -> text (`data` only)."""
    found: Dict[str, Dict[str, str]] = {}
    for root in doc.docs:
        if isinstance(root, MappingNode) and text_of(get(root, "kind")) == "ConfigMap":
            name = text_of(get(get(root, "metadata"), "name"))
            data = get(root, "data")
            if name and isinstance(data, MappingNode):
                found[name] = {key: value.value for key, value in items(data) if isinstance(value, ScalarNode)}
    return found


def pod_mounts(container: MappingNode, pod: Optional[Node], maps: Dict[str, Dict[str, str]]) -> Dict[str, Mount]:
    """A container's ConfigMap volume mounts whose ConfigMap is in the same file, by mount path (a `subPath`
    mounts one key as a file; `items` give keys other paths)."""
    volumes = {text_of(get(v, "name")): get(v, "configMap") for v in _list(get(pod, "volumes"))}
    found: Dict[str, Mount] = {}
    for mount in _list(get(container, "volumeMounts")):
        path, source = text_of(get(mount, "mountPath")), volumes.get(text_of(get(mount, "name")))
        keys = maps.get(text_of(get(source, "name")) or "") if isinstance(source, MappingNode) else None
        if not path or keys is None:
            continue
        listed = {text_of(get(i, "path")): text_of(get(i, "key")) for i in _list(get(source, "items"))}
        files = {rel: keys[key] for rel, key in (listed.items() if listed else ((k, k) for k in keys))
                 if rel and key in keys}
        sub = text_of(get(mount, "subPath"))
        if sub is not None:
            files = {"": files[sub]} if sub in files else {}
        found[path.rstrip("/") or "/"] = Mount(files=files, what="ConfigMap %s" % text_of(get(source, "name")))
    return found


def resolve(server: Server, mounts: Dict[str, Mount], base: Path) -> None:
    """Read the server's --config file where a mount says what it is; otherwise record that vLLM reads a
    file apply does not."""
    flag = config_flag(server)
    if flag is None:
        return
    text, where, why = _mounted_text(flag, mounts, base)
    if text is not None:
        options, why = _options(text, where)
        if options is not None:
            server.config_words = tuple(options)
            return
    server.config_unread = "%s (%s)" % (flag.text or "--config without a file", why)


def _mounted_text(flag: Word, mounts: Dict[str, Mount], base: Path) -> Tuple[Optional[str], str, str]:
    """The file's text, where it comes from, and why it is not known (when it is not)."""
    if flag.unknown:
        return None, "", "its name comes from %s" % flag.unknown
    inside = flag.text.rstrip("/")
    for target in sorted(mounts, key=len, reverse=True):
        if not (inside == target or inside.startswith(target + "/")):
            continue
        mount, rest = mounts[target], inside[len(target):].lstrip("/")
        if not mount.host:
            if rest in mount.files:
                return mount.files[rest], "%s, key of %s" % (mount.what, rest or inside), ""
            return None, "", "mounted from %s, which has no such key" % mount.what
        source = Path(mount.host).expanduser()
        host = (source if source.is_absolute() else base / source) / rest
        if not host.is_file():
            return None, "", "mounted from %s, which is not here" % host
        try:
            with host.open("rb") as handle:  # at most the bound (a huge file is refused, not read whole)
                data = handle.read(MAX_CONFIG_BYTES + 1)
            return data.decode("utf-8"), str(host), ""
        except (OSError, UnicodeDecodeError):  # its text is not shown: it may be any file
            return None, "", "mounted from %s, which is not a text file apply can read" % host
    return None, "", "a file in the container, not mounted from a file beside this one or one of its ConfigMaps"


def _options(text: str, where: str) -> Tuple[Optional[List[Word]], str]:
    """The words vLLM makes of the file's keys (not editable here: they are in another file or scalar)."""
    if len(text) > MAX_CONFIG_BYTES:
        return None, "mounted from %s, larger than a vLLM option file" % where
    try:
        doc = YamlDoc(text, where)
    except BadInput:  # its text is not shown: it may be any file
        return None, "mounted from %s, which is not YAML apply can read" % where
    root = doc.docs[0] if len(doc.docs) == 1 else None
    if not isinstance(root, MappingNode) or not items(root) or not looks_like_config(root, with_model=False):
        return None, "mounted from %s, which is not a vLLM option file" % where
    words = config_server(doc, Layout(doc), root, 1).words
    return [Word.made(w.text, unknown=w.unknown) for w in words], ""


def _list(node: Optional[Node]) -> List[Node]:
    return list(node.value) if isinstance(node, SequenceNode) else []
