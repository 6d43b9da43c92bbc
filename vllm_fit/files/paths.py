"""Output paths proven usable before anything is launched: where the user pointed, and nothing else.

A file output needs an existing, writable parent folder and a target that is absent or a regular
file (never a symlink, a device, a folder or a pipe). A folder output (batch --out-dir) may be
created, but not over a file. Reading paths taken from files (index.json) must stay inside their folder.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Dict, Optional, Sequence, Union

from ..errors import BadInput

PathLike = Union[str, Path]


def _writable_folder(folder: Path, what: str) -> None:
    """The folder exists, is a folder, and a file can really be created in it."""
    if not folder.exists():
        raise BadInput("%s: the folder %s does not exist; create it first (mkdir -p %s)" % (what, folder, folder))
    if not folder.is_dir():
        raise BadInput("%s: %s is not a folder" % (what, folder))
    try:
        with tempfile.TemporaryFile(dir=str(folder)):
            pass  # creating it is the test
    except OSError as exc:
        raise BadInput("%s: cannot write in %s (%s); choose a writable folder"
                       % (what, folder, exc.strerror or exc)) from None


def check_output(path: PathLike, kind: str = "file", what: Optional[str] = None,
                 suffixes: Sequence[str] = (), create: bool = True) -> Path:
    """Refuse (BadInput) an output path that cannot or must not be written; return it as a Path.

    kind "file": the parent must exist; kind "folder": the folder is created when absent, unless
    `create` is False (then only its nearest existing parent must be a writable folder: nothing is
    created before every check has passed).
    """
    path = Path(path)
    what = what or str(path)
    if kind == "folder":
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise BadInput("%s: %s exists and is not a folder; choose another --out-dir" % (what, path))
        if not create and not path.exists():
            parent = path.absolute().parent
            while not parent.exists():
                parent = parent.parent
            _writable_folder(parent, what)
            return path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput("%s: cannot create the folder %s (%s)" % (what, path, exc.strerror or exc)) from None
        _writable_folder(path, what)
        return path
    if suffixes and path.suffix.lower() not in suffixes:
        why = " (vllm serve --config insists on it)" if ".yaml" in suffixes else ""
        raise BadInput("%s must end in %s%s" % (what, " or ".join(suffixes), why))
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        raise BadInput("%s: a part of %s is a file, not a folder" % (what, path)) from None
    except OSError as exc:
        raise BadInput("%s: cannot use %s (%s)" % (what, path, exc.strerror or exc)) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kinds = {stat.S_ISLNK: "a symlink", stat.S_ISDIR: "a folder", stat.S_ISCHR: "a device",
                 stat.S_ISBLK: "a device", stat.S_ISFIFO: "a pipe", stat.S_ISSOCK: "a socket"}
        name = next((label for test, label in kinds.items() if test(info.st_mode)), "not a regular file")
        raise BadInput("%s: %s is %s; name a regular file to write" % (what, path, name))
    _writable_folder(path.parent if str(path.parent) else Path("."), what)
    return path


def check_distinct(outputs: Dict[str, Optional[str]]) -> None:
    """No two output options (flag -> path) name the same file: one would overwrite the other."""
    seen: Dict[Path, str] = {}
    for flag, path in outputs.items():
        if not path:
            continue
        resolved = Path(os.path.expanduser(str(path))).resolve()
        if resolved in seen:
            raise BadInput("%s and %s name the same file %s; give each its own" % (seen[resolved], flag, path))
        seen[resolved] = flag


def inside(folder: Path, relative: object, what: str) -> Path:
    """`folder / relative` for a relative path from a file we read; BadInput when it would escape."""
    if not isinstance(relative, str) or not relative:
        raise BadInput("%s: expected a relative path, got %r" % (what, relative))
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or "\\" in relative or "\x00" in relative:
        raise BadInput("%s: the path %r leaves its folder; only paths inside %s are read" % (what, relative, folder))
    return folder / Path(*pure.parts)


MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".model", ".py", ".tiktoken", ".msgpack",
                       ".h5", ".jinja", ".npz")
MODEL_FILE_NAMES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json", "added_tokens.json", "preprocessor_config.json", "vocab.json",
                    "vocab.txt", "merges.txt", "chat_template.json", "params.json", "processor_config.json")
"""What vLLM and transformers read from a model folder (besides index files of weights)."""


def is_model_file(name: str) -> bool:
    """Whether a file of this name in a model folder is read when the model is loaded."""
    return name in MODEL_FILE_NAMES or name.endswith(MODEL_FILE_SUFFIXES) or name.endswith(".index.json")


def check_not_inputs(outputs: Dict[str, Optional[str]], files: Sequence[PathLike] = (),
                     folders: Sequence[PathLike] = ()) -> None:
    """No output replaces an input: not one of `files` (through any link), not a file that loading the
    model reads inside one of `folders` (config.json, weights, tokenizer), and not the folder itself."""
    inputs = {os.path.realpath(os.path.expanduser(str(path))): str(path) for path in files}
    roots = [os.path.realpath(os.path.expanduser(str(folder))) for folder in folders]
    for flag, path in outputs.items():
        if not path:
            continue
        real = os.path.realpath(os.path.expanduser(str(path)))
        if real in inputs:
            raise BadInput("%s %s is an input of this command (%s); write the output elsewhere"
                           % (flag, path, inputs[real]))
        for root in roots:
            if real == root or (real.startswith(root + os.sep) and is_model_file(os.path.basename(real))):
                raise BadInput("%s %s would replace %s of the model in %s; write it elsewhere"
                               % (flag, path, os.path.relpath(real, root), root))


def contained(path: Path, folder: Path, what: str) -> Path:
    """`path` as read for a copy: a regular file whose real location is inside `folder` (no link out)."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    if not real.startswith(root + os.sep) or os.path.islink(path):
        raise BadInput("%s: %s is a link%s; only files inside %s are copied" % (
            what, path, " out of its folder" if not real.startswith(root + os.sep) else "", folder))
    return path
