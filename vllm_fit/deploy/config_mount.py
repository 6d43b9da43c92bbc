"""The `--config` YAML a server's vLLM reads besides its command line.

vLLM splices that file's options in right after `serve [MODEL]`, so the command line's own options win
over it, and it may set what decides whether a fit holds (the other memory knob, the parallelism).
Where Compose bind-mounts it from a file beside the compose file, its options are read (never edited:
a fit goes on the command line, which wins); anywhere else it is a file apply does not read, and
nothing is written for that server unless --allow-mismatch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..errors import BadInput
from .config_file import config_server, looks_like_config
from .layout import Layout
from .servers import Server
from .words import Word
from .yaml_doc import YamlDoc, get, items, text_of

MAX_CONFIG_BYTES = 1 << 20
"""A --config file larger than this is not read (a vLLM option file is a few hundred bytes)."""


def config_flag(server: Server) -> Optional[Word]:
    """The file vLLM reads its options from: the value of the first `--config` (vLLM reads only that one)."""
    for option in server.args.options:
        if option.name == "--config":
            return option.value_word() or Word.made("")
    return None


def bind_mounts(service: MappingNode) -> Dict[str, str]:
    """A compose service's bind mounts of host paths, container path -> host path as written (short
    `./host:/container[:ro]` and long `{type: bind, source, target}` syntax; named volumes and
    interpolated paths left out)."""
    found: Dict[str, str] = {}
    volumes = get(service, "volumes")
    if not isinstance(volumes, SequenceNode):
        return found
    for item in volumes.value:
        source = target = None
        if isinstance(item, ScalarNode):
            parts = item.value.split(":")
            if len(parts) >= 2:
                source, target = parts[0], parts[1]
        elif isinstance(item, MappingNode) and text_of(get(item, "type")) in (None, "bind"):
            source, target = text_of(get(item, "source")), text_of(get(item, "target"))
        if source and target and "$" not in source and re.match(r"[./~]", source):
            found[target.rstrip("/") or "/"] = source
    return found


def resolve(server: Server, mounts: Dict[str, str], base: Path) -> None:
    """Read the server's --config file where a bind mount says which host file it is; otherwise record
    that vLLM reads a file apply does not."""
    flag = config_flag(server)
    if flag is None:
        return
    host, why = _host_file(flag, mounts, base)
    if host is not None:
        options, why = _options(host)
        if options is not None:
            server.config_words = tuple(options)
            return
    server.config_unread = "%s (%s)" % (flag.text or "--config without a file", why)


def _host_file(flag: Word, mounts: Dict[str, str], base: Path) -> Tuple[Optional[Path], str]:
    if flag.unknown:
        return None, "its name comes from %s" % flag.unknown
    inside = flag.text.rstrip("/")
    for target in sorted(mounts, key=len, reverse=True):
        if inside == target or inside.startswith(target + "/"):
            source = Path(mounts[target]).expanduser()
            host = (source if source.is_absolute() else base / source) / inside[len(target):].lstrip("/")
            return (host, "") if host.is_file() else (None, "mounted from %s, which is not here" % host)
    return None, "a file in the container, not bind-mounted from a file beside this one"


def _options(host: Path) -> Tuple[Optional[List[Word]], str]:
    """The words vLLM makes of the file's keys (not editable here: they are in another file)."""
    try:
        data = host.read_bytes()[:MAX_CONFIG_BYTES + 1]
        if len(data) > MAX_CONFIG_BYTES:
            return None, "mounted from %s, larger than a vLLM option file" % host
        doc = YamlDoc(data.decode("utf-8"), str(host))
    except (OSError, UnicodeDecodeError, BadInput):  # its text is not shown: it may be any file
        return None, "mounted from %s, which is not a YAML file apply can read" % host
    root = doc.docs[0] if len(doc.docs) == 1 else None
    if not looks_like_config(root, with_model=False) or not isinstance(root, MappingNode) or not items(root):
        return None, "mounted from %s, which is not a vLLM option file" % host
    words = config_server(doc, Layout(doc), root, 1).words
    return [Word.made(w.text, unknown=w.unknown) for w in words], ""
