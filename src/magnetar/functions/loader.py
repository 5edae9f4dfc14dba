"""Loading user code: a ``pulsar.Function`` subclass, any class with ``process``, or a plain function.

Theory of operation: Pulsar's Python instance imports the file given with
``--py`` as a module named after the file and looks up ``className`` in it
(``exclamation.ExclamationFunction`` -> attribute ``ExclamationFunction`` of
module ``exclamation``; a bare ``ExclamationFunction`` works too).  What it
finds decides how a message is handed over:

* a class (``pulsar.Function`` subclass or not) with ``process(self, input,
  context)`` -> instantiated once, ``obj.process(value, context)`` per message;
* a class with ``process(self, input)`` or a plain ``def f(input)`` -> called
  with the value only (Pulsar's "native" Python functions);
* a plain ``def f(input, context)`` -> called with the context too.

A ``.zip`` archive (``--py function.zip``) carries the module and its
pure-Python dependencies (see :func:`_from_zip`); it is unpacked once beside the
code file, and refused (:func:`check_zip`) if a member's path escapes or it unpacks
to more than ``ZIP_UNPACKED_MAX``.

``pulsar`` itself is never imported here: a ``pulsar.Function`` subclass
imports it from the user's file, so Magnetar runs other code without the
``pulsar-client`` package.  Values cross as Pulsar's default ``IdentitySerDe``
does: bytes decode to int, float, complex or str when they parse as one, else
stay bytes; results encode back (str/int/float/complex as UTF-8 text, bytes as
is).  ``serde.PickleSerDe`` is honoured for ``context.publish``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import pickle
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CODE_BYTES_MAX = 16 * 1024 * 1024
ZIP_UNPACKED_MAX = 256 * 1024 * 1024


class UserCodeError(Exception):
    """The user's code cannot be loaded (missing file, class not found, wrong shape)."""


def load_callable(
    code_path: str | Path, class_name: str, component: str | None = None
) -> Callable[[Any, Any], Any]:
    """``call(value, context)`` for the function named ``class_name`` in ``code_path``.

    For a connector (``component`` "sink"/"source") a class with ``write`` / ``read``
    (a :mod:`magnetar.connectors.api` Sink or Source) is wrapped into its function face first.
    """
    path = Path(code_path)
    if not path.is_file():
        raise UserCodeError(f"code file {path} does not exist")
    if path.suffix == ".zip":
        target = _from_zip(path, class_name)
    else:
        target = _from_file(path, class_name)
    if inspect.isclass(target) and not hasattr(target, "process"):
        from magnetar.connectors.runner import sink_function, source_function

        if component == "sink" and hasattr(target, "write"):
            target = sink_function(target)
        elif component == "source" and hasattr(target, "read"):
            target = source_function(target)
    return adapt(target)


def _from_file(path: Path, class_name: str) -> Any:
    module_name, _, attr = class_name.rpartition(".")
    module_name = module_name or path.stem
    if module_name != path.stem and "." not in module_name:
        module_name = path.stem  # className names the module by the file's stem; be lenient
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # so pickling and relative lookups of the user's classes work
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UserCodeError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    target = getattr(module, attr, None)
    if target is None:
        raise UserCodeError(f"{path} has no attribute {attr!r} (className {class_name!r})")
    return target


def check_zip(data: bytes) -> None:
    """Refuse a zip that is not one, holds an unsafe path, or unpacks to too much."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            total = 0
            for info in zf.infolist():
                name = info.filename
                if name.startswith("/") or ".." in Path(name).parts or "\\" in name:
                    raise UserCodeError(f"the zip holds an unsafe path {name!r}")
                total += info.file_size
            if total > ZIP_UNPACKED_MAX:
                raise UserCodeError(f"the zip unpacks to {total} bytes, over {ZIP_UNPACKED_MAX}")
    except zipfile.BadZipFile as exc:
        raise UserCodeError(f"not a zip archive: {exc}") from None


def _unpacked(path: Path) -> Path:
    """The zip unpacked once beside it (a private temporary directory renamed into place)."""
    target = path.with_name(path.name + ".d")
    if target.is_dir():
        return target
    check_zip(path.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=path.parent))
    with zipfile.ZipFile(path) as zf:
        zf.extractall(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another instance won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _from_zip(path: Path, class_name: str) -> Any:
    """A zip of the function's module and its pure-Python dependencies.

    Pulsar's layout (one top directory holding ``src/`` and ``deps/``) and a flat
    zip both work: the zip's root, a single top-level directory, its ``src/`` and
    ``deps/`` and every wheel in ``deps/`` go on ``sys.path``; then the module named
    by ``className`` is imported.
    """
    root = _unpacked(path)
    bases = [root]
    tops = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))]
    if len(tops) == 1 and not any(root.glob("*.py")):
        bases.append(tops[0])
    entries: list[Path] = []
    for base in bases:
        entries += [base, base / "src", base / "deps"]
        entries += sorted((base / "deps").glob("*.whl")) if (base / "deps").is_dir() else []
    for entry in reversed([e for e in entries if e.exists()]):
        if str(entry) not in sys.path:
            sys.path.insert(0, str(entry))
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise UserCodeError(f"className {class_name!r} must name module.Class for a zip archive")
    sys.modules.pop(module_name, None)  # an updated archive's module, not a cached older one
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UserCodeError(
            f"importing {module_name} from {path.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target = getattr(module, attr, None)
    if target is None:
        raise UserCodeError(f"module {module_name} has no attribute {attr!r}")
    return target


def adapt(target: Any) -> Callable[[Any, Any], Any]:
    if inspect.isclass(target):
        try:
            obj = target()
        except Exception as exc:
            raise UserCodeError(f"{target.__name__}() failed: {type(exc).__name__}: {exc}") from exc
        method = getattr(obj, "process", None)
        if not callable(method):
            raise UserCodeError(f"class {target.__name__} has no process(self, input, context) method")
        return _by_arity(method, f"{target.__name__}.process")
    if callable(target):
        return _by_arity(target, getattr(target, "__name__", "function"))
    raise UserCodeError(f"{target!r} is neither a class nor a function")


def _by_arity(fn: Callable[..., Any], what: str) -> Callable[[Any, Any], Any]:
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if len(params) >= 2:
        return fn
    if len(params) == 1:
        return lambda value, _context: fn(value)
    raise UserCodeError(f"{what} must take (input) or (input, context)")


# --- serde: Pulsar's IdentitySerDe and PickleSerDe, without importing pulsar -------------------

_IDENTITY_TYPES = (int, float, complex, str)


def identity_deserialize(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    for typ in _IDENTITY_TYPES:
        try:
            return typ(text)
        except ValueError:
            continue
    return data


def identity_serialize(value: Any) -> bytes:
    if type(value) in _IDENTITY_TYPES:
        return str(value).encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"IdentitySerDe cannot serialize object of type {type(value).__name__}")


def serializer(serde_class_name: str | None) -> Callable[[Any], bytes]:
    name = (serde_class_name or "").rsplit(".", 1)[-1]
    if name == "PickleSerDe":
        return pickle.dumps
    if name in ("", "IdentitySerDe", "StringSchema", "BytesSchema"):
        return identity_serialize
    raise UserCodeError(f"unknown serde {serde_class_name!r}; use serde.IdentitySerDe or serde.PickleSerDe")
