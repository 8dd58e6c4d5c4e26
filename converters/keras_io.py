"""Loading a user's Keras model file (``.keras`` or legacy ``.h5``), checked before Keras reads it.

The bytes are untrusted: the file must be a regular file of a sane size with the right container
signature (a ``.keras`` file is a zip holding ``config.json`` and ``model.weights.h5``; ``.h5`` is
HDF5), and Keras loads it with ``safe_mode=True`` (no Lambda code is deserialised) and without
compiling (no optimizer or loss objects are restored).
"""

from __future__ import annotations

import os
import pathlib
import stat
import zipfile

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
        raise ModelFileError(f"--keras-model {str(path)!r} could not be loaded by Keras: "
                             f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    if not isinstance(model, keras.Model):
        raise ModelFileError(f"--keras-model {str(path)!r} holds a {type(model).__name__}, not a Keras model")
    return model
