"""The tool's own errors, each tied to the exit code the CLI gives it."""

from __future__ import annotations


class FitError(Exception):
    """Base of the errors the CLI turns into a one-line message and an exit code."""

    exit_code = 1


class BadInput(FitError):
    """The user's input is wrong; nothing was launched."""

    exit_code = 2


class EnvironmentProblem(FitError):
    """The environment cannot run trials (no vLLM in the interpreter, missing model, busy GPU)."""

    exit_code = 3


class Interrupted(FitError):
    """The tool was interrupted (Ctrl-C or SIGTERM); every trial process has been killed."""

    exit_code = 130
