"""Runs one ``tflite-train`` command: a user error becomes one line on stderr and exit code 2."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence

from tflite_train.cli.parser import build_parser

__all__ = ["QUIET_COMMANDS", "Terminated", "main", "sigterm_raises"]

QUIET_COMMANDS = ("adapt", "predict", "show", "bake", "export")


class Terminated(BaseException):
    """SIGTERM, as an exception: unwinds like Ctrl-C, so temporary files are removed and locks released."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block SIGTERM raises ``Terminated`` instead of ending the process on the spot (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _error_message(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    if isinstance(err, MemoryError):
        return "out of memory"
    return str(err) or type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; a user error becomes one line on stderr and exit code 2 (--debug: with a traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    debug = args.debug
    # adapt/predict show progress bars and a summary, export a summary: their INFO logs only with -v; the long
    # workstation commands (pre-training, bench, ...) keep logging their progress
    level = logging.DEBUG if debug else logging.INFO if args.verbose or args.command not in QUIET_COMMANDS \
        else logging.WARNING
    logging.basicConfig(level=level, format="tflite-train: %(levelname)s: %(message)s")
    try:
        with sigterm_raises():
            return args.func(args)
    except KeyboardInterrupt:
        print(f"tflite-train {args.command}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"tflite-train {args.command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except (ValueError, OSError, ImportError, MemoryError) as err:
        from tflite_train.runtime.text import printable

        if debug:
            traceback.print_exc()
        # messages name files through text.printable already; this catches any other line break
        print(f"tflite-train {args.command}: error: {printable(_error_message(err), backslash=False)}", file=sys.stderr)
        return 2
