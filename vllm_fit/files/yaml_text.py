"""Reading the YAML users hand in (fleet files, configs to verify, baselines): safe, strict and bounded.

SafeLoader's rules (no tags that build objects) plus: duplicate keys are refused (YAML would keep
the last one silently), aliases are bounded twice (at most 100, and the document they make at most
200,000 nodes once every alias is expanded: nine levels of nine aliases is refused, not walked), a
document that contains itself is refused, nesting is bounded, and every check walks the node graph
once (shared nodes visited once). Every failure is one BadInput line naming the file. The deployment
reader (deploy/yaml_doc.py) checks its ruamel.yaml node graph with the same `check_graph`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Set, Tuple, Union

import yaml

from ..errors import BadInput, one_line
from .reading import MAX_NESTING, read_input_text

MAX_ALIASES = 100
"""YAML aliases allowed in one file (a bound against alias bombs)."""
MAX_EXPANDED_NODES = 200_000
"""Nodes a document may hold with every alias expanded (a large values file has a few thousand)."""


def check_graph(root: Any, children: Callable[[Any], Iterable[Any]], what: str,
                on_node: Callable[[Any], None] = lambda node: None) -> None:
    """Refuse a YAML node graph that contains itself, nests deeper than MAX_NESTING, or expands (every
    alias a copy) past MAX_EXPANDED_NODES; `on_node` sees every distinct node once. Iterative."""
    sizes: Dict[int, int] = {}
    on_path: Set[int] = set()
    stack: List[Tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children(node))
            if sizes[key] > MAX_EXPANDED_NODES:
                raise BadInput("%s expands to more than %d YAML nodes through its aliases (an alias bomb?);"
                               " vllm-fit refuses it" % (what, MAX_EXPANDED_NODES))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise BadInput("%s holds a YAML alias that contains itself (line %d); vllm-fit refuses it"
                           % (what, node.start_mark.line + 1))
        if depth > MAX_NESTING:
            raise BadInput("%s is nested more than %d levels deep; no vllm-fit input is" % (what, MAX_NESTING))
        on_node(node)
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children(node) if id(child) not in sizes)


def node_children(node: Any) -> List[Any]:
    """The child nodes of a PyYAML or ruamel.yaml node (keys and values of a mapping, items of a list)."""
    value = getattr(node, "value", None)
    if not isinstance(value, list):
        return []
    return [child for item in value for child in (item if isinstance(item, tuple) else (item,))]


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


def strict_load(text: str, what: str = "YAML") -> Any:
    """Like yaml.safe_load (the loader is a SafeLoader), with duplicate keys refused, aliases bounded, the
    node graph checked (check_graph) before anything is built from it, and nesting bounded."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_graph(node, node_children, what)
        return loader.construct_document(node)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read") from None
    finally:
        loader.dispose()


def read_yaml(path: Union[str, Path], what: str) -> Any:
    """The document in `path`, or BadInput naming `what` (e.g. "fleet file") and the problem."""
    text = read_input_text(path, what)
    try:
        value = strict_load(text, "%s %s" % (what, path))
    except yaml.YAMLError as exc:
        raise BadInput("%s %s is not valid YAML: %s" % (what, path, one_line(str(exc), 300))) from None
    _refuse_non_finite(value, "%s %s" % (what, path))
    return value


def _refuse_non_finite(value: Any, what: str) -> None:
    """YAML's .nan and .inf are no number vLLM or vllm-fit takes (each shared value looked at once)."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            raise BadInput("%s holds %r, not a finite number" % (what, item))
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
