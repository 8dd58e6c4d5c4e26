"""A worker started by ``bench.worker_process`` imports ``library`` first, then this checkout, never its working
directory's packages."""

import json
import pathlib
import subprocess
import sys

from bench.worker_process import ROOT, worker_command, worker_env


def test_worker_path_order(tmp_path):
    library, cwd = tmp_path / "library", tmp_path / "cwd"
    (library / "tflite_train").mkdir(parents=True)
    (library / "tflite_train" / "__init__.py").write_text("")
    (library / "probe.py").write_text("import json, bench, tflite_train\n"
                                      "print(json.dumps([bench.__file__, tflite_train.__file__]))\n")
    (cwd / "bench").mkdir(parents=True)  # a stray package in the working directory must not shadow the checkout's
    (cwd / "bench" / "__init__.py").write_text("")
    done = subprocess.run(worker_command(sys.executable, "probe"), cwd=cwd, env=worker_env(library),
                          capture_output=True, text=True, check=True)
    bench_file, library_file = json.loads(done.stdout)
    assert pathlib.Path(bench_file) == ROOT / "bench" / "__init__.py"
    assert pathlib.Path(library_file) == library / "tflite_train" / "__init__.py"
    assert worker_env()["PYTHONPATH"] == str(ROOT)
