"""Repository-only tools, never installed with the package (the wheel holds ``tflite_train`` alone).

They serve the tests, the Java core's golden files and the exporter's maintenance, and run from the root
of a checkout (``python -m tools.<module>``):

* ``tools.fixtures``: exports the test models that ``tests/runtime`` and the Java core replay
  (``make fixtures``), with ``tools.example_models`` (small Keras models of every supported layer
  family) and ``tools.parity_reference`` (the TensorFlow references of the parity tests).
* ``tools.golden``: the golden vectors that pin the Java core to Python (``tflite-train golden`` in a
  checkout; ``tools.golden.image_vectors``: the image-preprocessing parity files).
* ``tools.builtin_op_table``: regenerates ``tflite_train/runtime/model/builtin_ops.py`` from TFLite's schema.
* ``tools.diagnostics``: one-off measurements and what they found (``tools/diagnostics/README.md``).
* ``tools.wheel_check``: builds the wheel and runs it outside the checkout (``make test-wheel``).
"""

__all__: list[str] = []
