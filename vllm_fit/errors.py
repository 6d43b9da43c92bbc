"""The tool's exit codes, and its own errors, each tied to the exit code the CLI gives it."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What the process exit status means, for every command."""

    OK = 0
    """A verified fit that the search proved the best (or: every config verified, nothing regressed)."""
    NO_FIT = 1
    """Nothing in the range works (the report says why), a regression, or an internal error."""
    BAD_INPUT = 2
    """The input is wrong; one line says what and how to fix it; nothing was launched."""
    ENVIRONMENT = 3
    """The environment cannot run trials: no vLLM, no device, a model path that does not exist."""
    UNPROVEN = 4
    """A verified fit was written, but a later trial crashed or timed out before it was proven the best."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM; every trial process was stopped first."""


class FitError(Exception):
    """Base of the errors the CLI turns into one line and an exit code."""

    exit_code = ExitCode.NO_FIT


class BadInput(FitError):
    """The user's input is wrong; nothing was launched."""

    exit_code = ExitCode.BAD_INPUT


class EnvironmentProblem(FitError):
    """The environment cannot run trials (no vLLM in the interpreter, missing model, busy or absent device)."""

    exit_code = ExitCode.ENVIRONMENT


class Interrupted(FitError):
    """The tool was interrupted (Ctrl-C or SIGTERM); every trial process has been killed."""

    exit_code = ExitCode.INTERRUPTED


def one_line(text: str, limit: int = 400) -> str:
    """Text folded onto one line and cut to `limit` characters, for messages built from user data; control
    characters (a NUL, an escape sequence) are shown escaped, never sent to the terminal as they are."""
    flat = " ".join(str(text).split())
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
