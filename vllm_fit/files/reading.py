"""Reading the files users and other tools hand in: regular files only, bounded, strict JSON.

A pipe, a device or a socket is refused before it is read (opened non-blocking, checked with fstat),
so a FIFO planted at an input or cache path cannot hang the tool; a file larger than the bound is
refused rather than read into memory (/dev/zero, a runaway log); JSON refuses NaN and Infinity; and
nesting deeper than any file vllm-fit writes is refused instead of overflowing the stack. Every
failure is one BadInput line naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, Type, Union

from ..errors import BadInput, FitError, one_line

MAX_INPUT_BYTES = 256 << 20
"""The largest input read (a batch report with every trial's log stays far below)."""
MAX_NESTING = 64
"""The deepest nesting of lists and mappings accepted in an input (vllm-fit writes at most ~8)."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: Union[str, Path], flags: int, what: str, follow: bool = True, mode: int = 0o600,
                 error: Type[FitError] = BadInput) -> int:
    """A file descriptor of the regular file at `path` (created with `mode` where flags say so), never
    blocking on a pipe; `follow=False` refuses a symlink (the tool's own cache and journals). Raises
    `error` naming the file and what it is."""
    extra = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(str(path), flags | extra, mode)
    except FileNotFoundError:
        raise error("%s %s does not exist" % (what, path)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise error("%s %s is a symlink; vllm-fit never follows one there: remove it" % (what, path)) from None
        if exc.errno == errno.EISDIR:
            raise error("%s %s is a folder; remove it or name a regular file" % (what, path)) from None
        raise error("cannot open %s %s: %s" % (what, path, exc.strerror or exc)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = next((label for test, label in _KINDS if test(info.st_mode)), "not a regular file")
        raise error("%s %s is %s; name a regular file" % (what, path, kind))
    if flags & (os.O_WRONLY | os.O_RDWR):
        os.set_blocking(fd, True)
    return fd


def read_input_bytes(path: Union[str, Path], what: str, limit: int = MAX_INPUT_BYTES, follow: bool = True,
                     error: Type[FitError] = BadInput) -> bytes:
    """The bytes of a regular file at `path` (symlinks to one followed unless `follow` is False), or
    `error` (BadInput by default)."""
    fd = open_regular(path, os.O_RDONLY, what, follow, error=error)
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise error("%s %s is %d bytes; at most %d are read" % (what, path, info.st_size, limit))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error("%s %s is larger than %d bytes; at most that is read" % (what, path, limit))
    return data


def read_input_text(path: Union[str, Path], what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file, or BadInput."""
    data = read_input_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("%s %s is not UTF-8 text; save it as UTF-8" % (what, path)) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError("%s is not a number JSON allows" % name)


def check_nesting(value: Any, what: str, limit: int = MAX_NESTING) -> Any:
    """Refuse lists and mappings nested deeper than `limit` (iteratively: no recursion to overflow)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > limit:
                raise BadInput("%s is nested more than %d levels deep; no vllm-fit input is" % (what, limit))
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def parse_json(text: str, what: str) -> Any:
    """Strict JSON (no NaN or Infinity), nesting bounded, or BadInput naming `what`."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise BadInput("%s is nested too deeply to read" % what) from None
    except ValueError as exc:
        raise BadInput("%s is not valid JSON: %s" % (what, one_line(str(exc), 200))) from None
    return check_nesting(value, what)


def read_json(path: Union[str, Path], what: str, limit: int = MAX_INPUT_BYTES) -> Any:
    """A JSON file read strictly (see parse_json), or BadInput."""
    return parse_json(read_input_text(path, what, limit), "%s %s" % (what, path))
