"""``python -m tflite_train.cli``: the ``tflite-train`` command."""

import sys

from tflite_train.cli.dispatch import main

sys.exit(main())
