"""SkyPilot task YAML and dstack run configurations: a shell script in YAML that starts vLLM.

SkyPilot (`sky launch task.yaml`, `sky serve up`): `run: |` is a bash script; `envs:` are its variables
(a null one is given with `--env` at launch, `secrets:` always are: unknown here), and SkyPilot's own
(`$SKYPILOT_NUM_GPUS_PER_NODE`) are unknown too; `resources.accelerators` names the GPUs and
`resources.image_id: docker:IMAGE` the image. dstack (`type: task | service | dev-environment`): the
`commands:` items run one after another in one shell; `env:` entries are `NAME=value` (a bare `NAME` comes
from where the run is submitted: unknown), `resources.gpu` names the GPUs, `name` names the run. `--env`
at launch can override a file's value; what the file says is what is read and written here.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .layout import Layout
from .script_file import line_of, script_runs, server_of_run
from .servers import Server, ServerKind
from .words import Word
from .yaml_doc import YamlDoc, get, is_null, items, text_of

SKYPILOT_KEYS = ("resources", "envs", "setup", "num_nodes", "file_mounts", "service", "secrets", "workdir")
DSTACK_TYPES = ("task", "service", "dev-environment")
_NOT_A_GPU_NAME = re.compile(r"^[0-9.]+([GMT]B)?(\.\.[0-9.]*([GMT]B)?)?\+?$|^\.\.", re.I)


def is_skypilot(root: MappingNode) -> bool:
    return isinstance(get(root, "run"), ScalarNode) and get(root, "kind") is None and \
        any(get(root, key) is not None for key in SKYPILOT_KEYS)


def is_dstack(root: MappingNode) -> bool:
    return text_of(get(root, "type")) in DSTACK_TYPES and isinstance(get(root, "commands"), SequenceNode)


def task_servers(doc: YamlDoc, layout: Layout, root: MappingNode, number: int) -> List[Server]:
    """The vLLM servers a SkyPilot task's run script or a dstack configuration's commands start."""
    path = "doc %d" % number
    resources, run, commands = get(root, "resources"), get(root, "run"), get(root, "commands")
    if isinstance(run, ScalarNode) and is_skypilot(root):
        kind, env, script = ServerKind.SKYPILOT, _skypilot_env(root, layout, path), layout.word(run, path + ", run")
        image = (text_of(get(resources, "image_id")) or "").split("docker:", 1)[-1] or None
        gpus = _gpu_names(get(resources, "accelerators"))
        names: List[str] = []
    elif isinstance(commands, SequenceNode):
        kind, env, script = ServerKind.DSTACK, _dstack_env(root, layout, path), \
            _joined(layout, commands, path + ", commands")
        image = text_of(get(root, "image"))
        gpus = _gpu_names(get(resources, "gpu"))
        names = [n for n in [text_of(get(root, "name"))] if n]
    else:
        return []
    runs, problem = script_runs(script, env)
    if problem:
        return [Server(doc.file, path, kind, problem=problem, names=tuple(names))] if "vllm" in script.text else []
    servers = []
    for invocation, command in runs:
        label = "line %d" % line_of(doc.text, command)
        server = Server(doc.file, path, kind, names=tuple(names), image=image, gpu_labels=tuple(gpus), label=label)
        servers.append(server_of_run(server, invocation, command))
    return servers


def _skypilot_env(root: MappingNode, layout: Layout, path: str) -> Dict[str, Word]:
    found: Dict[str, Word] = {}
    for name, value in items(get(root, "envs")):
        if isinstance(value, ScalarNode) and not is_null(value):
            found[name] = layout.word(value, "%s, envs.%s" % (path, name))
        else:
            found[name] = Word.made("$" + name, unknown="$%s (given with --env when the task is launched)" % name)
    for name, _ in items(get(root, "secrets")):
        found[name] = Word.made("$" + name, unknown="$%s (a secret given when the task is launched)" % name)
    return found


def _dstack_env(root: MappingNode, layout: Layout, path: str) -> Dict[str, Word]:
    found: Dict[str, Word] = {}
    env = get(root, "env")
    if isinstance(env, SequenceNode):
        for index, item in enumerate(env.value):
            if not isinstance(item, ScalarNode):
                continue
            word = layout.word(item, "%s, env[%d]" % (path, index))
            name, equals, _ = word.text.partition("=")
            found[name] = word.sliced(len(name) + 1, len(word.text)) if equals else \
                Word.made("$" + name, unknown="$%s (set where the run is submitted)" % name)
    for name, value in items(env):
        found[name] = layout.word(value, "%s, env.%s" % (path, name)) if isinstance(value, ScalarNode) and \
            not is_null(value) else Word.made("$" + name, unknown="$%s (set where the run is submitted)" % name)
    return found


def _joined(layout: Layout, commands: SequenceNode, path: str) -> Word:
    """The commands as one script, one per line (a line break between items is not in the file)."""
    text: List[str] = []
    offsets: List[int] = []
    for index, item in enumerate(commands.value):
        word = layout.word(item, "%s[%d]" % (path, index)) if isinstance(item, ScalarNode) else Word.made("")
        text += [word.text, "\n"]
        offsets += [*word.offsets, -1]
    return Word("".join(text), tuple(offsets), path=path)


def _gpu_names(node: Optional[Node]) -> List[str]:
    """GPU names in `accelerators: A100:8`, `{L4:1, A10G:1}`, `[H100, H200]`, `gpu: 24GB..` or `gpu: {name: [..]}`
    (counts and memory sizes left out)."""
    texts: List[str] = []
    if isinstance(node, ScalarNode):
        texts = [node.value]
    elif isinstance(node, SequenceNode):
        texts = [n.value for n in node.value if isinstance(n, ScalarNode)]
    elif isinstance(node, MappingNode):
        listed = get(node, "name")
        texts = _gpu_names(listed) if listed is not None else [k for k, _ in items(node)]
    parts = [p.strip() for text in texts for p in str(text).replace(",", ":").split(":")]
    return [p for p in parts if p and not _NOT_A_GPU_NAME.match(p)]
