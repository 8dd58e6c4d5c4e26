"""The ``tflite-train`` argument parser: one-line errors, defaults in every help line, one sub-parser per command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

__all__ = ["Command", "DESCRIPTION", "build_parser", "common_flags"]

DESCRIPTION = "The ``tflite-train`` command line: parses flags and calls the library, nothing else."

Command = Callable[..., argparse.ArgumentParser]
"""``command(name, help_text, description=None)``: adds a sub-command with the common flags, returns its parser."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``tflite-train adapt: error: ...``) and defaults in every help line."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        from tflite_train.runtime.text import printable

        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends "(default: X)" to a flag's help unless it has no default value or states its own."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or action.required:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def common_flags(p: argparse.ArgumentParser, top: bool) -> None:
    """--verbose/--debug/--quiet, accepted before or after the command."""
    default = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens (INFO)", **default)
    p.add_argument("--debug", action="store_true", help="debug logging, and a traceback with any error", **default)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars", **default)


def _version() -> str:
    from importlib import metadata

    from tflite_train import __version__

    parts = []
    for name in ("numpy", "pillow", "tflite-runtime", "ai-edge-litert", "tensorflow-cpu"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return f"tflite-train {__version__} (Python {sys.version.split()[0]}; {'; '.join(parts)})"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tflite-train", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=_version(), help="print the versions and exit")
    common_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
        q = sub.add_parser(name, help=help_text, description=description or help_text)
        common_flags(q, top=False)
        return q

    for group in _command_groups():
        group.register(command)
    return parser


def _command_groups() -> tuple:
    """The command modules, in the order ``--help`` lists their commands."""
    from tflite_train.cli import device_commands, model_commands, paper_commands, training_commands

    return paper_commands, training_commands, device_commands, model_commands
