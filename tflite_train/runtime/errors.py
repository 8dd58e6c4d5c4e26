"""The user errors of the on-device half: bad input files, folders, flags and output paths.

They subclass ``ValueError`` (the project's "bad input" error), so library callers can catch either;
the command line turns each into one line on stderr and exit code 2 (``tflite_train.cli.main``).
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user gave (a file, folder, flag or output path) is wrong; the message says what."""


class ImageError(UserError):
    """An image file that cannot be used: not a regular file, empty, too large, corrupt, unsupported."""


class ImageFolderError(UserError):
    """An image folder that is not ``root/<class>/<image>``: missing, empty, or a class folder without images."""


class OutputError(UserError):
    """An output path that cannot receive the results (a directory, read-only, no space left)."""


class CheckpointError(UserError):
    """A checkpoint that is corrupt, truncated, of another format/version, malformed, or for another model."""
