"""Reading the YAML users hand in (fleet files, configs to verify): safe, strict and bounded.

SafeLoader's rules (no tags that build objects) plus: duplicate keys are refused (YAML would keep
the last one silently), aliases are bounded (a small file must not expand to gigabytes), and every
failure is one BadInput line naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import yaml

from ..errors import BadInput, one_line

MAX_ALIASES = 100
"""YAML aliases allowed in one file (a bound against alias bombs)."""


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate keys and bounds aliases."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise yaml.YAMLError("more than %d aliases (refused as a possible alias bomb)" % MAX_ALIASES)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.YAMLError("duplicate key %r (line %d)" % (key, key_node.start_mark.line + 1))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def strict_load(text: str) -> Any:
    """Like yaml.safe_load (the loader is a SafeLoader), with duplicate keys refused and aliases bounded."""
    return yaml.load(text, Loader=StrictLoader)


def read_yaml(path: Union[str, Path], what: str) -> Any:
    """The document in `path`, or BadInput naming `what` (e.g. "fleet file") and the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput("%s %s is not UTF-8 text; save it as UTF-8" % (what, path)) from None
    except IsADirectoryError:
        raise BadInput("%s %s is a folder; name a YAML file" % (what, path)) from None
    except OSError as exc:
        raise BadInput("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None
    try:
        return strict_load(text)
    except yaml.YAMLError as exc:
        raise BadInput("%s %s is not valid YAML: %s" % (what, path, one_line(str(exc), 300))) from None
