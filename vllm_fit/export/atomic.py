"""Atomic file writes: a temporary file in the same folder, flushed, then renamed over the target."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union


def write_text_atomic(path: Union[str, Path], text: str) -> Path:
    """Write text so that readers see either the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
