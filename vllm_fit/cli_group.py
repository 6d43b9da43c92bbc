"""The click group every command registers on (search and batch in cli.py, the others in
cli_outputs.py), and the exit status a command returns; cli.main runs it."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import click

from .errors import ExitCode
from .prepare.request import OPTIONS


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vllm-fit")
def cli() -> None:
    """Find the longest max_model_len (and the memory knob) that really serves on this GPU."""


def _exit(code: ExitCode) -> int:
    """A command's return value: the documented exit status."""
    return int(code)


def table_options(names: Optional[Sequence[str]] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Click options generated from the option table (prepare/request.py): every search option, or the
    `names` a command shares with search (verify's --python, --trial-timeout, --via). Values reach the
    command as typed and are parsed by the table's own parsers (one-line errors); choices show in help."""
    specs = [OPTIONS[name] for name in names] if names is not None else list(OPTIONS.values())

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for spec in reversed(specs):
            help_text = spec.help + ("" if spec.default_text is None else " [default: %s]" % spec.default_text)
            metavar = "|".join(spec.choices) if spec.choices else spec.metavar
            if spec.is_flag:
                decorator = click.option(spec.flag, spec.key, is_flag=True, default=None, help=help_text)
            else:
                decorator = click.option(spec.flag, spec.key, metavar=metavar, multiple=spec.multiple,
                                         required=spec.key == "model" and names is None, help=help_text)
            function = decorator(function)
        return function

    return decorate
