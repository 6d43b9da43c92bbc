"""Where finished work is kept: cached fits by fingerprint, and a journal of trials per search.

Plain files under one documented directory (default ~/.cache/vllm-fit, or $VLLM_FIT_CACHE_DIR, or
--cache-dir): fits/<fingerprint>.json holds a finished search's report; journals/<fingerprint>.jsonl
gets one line per finished trial the moment it ends (flushed and synced), so a search killed by
anything, even SIGKILL or a reboot, resumes without launching a proven trial again. Both carry a
schema version: what another version of vllm-fit wrote is ignored with a note, never replayed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from .errors import BadInput, EnvironmentProblem, FitError, one_line
from .files.atomic import write_text_atomic
from .files.reading import open_regular, parse_json, read_input_bytes
from .outcome import Outcome
from .report.search_report import SearchReport
from .trial.record import TrialRecord

SCHEMA = 2
"""Bumped whenever a record, a report or the meaning of an outcome changes."""
Note = Callable[[str], None]


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """$VLLM_FIT_CACHE_DIR, else $XDG_CACHE_HOME/vllm-fit, else ~/.cache/vllm-fit. A relative path from the
    environment is refused (it would put a cache wherever the tool happens to run; XDG requires absolute)."""
    for name in ("VLLM_FIT_CACHE_DIR", "XDG_CACHE_HOME"):
        value = env.get(name)
        if value and not os.path.isabs(os.path.expanduser(value)):
            raise BadInput("%s=%s is a relative path; set it to an absolute one, or pass --cache-dir DIR"
                           % (name, one_line(value, 200)))
        if value:
            return Path(os.path.expanduser(value)) / ("" if name == "VLLM_FIT_CACHE_DIR" else "vllm-fit")
    return Path(os.path.expanduser("~")) / ".cache" / "vllm-fit"


def check_cache_dir(root: Path, chosen: bool = False) -> Path:
    """The cache directory, created; exit 2 when the user's --cache-dir cannot be one, 3 for the default."""
    try:
        for sub in ("fits", "journals"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        probe = root / "journals" / (".write-test-%d" % os.getpid())
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        problem = BadInput if chosen else EnvironmentProblem
        raise problem("the cache directory %s is not usable (%s); pass --cache-dir DIR or"
                      " --no-cache" % (root, exc.strerror or exc)) from None
    return root


class Journal:
    """Append-only JSON lines: a header with the schema and fingerprint, then one finished trial per line."""

    def __init__(self, path: Path, fingerprint: str):
        self.path, self.fingerprint = path, fingerprint

    def load(self, trial_timeout_s: Optional[float] = None, note: Note = lambda message: None) -> List[TrialRecord]:
        """The finished trials worth replaying.

        Skipped, with a note: a torn or corrupt line (that trial simply runs again), a journal of
        another schema or search, and timeouts under a shorter trial timeout than this run's (a
        longer wait may succeed).
        """
        if not os.path.lexists(self.path):
            return []
        lines = read_input_bytes(self.path, "journal", follow=False, error=EnvironmentProblem).decode(
            "utf-8", errors="replace").splitlines()
        if not lines:
            return []
        header = _json_object(lines[0])
        if header is None or header.get("schema") != SCHEMA or header.get("fingerprint") != self.fingerprint:
            note("journal %s was written by another version or search: ignored" % self.path)
            return []
        records, skipped = [], 0
        for line in lines[1:]:
            data = _json_object(line)
            try:
                record = TrialRecord.from_json(data) if data is not None else None
            except ValueError:
                record = None
            if record is None:
                skipped += 1
                continue
            if (record.outcome is Outcome.TIMEOUT and trial_timeout_s is not None
                    and (record.timeout_s or 0) < trial_timeout_s):
                skipped += 1
                continue
            records.append(record)
        if skipped:
            note("journal %s: %d line(s) not replayed (torn, corrupt, or a timeout under a shorter"
                 " --trial-timeout)" % (self.path, skipped))
        return [_renumbered(record, number) for number, record in enumerate(records, start=1)]

    def append(self, record: TrialRecord) -> None:
        """Add one finished trial, durably, before anything else happens."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, "journal", follow=False,
                          error=EnvironmentProblem)
        new = os.fstat(fd).st_size == 0
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            if new:
                handle.write(json.dumps({"schema": SCHEMA, "fingerprint": self.fingerprint}) + "\n")
            handle.write(json.dumps(record.to_json(), default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def recorder(self, note: Note) -> Callable[[TrialRecord], None]:
        """`append` for a study: a journal that cannot be written (a full disk) is a warning once, and the
        search goes on without resume."""
        failed: List[BaseException] = []

        def append(record: TrialRecord) -> None:
            if failed:
                return
            try:
                self.append(record)
            except (OSError, FitError) as exc:
                failed.append(exc)
                note("warning: the journal %s cannot be written (%s); this search goes on, but cannot be resumed"
                     % (self.path, one_line(str(exc), 200)))

        return append

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _renumbered(record: TrialRecord, index: int) -> TrialRecord:
    """Journal records keep their order; their index is their place among the replayed ones."""
    import dataclasses

    return record if record.index == index else dataclasses.replace(record, index=index)


def _json_object(line: str) -> Optional[Dict[str, Any]]:
    """A JSON object, strictly read; None for anything else (a torn line, NaN, deep nesting)."""
    try:
        data = parse_json(line, "cache entry")
    except BadInput:
        return None
    return data if isinstance(data, dict) else None


class FitStore:
    """The cache directory: finished reports by fingerprint, and journals of searches in progress."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _fit_path(self, fingerprint: str) -> Path:
        return self.root / "fits" / (fingerprint + ".json")

    def cached(self, fingerprint: str, note: Note = lambda message: None) -> Optional[SearchReport]:
        """The report of a finished search with this fingerprint, or None (unreadable ones with a note)."""
        path = self._fit_path(fingerprint)
        if not os.path.lexists(path):
            return None
        data = _json_object(read_input_bytes(path, "cached fit", follow=False, error=EnvironmentProblem).decode(
            "utf-8", errors="replace"))
        if data is not None and data.pop("schema", None) == SCHEMA:
            try:
                report = SearchReport.from_json(data)
            except ValueError:
                report = None
            if report is not None and report.fit is not None:
                return report
        note("cached fit %s ignored (not a report of this version): searching again" % path)
        return None

    def store(self, fingerprint: str, report: SearchReport) -> Path:
        data = dict(report.to_json(), schema=SCHEMA)
        return write_text_atomic(self._fit_path(fingerprint), json.dumps(data, indent=1, default=str) + "\n")

    def keep(self, fingerprint: str, report: SearchReport, note: Note) -> bool:
        """Store the fit; a cache that cannot be written (a full disk) costs the cache, not the fit: a
        warning, and the caller still writes --out and --report."""
        try:
            self.store(fingerprint, report)
        except (OSError, FitError) as exc:
            note("warning: the fit was not cached (%s); --out and --report are still written"
                 % one_line(str(exc), 300))
            return False
        return True

    def journal(self, fingerprint: str) -> Journal:
        return Journal(self.root / "journals" / (fingerprint + ".jsonl"), fingerprint)

    @contextlib.contextmanager
    def lock(self, fingerprint: str, note: Note = lambda message: None) -> Iterator[None]:
        """Hold the fingerprint while searching (two runs of one search would share a journal).

        The lock file is removed on release. A run that opened it just before the removal finds,
        once it holds its lock, that the path no longer names the file it locked, and opens again.
        """
        path = self.root / "journals" / (fingerprint + ".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = os.fdopen(open_regular(path, os.O_RDWR | os.O_CREAT, "lock file", follow=False,
                                            error=EnvironmentProblem), "a+")  # closed below, after the unlink
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise EnvironmentProblem("another vllm-fit is running this same search (lock %s); wait for it"
                                         " or pass --no-cache" % path) from None
            if _same_file(handle, path):
                break
            handle.close()  # locked a file another run has just removed: take the one at the path now
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            handle.close()  # closing releases the lock


def _same_file(handle: Any, path: Path) -> bool:
    """True when `path` still names the file open as `handle`."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
