"""Any Kubernetes vLLM container: after `apply`, what the kubelet, /bin/sh and vLLM's own parser give the server
is the fit, or apply refused and wrote nothing (an edited server that vLLM's parser refuses only where it refused
the container as written). Containers are drawn from real shapes (vllm serve, the api_server module, `sh -c`
strings, the image's entrypoint; literal, undefined and ConfigMap-fed `$(VAR)`s; repeated flags and models, `-O3`,
`-tp=1`, dotted options, flags newer than the option table, options and values in one word) by hypothesis; the
check rests on tests/deploy_oracle.py, not on the reader under test. A local fuzz of this kind found `-O3` taking
the next flag as its value (an earlier --max-model-len edited, a later one winning)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from deploy_oracle import container_argv, container_at, run_recorded, vllm_args, vllm_parse, vllm_serve_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_fit import api
from vllm_fit.errors import FitError

pytestmark = pytest.mark.vllm

FIT = "# vllm: 0.32.0\nmodel: org/m\nmax-model-len: 12345\ngpu-memory-utilization: 0.87\n"
UNITS = [["--max-model-len", "8192"], ["--max-model-len=4096"], ["--max_model_len", "2048"], ["--max-model-len", "-1"],
         ["--max-model-len", "1k"], ["--max-model-len", "$(LEN)"], ["--max-model-len=$(LEN)"],
         ["--gpu-memory-utilization", "0.9"], ["--gpu-memory-utilization=0.5"], ["--gpu-memory-utilization", "$(UTIL)"],
         ["--port", "8000"], ["-tp", "1"], ["-tp=1"], ["--tensor-parallel-size=1"], ["--enforce-eager"], ["-O3"],
         ["-O", "3"], ["-Odecode"], ["-cc.mode=3"], ["--compilation-config.mode", "3"], ["--enable-prefix-caching"],
         ["--no-enable-prefix-caching"], ["--served-model-name", "a", "b"], ["--dtype", "auto"], ["--host=0.0.0.0"],
         ["--api-key", "$(KEY)"], ["--model", "$(MODEL)"], ["$(ARGS)"], ["--enable-newer-flag"],
         ["--max-num-seqs", "4"], ["--model", "org/other"], ["--model=org/m"], ["--max-model-len 3000"],
         ["--max-model-len=3000 --enforce-eager"], ["--max-model-len", "3000 --enforce-eager"]]
SHELL = ["&&", ";", "echo hi", "${LEN}", "\"$LEN\"", "${LEN:-100}", "'--max-model-len 1'", "2>&1", "LEN=300", "exec"]
ENTRYPOINT = {"vllm/vllm-openai:v0.32.0": ["vllm", "serve"], "me/img:1": ["vllm", "serve"]}
"""What each image runs before the args; an image of another name whose args hold vLLM's own options is taken
to be a vLLM build (README: apply), so the check runs it as one."""


@st.composite
def containers(draw: Any) -> Dict[str, Any]:
    """One container that may run vLLM's server, in one of the shapes real manifests use."""
    image = draw(st.sampled_from(sorted(ENTRYPOINT)))
    args = [word for unit in draw(st.lists(st.sampled_from(UNITS), max_size=6)) for word in unit]
    container: Dict[str, Any] = {"name": "vllm", "image": image}
    form = draw(st.sampled_from(["serve", "module", "sh", "entrypoint"]))
    model = draw(st.sampled_from([["org/m"], ["--model", "org/m"]]))
    if model[0] == "--model" and draw(st.booleans()):  # an option may come before the model's
        args, model = [*args, *model], []
    if form == "serve":
        container.update(command=["vllm", "serve"], args=[*model, *args])
    elif form == "module":
        container.update(command=["python3", "-m", "vllm.entrypoints.openai.api_server"],
                         args=["--model", "org/m", *args])
    elif form == "sh":
        extra = draw(st.lists(st.one_of(st.sampled_from(UNITS), st.sampled_from(SHELL).map(lambda w: [w])), max_size=6))
        line = " ".join(["vllm serve org/m", *args, *(word for unit in extra for word in unit)])
        container.update(command=["/bin/sh", "-c"], args=[line])
    else:
        container["args"] = [*model, *args]
    env: List[Dict[str, Any]] = []
    for name in draw(st.lists(st.sampled_from(["LEN", "UTIL", "MODEL", "KEY", "ARGS"]), unique=True, max_size=4)):
        kind = draw(st.sampled_from(["value", "configmap"]))
        if kind == "configmap":
            env.append({"name": name, "valueFrom": {"configMapKeyRef": {"name": "c", "key": name.lower()}}})
        else:
            values = {"LEN": ["16384", "1k", "$(UTIL)"], "UTIL": ["0.8"], "MODEL": ["org/m", "org/other"],
                      "KEY": ["sk-1"], "ARGS": ["--max-model-len 3000", ""]}[name]
            env.append({"name": name, "value": draw(st.sampled_from(values))})
    if env:
        container["env"] = env
    return container


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(container=containers(), flow=st.sampled_from([None, False]))
def test_the_server_gets_the_fit_or_apply_refuses(tmp_path, container, flow):
    pytest.importorskip("vllm")
    folder = Path(tmp_path) / ("c%d" % len(os.listdir(tmp_path)))
    folder.mkdir()
    (folder / "fit.yaml").write_text(FIT)
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "v"},
                "spec": {"template": {"spec": {"containers": [container]}}}}
    text = yaml.safe_dump(manifest, default_flow_style=flow, sort_keys=False, width=10000)
    target = folder / "d.yaml"
    target.write_text(text)
    try:
        api.apply(str(folder / "fit.yaml"), [str(target)])
    except FitError as refused:
        assert "\n" not in str(refused).strip() and target.read_text() == text
        return
    after = container_at(target.read_text(), 0, ["spec", "template", "spec", "containers", 0])
    runs = [r for r in run_recorded(container_argv(after, ENTRYPOINT[after["image"]]), folder) if vllm_args(r)]
    if len(runs) != 1:
        return  # the shell never reached one server (a `;` or `&&` chain the stubs cut short)
    serve = Path(runs[0][0]).name == "vllm"
    try:
        parsed = vllm_parse(vllm_args(runs[0]))
        model = vllm_serve_model(vllm_args(runs[0])) if serve else parsed.model
    except (SystemExit, Exception):  # vLLM refuses the edited words: only where it refused the file's own too
        assert not _vllm_reads(container, folder), (text, runs[0])
        return
    assert (model, parsed.max_model_len, parsed.gpu_memory_utilization) == ("org/m", 12345, 0.87), (text, runs[0])


def _vllm_reads(container: Dict[str, Any], folder: Path) -> bool:
    """Whether vLLM's parser takes the words the container as written gives one server."""
    runs = [r for r in run_recorded(container_argv(container, ENTRYPOINT[container["image"]]), folder) if vllm_args(r)]
    try:
        parsed = vllm_parse(vllm_args(runs[0]))
        if Path(runs[0][0]).name == "vllm":
            vllm_serve_model(vllm_args(runs[0]))
    except (SystemExit, Exception):
        return False
    return len(runs) == 1 and parsed is not None
