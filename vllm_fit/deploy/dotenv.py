"""The `.env` file Docker Compose reads beside the compose file, for its `${VAR}` interpolation.

Compose takes a variable from the shell it runs in first, then from `.env` in the project folder (the
compose file's folder). The shell is not known here; what `.env` says is what is read (as a SkyPilot
task's `envs` are). Lines are `KEY=VALUE` (an `export ` before is allowed, `#` starts a comment line or,
after a space, a comment at the end of an unquoted value); single quotes keep the value as written,
double quotes take `\\n`, `\\"` and `\\\\` escapes. A value that refers to another variable is not
followed. The file is read up to 1 MiB, only where it is a regular file; otherwise nothing is known.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional, Tuple

MAX_DOTENV_BYTES = 1 << 20
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$")
_EXPRESSION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?$", re.S)


def read_dotenv(folder: Path) -> Dict[str, str]:
    """KEY -> value of the `.env` beside the compose file ({} where there is none or it cannot be read)."""
    path = folder / ".env"
    try:
        if not path.is_file():
            return {}
        with path.open("rb") as handle:
            data = handle.read(MAX_DOTENV_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    if len(data) > MAX_DOTENV_BYTES:
        return {}
    found: Dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or line.lstrip().startswith("#"):
            continue
        value = _value(match.group(2))
        if value is not None:
            found[match.group(1)] = value
        else:
            found.pop(match.group(1), None)
    return found


def _value(raw: str) -> Optional[str]:
    """A value as Compose reads it; None where it refers to another variable."""
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        value = re.sub(r'\\(["\\n])', lambda m: "\n" if m.group(1) == "n" else m.group(1), raw[1:-1])
    else:
        value = re.split(r"\s#", raw, maxsplit=1)[0].rstrip()
    return None if "$" in value else value


def resolve(expression: str, dotenv: Dict[str, str]) -> Optional[Tuple[str, str]]:
    """The value of `VAR`, `{VAR}`, `{VAR:-default}`, `{VAR-default}`, `{VAR:?err}` or `{VAR?err}` from .env,
    and the variable it comes from; None where .env does not decide it."""
    inner = expression[1:-1] if expression.startswith("{") else expression
    match = _EXPRESSION.match(inner)
    if match is None or match.group(1) not in dotenv:
        return None
    name, operator, default = match.group(1), match.group(2) or "", match.group(3) or ""
    value = dotenv[name]
    if operator == ":-" and value == "":
        if "$" in default:
            return None
        value = default
    return value, name
