"""Where finished work is kept: cached fits by fingerprint, and a journal of trials per search.

Plain files under one documented directory (default ~/.cache/vllm-fit, or $VLLM_FIT_CACHE_DIR, or
--cache-dir): fits/<fingerprint>.json holds a finished search's report; journals/<fingerprint>.jsonl
gets one line per finished trial the moment it ends (flushed and synced), so a search killed by
anything, even SIGKILL or a reboot, resumes without launching a proven trial again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional

from .errors import EnvironmentProblem
from .export.atomic import write_text_atomic
from .trial import TrialRecord


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """$VLLM_FIT_CACHE_DIR, else $XDG_CACHE_HOME/vllm-fit, else ~/.cache/vllm-fit."""
    if env.get("VLLM_FIT_CACHE_DIR"):
        return Path(env["VLLM_FIT_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vllm-fit"


class Journal:
    """Append-only JSON lines: a header with the fingerprint, then one finished trial per line."""

    def __init__(self, path: Path, fingerprint: str):
        self.path, self.fingerprint = path, fingerprint

    def load(self) -> List[TrialRecord]:
        """The finished trials recorded so far (a torn last line, from a kill mid-write, is skipped)."""
        if not self.path.exists():
            return []
        records = []
        lines = self.path.read_text().splitlines()
        for number, line in enumerate(lines):
            try:
                data = json.loads(line)
            except ValueError:
                if number == len(lines) - 1:
                    break  # the write that a kill interrupted; that trial is simply run again
                raise
            if number == 0:
                if data.get("fingerprint") != self.fingerprint:
                    return []  # another search's journal: ignore it
                continue
            records.append(TrialRecord.from_json(data))
        return records

    def append(self, record: TrialRecord) -> None:
        """Add one finished trial, durably, before anything else happens."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a", encoding="utf-8") as handle:
            if new:
                handle.write(json.dumps({"fingerprint": self.fingerprint}) + "\n")
            handle.write(json.dumps(record.to_json(), default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def remove(self) -> None:
        if self.path.exists():
            self.path.unlink()


class FitStore:
    """The cache directory: finished reports by fingerprint, and journals of searches in progress."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _fit_path(self, fingerprint: str) -> Path:
        return self.root / "fits" / (fingerprint + ".json")

    def cached(self, fingerprint: str) -> Optional[Dict[str, Any]]:
        """The report of a finished search with this fingerprint, or None."""
        path = self._fit_path(fingerprint)
        return json.loads(path.read_text()) if path.exists() else None

    def store(self, fingerprint: str, report: Dict[str, Any]) -> Path:
        return write_text_atomic(self._fit_path(fingerprint), json.dumps(report, indent=1, default=str) + "\n")

    def journal(self, fingerprint: str) -> Journal:
        return Journal(self.root / "journals" / (fingerprint + ".jsonl"), fingerprint)

    @contextlib.contextmanager
    def lock(self, fingerprint: str) -> Iterator[None]:
        """Hold the fingerprint while searching: two tools running the same search would share a journal."""
        path = self.root / "journals" / (fingerprint + ".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise EnvironmentProblem("another vllm-fit is running this same search (lock %s); wait for it"
                                         " or pass --no-cache" % path) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
