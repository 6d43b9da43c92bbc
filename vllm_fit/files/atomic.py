"""Atomic file writes: a temporary file in the same folder, synced, renamed over the target, folder synced.

Readers see the old file or the whole new one, never a part, and a reboot keeps what was written.
The new file gets normal permissions (0644 under the umask, never the mode of the file it replaces):
a `vllm serve` running as another user can read the config, and no setuid or world-write bit is copied.
Only a regular file is ever replaced: a symlink, a device, a folder or anything else at the target is
refused (see paths.check_output).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Union

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


def write_bytes_atomic(path: Union[str, Path], data: bytes, private: bool = False) -> Path:
    """Write bytes atomically (a temporary file renamed over the target, then the folder synced)."""
    path = Path(path)
    check_output(path, kind="file")
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600 if private else _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # already renamed into place, or never created
            os.unlink(tmp)
        raise
    fsync_folder(path.parent)
    return path
