"""Files read and rewritten under a lock, so that two runs editing one file do not lose an update.

Each file is opened (regular files only), locked with flock (exclusive to edit it, shared to only read
it), and checked to still be the file at its path (a writer that held the lock may have renamed a new
one over it: then the new one is opened and locked instead); its bytes are read under the lock, which
is held until the caller has written. Files are locked in one order, so two runs never wait on each
other in a circle. Where the filesystem has no locks, the files are read unlocked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

from ..errors import BadInput, EnvironmentProblem
from .reading import MAX_INPUT_BYTES, open_regular

LOCK_WAIT_S = 30.0


@dataclass(frozen=True)
class Locked:
    """A file's bytes read under its lock, and its mode bits."""

    data: bytes
    mode: int


def _lock(fd: int, path: Path, exclusive: bool, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return  # no locks on this filesystem: read as it is
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                raise EnvironmentProblem("%s is locked by another process editing it (waited %d s); run again when"
                                         " it is done" % (path, wait_s)) from None
            time.sleep(0.1)


def _read(fd: int, path: Path, what: str) -> bytes:
    chunks: List[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            raise BadInput("%s %s is larger than %d bytes; at most that is read" % (what, path, MAX_INPUT_BYTES))


@contextlib.contextmanager
def locked_files(paths: List[Path], exclusive: bool, what: str,
                 wait_s: float = LOCK_WAIT_S) -> Iterator[Dict[Path, Locked]]:
    """Every file locked and read; the locks are held until the block ends."""
    held: List[int] = []
    found: Dict[Path, Locked] = {}
    try:
        for path in sorted(set(paths), key=lambda p: os.path.realpath(p)):
            while True:
                fd = open_regular(path, os.O_RDONLY, what)
                held.append(fd)
                _lock(fd, path, exclusive, wait_s)
                mine, now = os.fstat(fd), os.stat(path)
                if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
                    break
                os.close(held.pop())  # replaced while we waited: lock the new file
            os.set_blocking(fd, True)
            found[path] = Locked(_read(fd, path, what), mine.st_mode & 0o7777)
        yield found
    finally:
        for fd in held:
            os.close(fd)


FOLDER_LOCK = ".vllm-fit.lock"
"""The file in a batch's --out-dir that says which process writes there (its pid)."""


@contextlib.contextmanager
def folder_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold `folder` for this process: a second batch on it is refused at once, naming the holder's pid.
    The lock file holds the pid and is removed on release (checked to be the file at its path after
    locking, so a run that opened it just before its removal never holds a stale one)."""
    path = folder / FOLDER_LOCK
    while True:
        fd = open_regular(path, os.O_RDWR | os.O_CREAT, "lock file", follow=False, mode=0o644,
                          error=EnvironmentProblem)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                yield  # no locks on this filesystem: run as before
                return
            raise EnvironmentProblem("%s %s is in use by another vllm-fit batch (pid %s); wait for it to finish or"
                                     " choose another folder" % (what, folder, holder)) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # removed by the run that held it just now: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
