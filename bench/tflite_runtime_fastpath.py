"""Why ``infer`` is slower on tflite-runtime 2.14 than on ai-edge-litert for the same file: variants.

Converts variants of one export's module (needs TensorFlow; run in ``.venv``) and times ``infer``
(batch 1, one thread, medians, each in a fresh process) on ai-edge-litert (this interpreter) and
tflite-runtime 2.14 (``--pi-python``), with and without the default XNNPACK delegate
(``experimental_op_resolver_type``)::

    PYTHONPATH=$PWD .venv/bin/python -m bench.tflite_runtime_fastpath --backbone mcunet --input-size 128

Variants (``--candidate-blocks`` k of the TinyTrain export unless said):

* ``contract``: the exported file (every signature, candidate kernels in resource variables);
* ``infer_only``: the same module converted with the ``infer`` signature only;
* ``infer_only_static``: ``infer`` only, batch fixed to 1;
* ``infer_only_k1``: ``infer`` only of a k = 1 export (almost every kernel a constant);
* ``contract_k1``: the whole contract of a k = 1 export.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESOLVERS = ("AUTO", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")


def export_variants(args: argparse.Namespace, out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Writes the variant files (reused when present); returns name -> path."""
    import tensorflow as tf

    from converters.build_module import folded_backbone, module_from_backbone
    from converters.export import write_export
    from converters.fixtures import trained_config

    out_dir.mkdir(parents=True, exist_ok=True)
    size = (args.input_size, args.input_size)
    paths: dict[str, pathlib.Path] = {}
    for k in (args.candidate_blocks, 1):
        config = trained_config(pathlib.Path(args.weights), size, candidate_blocks=k, train_variants=4)
        contract = out_dir / f"contract_k{k}.tflite"
        if not contract.exists():
            write_export(config, contract)
        suffix = "" if k == args.candidate_blocks else "_k1"
        paths[f"contract{suffix}"] = contract
        wanted = {f"infer_only{suffix}": None}
        if k == args.candidate_blocks:
            wanted["infer_only_static"] = 1
        missing = [n for n in wanted if not (out_dir / f"{n}.tflite").exists()]
        if missing:
            module = module_from_backbone(config, folded_backbone(config))
            h, w = size
            for name in missing:
                batch = wanted[name]
                spec = tf.TensorSpec([batch, h, w, config.in_channels], tf.float32, name="images")
                infer = tf.function(lambda images, m=module: m.infer(images), input_signature=[spec])
                (out_dir / f"{name}.tflite").write_bytes(_convert_with_module(module, infer))
        for name in wanted:
            paths[name] = out_dir / f"{name}.tflite"
    return paths


def _convert_with_module(module, infer) -> bytes:
    """Converts ``infer`` alone (the module is an attribute so that its variables are saved)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        holder = tf.Module()
        holder.module = module
        holder.infer = infer
        tf.saved_model.save(holder, tmp, signatures={"infer": infer.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.experimental_enable_resource_variables = True
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        return converter.convert()


def worker(spec: dict) -> dict:
    """Times ``infer`` of one file on the installed interpreter with one op resolver."""
    import os

    if spec.get("cpu") is not None:
        os.sched_setaffinity(0, {spec["cpu"]})
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        runtime = "ai_edge_litert"
    except ImportError:
        from tflite_runtime.interpreter import Interpreter, OpResolverType
        runtime = "tflite_runtime"
    it = Interpreter(model_path=spec["model"], num_threads=1,
                     experimental_op_resolver_type=getattr(OpResolverType, spec["resolver"]))
    runner = it.get_signature_runner("infer")
    shape = it.get_signature_runner("infer").get_input_details()["images"]["shape_signature"]
    x = np.random.default_rng(0).uniform(size=(1, *shape[1:])).astype(np.float32)
    for _ in range(5):
        runner(images=x)
    times = []
    start = time.perf_counter()
    while len(times) < spec["repeats"] and (time.perf_counter() - start < spec["max_seconds"] or len(times) < 10):
        t = time.perf_counter()
        runner(images=x)
        times.append(time.perf_counter() - t)
    return {"runtime": runtime, "ms": 1e3 * statistics.median(times), "calls": len(times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="mcunet")
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--weights", default=str(ROOT / "weights/mcunet_64_meta.weights.h5"))
    parser.add_argument("--candidate-blocks", type=int, default=7)
    parser.add_argument("--out-dir", default="build/peer/fastpath")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--pi-python", default=str(ROOT / ".venv-pi/bin/python"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    paths = export_variants(args, pathlib.Path(args.out_dir))
    rows = []
    print(f"{'variant':<20} {'MB':>6} " + " ".join(f"{p + '/' + r[:7]:>22}" for p in ("litert", "tflite-rt") for r in RESOLVERS))
    for name, path in paths.items():
        cells = []
        for python in (sys.executable, args.pi_python):
            for resolver in RESOLVERS:
                spec = {"model": str(path), "resolver": resolver, "repeats": args.repeats,
                        "max_seconds": args.max_seconds, "cpu": args.cpu}
                done = subprocess.run([python, "-m", "bench.tflite_runtime_fastpath", "--worker", json.dumps(spec)],
                                      cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
                if done.returncode:
                    raise RuntimeError(done.stderr[-2000:])
                cells.append(json.loads(done.stdout.strip().splitlines()[-1])["ms"])
        rows.append((name, path.stat().st_size / 1e6, cells))
        print(f"{name:<20} {path.stat().st_size / 1e6:6.2f} " + " ".join(f"{c:20.2f}ms" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
