"""Atomic file writes: a temporary file in the same folder, synced, renamed over the target, folder synced.

Readers see the old file or the whole new one, never a part, and a reboot keeps what was written.
The new file gets normal permissions (0644 under the umask, never the mode of the file it replaces):
a `vllm serve` running as another user can read the config, and no setuid or world-write bit is copied.
A user's own file that vllm-fit edits (`apply`) keeps its permission bits instead (less setuid and
setgid): a 0600 compose file holding a token stays 0600. Only a regular file is ever replaced: a
symlink, a device, a folder or anything else at the target is refused (see paths.check_output).
Several files are written all or nothing with `prepare` then `commit`: every new file is written and
synced first (a full disk fails there, before anything changed); the renames that follow need no space.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ..errors import EnvironmentProblem
from .paths import check_output


def _mode_for(path: Path) -> int:
    """The mode the written file gets: 0644 under the umask, whatever the file it replaces had (a
    setuid, setgid or world-writable file is never reproduced)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o644 & ~umask


def fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on folders; the rename itself has happened
    finally:
        os.close(fd)


def write_text_atomic(path: Union[str, Path], text: str, private: bool = False) -> Path:
    """Write text atomically; `private` files (journals, debug logs) get 0600."""
    return write_bytes_atomic(path, text.encode("utf-8"), private)


def write_bytes_atomic(path: Union[str, Path], data: bytes, private: bool = False, mode: Optional[int] = None) -> Path:
    """Write bytes atomically (a temporary file renamed over the target, then the folder synced); `mode`
    keeps the bits of a user's file (setuid and setgid never)."""
    pending = prepare(path, data, 0o600 if private else mode)
    pending.commit()
    return pending.path


@dataclass
class Pending:
    """A new file written and synced beside its target, not yet renamed over it."""

    path: Path
    tmp: str

    def commit(self) -> None:
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise WriteFailed(self.path, exc) from None
        except BaseException:
            self.discard()
            raise
        fsync_folder(self.path.parent)

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # already renamed into place, or never created
            os.unlink(self.tmp)


class WriteFailed(EnvironmentProblem):
    """A file could not be written (a full disk, a file-size limit, a read-only folder); it names the file,
    which still holds what it held before."""

    def __init__(self, path: Path, exc: OSError):
        super().__init__("cannot write %s (%s); free space there or choose another place"
                         % (path, exc.strerror or exc))
        self.path, self.reason = path, exc.strerror or str(exc)


def prepare(path: Union[str, Path], data: bytes, mode: Optional[int] = None) -> Pending:
    """Write `data` to a temporary file beside `path`, synced, with its final mode (WriteFailed naming the
    file when the disk refuses: nothing at `path` has changed)."""
    path = Path(path)
    check_output(path, kind="file")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=str(path.parent))
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    pending = Pending(path, tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, (mode & 0o1777) if mode is not None else _mode_for(path))
    except OSError as exc:
        pending.discard()
        raise WriteFailed(path, exc) from None
    except BaseException:
        pending.discard()
        raise
    return pending
