"""Private work folders for the trials of one run: unique, 0700, removed on exit, stale ones cleaned.

Each run gets `vllm-fit-<pid>-<random>` in the temp folder (or, with --work-dir, a unique
`run-<time>-<pid>` folder inside it that is kept). A run killed by SIGKILL cannot remove its own
folder, so every start removes the temp folders of runs whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import psutil

PREFIX = "vllm-fit-"


def _owner_pid(folder: Path) -> Optional[int]:
    """The pid in `vllm-fit-<pid>-<random>`, or None for other names."""
    parts = folder.name[len(PREFIX):].split("-", 1)
    return int(parts[0]) if parts and parts[0].isdigit() else None


def clean_stale(root: Optional[Path] = None) -> int:
    """Remove our temp work folders whose run is no longer alive; return how many were removed."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    for folder in root.glob(PREFIX + "*"):
        pid = _owner_pid(folder)
        try:
            mine = folder.is_dir() and not folder.is_symlink() and folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if pid is None or not mine or psutil.pid_exists(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


@contextlib.contextmanager
def run_folder(keep_in: Optional[Path] = None) -> Iterator[Path]:
    """A unique private folder for this run's trials; removed at the end unless it is under keep_in."""
    if keep_in is not None:
        keep_in.mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix="run-%s-%d-" % (time.strftime("%Y%m%d-%H%M%S"), os.getpid()),
                                    dir=str(keep_in)))
        return
    clean_stale()
    folder = Path(tempfile.mkdtemp(prefix="%s%d-" % (PREFIX, os.getpid())))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
