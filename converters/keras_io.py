"""Loading a user's Keras model file (``.keras`` or legacy ``.h5``), checked before Keras reads it.

The bytes are untrusted: the file must be a regular file of a sane size with the right container
signature (a ``.keras`` file is a zip holding ``config.json`` and ``model.weights.h5``; ``.h5`` is
HDF5), and Keras loads it with ``safe_mode=True`` (no Lambda code is deserialised) and without
compiling (no optimizer or loss objects are restored).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import zipfile
from collections.abc import Iterator

import keras

MAX_MODEL_BYTES = 2 * 1024**3
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
KERAS_MEMBERS = ("config.json", "model.weights.h5")


class ModelFileError(ValueError):
    """A model file that is missing, of the wrong kind or not loadable (names the file)."""


def check_model_file(path: str | os.PathLike) -> pathlib.Path:
    """Checks the container of a ``.keras`` / ``.h5`` file (module docstring); returns its path.

    Raises:
      ModelFileError: missing, not a regular file, too large, wrong suffix or signature, a ``.keras``
        zip without its members.
    """
    path = pathlib.Path(path)
    try:
        info = path.stat()
    except OSError as err:
        raise ModelFileError(f"--keras-model {str(path)!r}: cannot read it ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelFileError(f"--keras-model {str(path)!r} is not a regular file")
    if info.st_size > MAX_MODEL_BYTES:
        raise ModelFileError(f"--keras-model {str(path)!r} is {info.st_size} bytes; the limit is {MAX_MODEL_BYTES}")
    with open(path, "rb") as f:
        head = f.read(8)
    if path.suffix == ".keras":
        if not head.startswith(b"PK\x03\x04") or not zipfile.is_zipfile(path):
            raise ModelFileError(f"--keras-model {str(path)!r} is not a .keras archive (not a zip file)")
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
        missing = [m for m in KERAS_MEMBERS if m not in names]
        if missing:
            raise ModelFileError(f"--keras-model {str(path)!r} is not a Keras model archive: it lacks {missing}")
    elif path.suffix == ".h5":
        if head != HDF5_SIGNATURE:
            raise ModelFileError(f"--keras-model {str(path)!r} is not an HDF5 file")
    else:
        raise ModelFileError(f"--keras-model {str(path)!r} must end in .keras or .h5")
    return path


def load_keras_model(path: str | os.PathLike) -> keras.Model:
    """The model in ``path`` (checked first, then loaded in safe mode without compiling).

    Raises:
      ModelFileError: a file that fails the checks or that Keras cannot load.
    """
    path = check_model_file(path)
    try:
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except (ValueError, TypeError, OSError, KeyError) as err:
        raise ModelFileError(_load_failure(path, err)) from None
    if not isinstance(model, keras.Model):
        raise ModelFileError(f"--keras-model {str(path)!r} holds a {type(model).__name__}, not a Keras model")
    return model


FROM_PYTHON = ("export the model from Python instead, where your code is imported: "
               "tflite_train.converters.export_keras(model, tflite_train.converters.ExportConfig(backbone='keras', ...))")
"""What a CLI user can do about a layer whose code a model file cannot carry."""


def _load_failure(path: pathlib.Path, err: Exception) -> str:
    """One line for a file Keras cannot load; for a Lambda or a custom layer class (code the CLI never runs
    from a file), what the user can do instead of Keras' advice (``safe_mode=False``, which no CLI flag reaches)."""
    text = str(err)
    where = f"--keras-model {str(path)!r}"
    if "Lambda" in text and "safe_mode" in text:
        names = _lambda_names(path)
        which = f"layer {names[0]!r} is a Lambda" if len(names) == 1 else \
            f"layers {', '.join(repr(n) for n in names)} are Lambdas" if names else "the model holds a Lambda layer"
        return (f"{where}: {which}, whose Python code is not loaded from a file (it could run anything); replace it by "
                f"built-in Keras layers and save the model again, or {FROM_PYTHON}")
    custom = re.search(r"Could not locate (?:class|function) '([^']+)'", text)
    if custom:
        return (f"{where}: layer class {custom.group(1)!r} is not part of Keras, and the CLI does not import your "
                f"code; replace it by built-in Keras layers and save the model again, or {FROM_PYTHON}")
    return f"{where} could not be loaded by Keras: {text.splitlines()[0] if text else type(err).__name__}"


def _lambda_names(path: pathlib.Path) -> list[str]:
    """Names of the Lambda layers in a ``.keras`` archive's ``config.json`` (none for ``.h5`` or an unreadable
    config)."""
    if path.suffix != ".keras":
        return []
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return []
    return [item.get("config", {}).get("name", "?") for item in _dicts(config) if item.get("class_name") == "Lambda"]


def _dicts(value) -> Iterator[dict]:
    """Every dict nested in a JSON value (depth first)."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)
