"""`vllm-fit apply`: write fits into the deployment files that run them, proven before anything is written.

Every file is locked and read, its servers found (servers.py and the runtime readers), each matched to
its fit (matching.py), the edits planned (edits.py) and the edited text read back and proven
(prove.py): the value each matched server's vLLM will get is the fit's, nothing else changed. Only
then are the files written, all or nothing, keeping each file's permission bits, byte-order mark and
line ends. A value is never lowered without saying why where the file declares another vLLM version or
GPU than the fit was found on, or runs with settings that leave more room than the search's; a fit found with
settings that leave more room than the server's is refused (setup_match.py).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..errors import BadInput, EnvironmentProblem, one_line
from ..files.atomic import Pending, WriteFailed, prepare
from ..files.locks import Locked, locked_files
from .deployment import Deployment, read_deployment
from .dockerfile import is_dockerfile
from .edits import Change, Planner, read_number
from .fits import Fit, Source
from .matching import match
from .prove import prove
from .releases import fit_version, image_version, missing_option, model_refusal
from .script_file import is_script
from .servers import Server
from .setup_match import differences
from .vllm_args import Program


class Mismatch(BadInput):
    """A value would be lowered on a deployment that declares another vLLM version or GPU."""


@dataclass
class FileResult:
    """One file: its text before and after, the changes, and what was left alone and why."""

    path: Path
    before: str
    after: str
    changes: List[Change]
    matched: int
    """Servers in the file that a fit belongs to."""
    notes: List[str] = field(default_factory=list)
    mode: int = 0o644

    @property
    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.before.splitlines(True), self.after.splitlines(True),
                                            "a/%s" % self.path, "b/%s" % self.path))


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower().replace("nvidia", ""))


def mismatch(server: Server, fit: Fit) -> Optional[str]:
    """Why this fit may not hold for this server: another vLLM version in its (vLLM) image's tag, another GPU in
    its node selector or labels (None when the file declares nothing else)."""
    tag, found = image_version(server), fit_version(fit)
    if tag and found and tag != found:
        return "the image %s runs vLLM %s, the fit was found on %s" % (server.image, tag, found)
    if server.gpu_labels and fit.gpu:
        mine = _squash(fit.gpu)
        labels = [_squash(label) for label in server.gpu_labels]
        if not any(label and (label in mine or mine in label) for label in labels):
            return "the deployment asks for %s, the fit was found on %s" % (", ".join(server.gpu_labels), fit.gpu)
    return None


def other_setup(server: Server, fit: Fit) -> Tuple[List[str], List[str]]:
    """The settings that change what the GPU holds which the server runs with other values of than the fit
    was found with: those where the fit may not hold, and those where it holds but the server could take more
    (only a fit that records its search's settings is compared)."""
    if fit.setup is None:
        return [], []
    found = differences(server, dict(fit.setup), skip=("max_num_seqs",) if fit.max_num_seqs is not None else ())
    return [d.text for d in found if not d.holds_more], [d.text for d in found if d.holds_more]


def _lowered(change: Change) -> bool:
    old, new = read_number(change.option, change.old), read_number(change.option, change.new)
    return old is not None and new is not None and new < old


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("deployment file %s is not UTF-8 text; save it as UTF-8" % path) from None


def plan_file(deployment: Deployment, pairs: Sequence[Tuple[Server, Fit]], allow_mismatch: bool) -> FileResult:
    """The file with every matched server given its fit, proven (not written here)."""
    planner = Planner(deployment.text, str(deployment.path))
    cautions: List[str] = []
    for server, fit in pairs:
        before = len(planner.changes)
        refused = model_refusal(server, fit) or missing_option(server, fit)
        if refused:
            raise BadInput("%s, %s: %s" % (deployment.path, server.where, refused))
        planner.plan(server, fit)
        lowered = [c for c in planner.changes[before:] if _lowered(c)]
        if server.config_unread and planner.changes[before:] and not allow_mismatch:
            raise Mismatch("%s, %s: its vLLM also reads options from %s with --config, which apply does not read"
                           " (a memory knob or parallelism there may keep the fit from holding); apply the fit to"
                           " that file (this command line's options win over it), or pass --allow-mismatch"
                           % (deployment.path, server.where, server.config_unread))
        if server.open_options and planner.changes[before:] and not allow_mismatch:
            raise Mismatch("%s, %s: its command line has %s, which this file does not hold and which may itself set"
                           " vLLM options that win over the fit's (the length, a memory knob); write those options"
                           " in the file, or pass --allow-mismatch" % (deployment.path, server.where,
                                                                       server.open_options))
        unsafe, roomier = other_setup(server, fit)
        if unsafe and planner.changes[before:] and not allow_mismatch:
            raise Mismatch("%s, %s: the fit may not hold for this server, found with other settings than it runs with:"
                           " %s; search with them (--tensor-parallel-size, --engine-arg KEY=VALUE), or pass"
                           " --allow-mismatch" % (deployment.path, server.where, "; ".join(unsafe)))
        why = "; ".join(filter(None, [mismatch(server, fit), "the server runs with settings that hold more than the"
                                      " fit's: %s" % "; ".join(roomier) if roomier else None]))
        if why and lowered and not allow_mismatch:
            raise Mismatch("%s, %s: would lower %s, but %s; refit there, or pass --allow-mismatch" % (
                deployment.path, server.where, ", ".join("%s %s -> %s" % (c.option, c.old, c.new) for c in lowered),
                why))
        if why and planner.changes[before:]:
            cautions.append("%s, %s: written, but %s: it may not hold there; search there to be sure"
                            % (deployment.path, server.where, why))
    after = planner.apply() if planner.edits else deployment.text
    if after != deployment.text:
        prove(deployment, after, pairs)
    matched = {id(s) for s, _ in pairs}
    notes = ["%s, %s: left alone: %s" % (deployment.path, s.where, s.problem)
             for s in deployment.servers if id(s) not in matched and s.problem and not s.template]
    notes += ["%s, %s: not deployed until it is enabled (enabled: false)" % (deployment.path, s.where)
              for s in deployment.servers if id(s) in matched and s.disabled]
    return FileResult(deployment.path, deployment.text, after, planner.changes, len(pairs), notes + cautions)


def _model_shown(server: Server) -> str:
    """Its model as the no-match message shows it, saying why a positional word is not it."""
    if server.model or server.model_from:
        return server.model or "from %s" % server.model_from
    positional = next((w.text for w in server.args.positionals if w.text), None)
    if server.program is Program.API_SERVER and positional:
        return ("None (%s, which vLLM images run up to 0.11.0, does not take the positional %s as its model; give it"
                " with --model)" % (Program.API_SERVER.value, positional))
    return "None"


def _nothing_matched(deployments: Sequence[Deployment], source: Source) -> BadInput:
    """Why no server took a fit, naming what was found (or where the model appears outside a command)."""
    fits = ", ".join("%s%s" % (f.model, " (%s)" % f.name if f.name else "") for f in source.fits)
    found = [s for d in deployments for s in d.servers if not s.template]
    if found:
        seen = "; ".join("%s: %s" % (s.where, s.problem or "model %s, names %s%s"
                                     % (_model_shown(s), ", ".join(s.names) or "none",
                                        ", options from %s with --config" % s.config_unread if s.config_unread
                                        else "")) for s in found[:4])
        return BadInput("no vLLM server in %s matches the fit for %s (servers found: %s)"
                        % (", ".join(str(d.path) for d in deployments), fits, one_line(seen, 300)))
    templates = [s for d in deployments for s in d.servers if s.template]
    if templates:
        return BadInput("%s holds only the KServe runtime %s, a template; apply the fit to the InferenceService"
                        " that uses it" % (templates[0].file, templates[0].where))
    for deployment in deployments:
        for fit in source.fits:
            named = re.search(r"(?:^|(?<=[\s\"'=:\[,])|(?<=://))%s(?![\w./-])" % re.escape(fit.model),
                              deployment.text, re.M)
            if named:
                line = deployment.text.count("\n", 0, named.start()) + 1
                runs_a_command = is_script(deployment.text, deployment.path) or is_dockerfile(deployment.path)
                guess = ("a bash array, a function, a program that runs vLLM itself" if runs_a_command else
                         "a Ray Serve config, an environment variable another program reads")
                return BadInput("%s, line %d names %s, but not in a vLLM command line vllm-fit reads (%s?); edit it"
                                " by hand" % (deployment.path, line, fit.model, guess))
    return BadInput("no vLLM server in %s (Kubernetes containers, compose services, production-stack values,"
                    " KServe InferenceServices, KubeAI Models, --config YAML, shell scripts, Dockerfiles, SkyPilot"
                    " tasks, dstack configurations)"
                    % ", ".join(str(d.path) for d in deployments))


def apply_files(source: Source, paths: List[Path], check: bool, allow_mismatch: bool) -> List[FileResult]:
    """Plan and prove every file under its lock; unless `check`, write them all or none."""
    with locked_files(paths, exclusive=not check, what="deployment file") as contents:
        deployments = [read_deployment(_decode(contents[p].data, p), str(p), p) for p in paths]
        servers = [s for d in deployments for s in d.servers]
        pairs = match(servers, source)
        if not pairs:
            raise _nothing_matched(deployments, source)
        results = []
        for deployment in deployments:
            mine = [(s, f) for s, f in pairs if s.file == str(deployment.path)]
            result = plan_file(deployment, mine, allow_mismatch)
            result.mode = contents[deployment.path].mode
            results.append(result)
        if not check:
            write_all(results, contents)
    return results


def write_all(results: Sequence[FileResult], contents: dict) -> None:
    """Every changed file written, or none: all new files prepared first, then renamed into place."""
    pending: List[Pending] = []
    changed = [r for r in results if r.after != r.before]
    try:
        for result in changed:
            locked: Locked = contents[result.path]
            pending.append(prepare(result.path, result.after.encode("utf-8"), locked.mode & 0o1777))
    except WriteFailed as exc:
        for item in pending:
            item.discard()
        raise EnvironmentProblem("cannot write %s (%s); no file was changed" % (exc.path, exc.reason)) from None
    done: List[FileResult] = []
    try:
        for item, result in zip(pending, changed):
            item.commit()
            done.append(result)
    except WriteFailed as exc:
        for item in pending[len(done) + 1:]:
            item.discard()
        for result in done:  # put back what was already renamed into place
            prepare(result.path, result.before.encode("utf-8"), contents[result.path].mode & 0o1777).commit()
        raise EnvironmentProblem("cannot replace %s (%s); the files written before it were restored"
                                 % (exc.path, exc.reason)) from None
