"""One-off measurements of the interpreter, the exported step and the optimizer (see README.md here).

Each module runs from the checkout (``python -m tools.diagnostics.<name> --help``) and writes its table to a
file under ``bench/results/``; they reuse the benchmark's helpers (``bench.call_timing``, ``bench.tasks``,
``bench.table_output``, ``bench.worker_process``) and are not part of ``tflite-train bench``.
"""

__all__: list[str] = []
