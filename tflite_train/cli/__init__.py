"""The ``tflite-train`` command line: parses flags and calls the library, nothing else.

Subcommands import what they need lazily, so the on-device ones run without TensorFlow. One module per
command group (``paper_commands``, ``training_commands``, ``device_commands``, ``model_commands``); the
parser, the flag types and the error handling each have their own.
"""

from tflite_train.cli.dispatch import main
from tflite_train.cli.parser import build_parser

__all__ = ["build_parser", "main"]
