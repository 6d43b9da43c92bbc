"""Guard rails of the layout: the pure layers import nothing with side effects, the parent never
imports vllm or torch, every request field is classified for the fingerprint, modules stay small."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from vllm_fit.prepare.request import OPTIONS, SearchRequest, fingerprinted_fields

PACKAGE = Path(__file__).parent.parent / "vllm_fit"
SIDE_EFFECTS = {"subprocess", "psutil", "pynvml", "vllm_fit.trial", "vllm_fit.store", "vllm_fit.gpu",
                "vllm_fit.files", "threading", "httpx"}
PURE = ("strategies", "logs")


def imports_of(path: Path) -> set:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update("%s.%s" % (module, alias.name) for alias in node.names)
    return names


@pytest.mark.parametrize("folder", PURE)
def test_pure_layers_import_nothing_with_side_effects(folder):
    for path in (PACKAGE / folder).glob("*.py"):
        bad = {name for name in imports_of(path) for effect in SIDE_EFFECTS
               if name == effect or name.startswith(effect + ".")}
        assert not bad, "%s imports %s" % (path.name, sorted(bad))


def test_the_parent_never_imports_vllm_or_torch():
    for path in PACKAGE.rglob("*.py"):
        if path.name == "probe.py":
            continue  # the child program
        names = imports_of(path)
        assert not any(n == m or n.startswith(m + ".") for n in names for m in ("vllm", "torch")), path


def test_every_request_field_is_classified_for_the_fingerprint():
    for field in dataclasses.fields(SearchRequest):
        meta = field.metadata
        assert "option" in meta or "fingerprint" in meta, "%s is not classified" % field.name
    assert {"model", "max_len", "target_len", "engine_args"} <= fingerprinted_fields()
    assert not {"python", "trial_timeout", "retries", "work_dir", "env"} & fingerprinted_fields()


def test_every_option_applies_somewhere_and_has_help():
    for name, spec in OPTIONS.items():
        assert spec.applies and spec.help.strip(), name


def test_modules_stay_small_and_the_top_level_stays_short():
    assert len([p for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]) <= 14
    for path in PACKAGE.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 300, path


def test_optional_extras_are_imported_in_one_module_each():
    """ray only by fleet/ray_executor.py, matplotlib only by export/plot.py, both inside functions."""
    import re

    package = Path(__file__).resolve().parents[1] / "vllm_fit"
    owners = {"ray": "fleet/ray_executor.py", "matplotlib": "export/plot.py"}
    for path in package.rglob("*.py"):
        text = path.read_text()
        for extra, owner in owners.items():
            if re.search(r"^\s*(import %s|from %s\b)" % (extra, extra), text, re.M):
                assert str(path.relative_to(package)) == owner, "%s imports %s" % (path, extra)
                assert not re.search(r"^(import %s|from %s\b)" % (extra, extra), text, re.M), \
                    "%s imports %s at module level" % (path, extra)


def test_the_probe_needs_only_the_standard_library_and_vllm_and_parses_under_python_3_8():
    """probe.py runs by path in any vLLM environment, old ones included (Python 3.8)."""
    import sys

    source = (PACKAGE / "probe.py").read_text()
    ast.parse(source, feature_version=(3, 8))
    names = {name.split(".")[0] for name in imports_of(PACKAGE / "probe.py")}
    allowed = set(sys.stdlib_module_names) | {"vllm", "__future__"}
    assert names <= allowed, sorted(names - allowed)


def test_the_probe_statuses_are_named_once():
    """The parent's ProbeStatus takes its values from probe.py's constants; the probe writes nothing else."""
    import re

    from vllm_fit import probe
    from vllm_fit.logs.probe_result import ProbeResult, ProbeStatus

    constants = {value for name, value in vars(probe).items() if name.startswith("STATUS_")}
    assert constants == {status.value for status in ProbeStatus}
    written = set(re.findall(r'"status"\]?\s*[:=,]\s*"([a-z_]+)"', (PACKAGE / "probe.py").read_text()))
    assert not written, "status strings written by hand: %s" % written
    for trial_module in ("serve.py", "http_requests.py"):
        assert not re.search(r'"status": "', (PACKAGE / "trial" / trial_module).read_text()), trial_module
    assert ProbeResult.parse({"status": "ok", "engine": {"num_gpu_blocks": 3}}).engine == {"num_gpu_blocks": 3}
    for junk in (None, [], {"status": "fine"}, {"phase": "start"}, "ok"):
        assert ProbeResult.parse(junk) is None
    odd = ProbeResult.parse({"status": "start_failed", "engine": [1], "exception": "x", "request": 3, "phase": 7})
    assert odd is not None and odd.engine == {} and odd.exception == {} and odd.request is None and odd.phase is None


def _module_imports(path: Path) -> set:
    """vllm_fit modules (or names in them) a file imports when it is loaded: module-level statements, not
    those under TYPE_CHECKING, nor imports inside functions (they run late, on purpose)."""
    tree = ast.parse(path.read_text())
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]
    names = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            module = ".".join(list(package[: len(package) - node.level + 1]) + ([node.module] if node.module else []))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm_fit"):
            module = str(node.module)
        else:
            continue
        names.add(module)
        names.update("%s.%s" % (module, alias.name) for alias in node.names)
    return names


def _modules() -> dict:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_no_import_cycles():
    """The package's modules import one another as layers: no module needs itself to load (a package's
    __init__ importing its own modules is how packages load, not a cycle)."""
    modules = _modules()
    graph = {name: {m for m in _module_imports(path) if m in modules and m != name and not name.startswith(m + ".")}
             for name, path in modules.items()}
    state: dict = {}

    def visit(name, trail):
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", "import cycle: %s" % " -> ".join([*trail, name])
        state[name] = "open"
        for other in sorted(graph[name]):
            visit(other, [*trail, name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])


def test_the_pipeline_reads_top_to_bottom():
    """fitter.py puts the steps of a search in order and does nothing else: short, with few dependencies."""
    path = PACKAGE / "fitter.py"
    modules = _modules()
    assert len(path.read_text().splitlines()) <= 150
    assert len({name for name in _module_imports(path) if name in modules}) <= 10
