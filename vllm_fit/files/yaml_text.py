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
from .reading import check_nesting, read_input_text

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
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base`: merged keys may be overridden by the mapping's own
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.YAMLError("duplicate key %r (line %d)" % (key, key_node.start_mark.line + 1))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def strict_load(text: str) -> Any:
    """Like yaml.safe_load (the loader is a SafeLoader), with duplicate keys refused, aliases bounded and
    nesting bounded (a RecursionError becomes a YAMLError)."""
    try:
        return yaml.load(text, Loader=StrictLoader)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read") from None


def read_yaml(path: Union[str, Path], what: str) -> Any:
    """The document in `path`, or BadInput naming `what` (e.g. "fleet file") and the problem."""
    text = read_input_text(path, what)
    try:
        value = strict_load(text)
    except yaml.YAMLError as exc:
        raise BadInput("%s %s is not valid YAML: %s" % (what, path, one_line(str(exc), 300))) from None
    _refuse_non_finite(value, "%s %s" % (what, path))
    return check_nesting(value, "%s %s" % (what, path))


def _refuse_non_finite(value: Any, what: str) -> None:
    """YAML's .nan and .inf are no number vLLM or vllm-fit takes."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            raise BadInput("%s holds %r, not a finite number" % (what, item))
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
