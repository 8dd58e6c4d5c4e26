"""Why ``infer`` is slower on tflite-runtime 2.14 than on ai-edge-litert for the same file, and a fix.

Findings (evidence: this script; numbers in bench/results/PEER_ORT.md):

1. tflite-runtime 2.14's pip wheel never applies its default XNNPACK delegate: ``infer`` times the
   same with ``experimental_op_resolver_type`` AUTO and BUILTIN_WITHOUT_DEFAULT_DELEGATES, also for a
   one-conv model without variables, and the "Created TensorFlow Lite XNNPACK delegate" line is never
   logged — although the wheel's ``_pywrap_tensorflow_interpreter_wrapper.so`` contains XNNPACK and
   exports ``TfLiteXNNPackDelegateCreate``. ai-edge-litert applies it by default. So every op runs on
   the 2.14 builtin kernels: the whole gap, for any export.
2. The delegate can be created explicitly (ctypes on that library, ``XnnpackDelegate``) and passed as
   ``experimental_delegates``; but ``ModifyGraphWithDelegate`` then fails (RuntimeError) on every
   exported contract. Bisected by signature and reproduced on a minimal model: any signature that
   assigns an **int32 resource variable** makes 2.14's delegate application fail (here
   ``num_classes``, assigned by ``set_head``, ``reset_state``, ``set_state``); float32 variables,
   IF ops, dynamic batch dims and data-dependent shapes (WHERE/GATHER) do not.
3. The export change: keep ``num_classes`` in a float32 variable (the signatures' int32 inputs and
   outputs unchanged: cast on assign and on read). Prototyped here (``FloatCountModule``, outside
   converters/); with it and the explicit delegate, tflite-runtime 2.14 runs the frozen forward on
   XNNPACK and the self-test still passes.

Run (needs TensorFlow for the export; times in fresh processes on both runtimes)::

    PYTHONPATH=$PWD .venv/bin/python -m bench.tflite_runtime_fastpath --backbone mcunet --input-size 128
"""

from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- explicit XNNPACK (2.14)
class _XnnpackOptions(ctypes.Structure):
    # TfLiteXNNPackDelegateOptions of TF 2.14 (num_threads, flags, weights_cache, handle_variable_ops),
    # padded: returned by value through a hidden pointer either way (> 16 bytes).
    _fields_ = [("num_threads", ctypes.c_int32), ("flags", ctypes.c_uint32), ("weights_cache", ctypes.c_void_p),
                ("handle_variable_ops", ctypes.c_bool), ("_reserved", ctypes.c_byte * 64)]


class XnnpackDelegate:
    """The XNNPACK delegate of tflite-runtime's own library, for ``Interpreter(experimental_delegates=[...])``."""

    def __init__(self, num_threads: int = 1) -> None:
        from tflite_runtime import _pywrap_tensorflow_interpreter_wrapper as wrapper

        lib = ctypes.CDLL(wrapper.__file__)
        lib.TfLiteXNNPackDelegateOptionsDefault.restype = _XnnpackOptions
        lib.TfLiteXNNPackDelegateCreate.restype = ctypes.c_void_p
        lib.TfLiteXNNPackDelegateCreate.argtypes = [ctypes.POINTER(_XnnpackOptions)]
        options = lib.TfLiteXNNPackDelegateOptionsDefault()
        options.num_threads = num_threads
        self._lib, self._ptr = lib, lib.TfLiteXNNPackDelegateCreate(ctypes.byref(options))

    def _get_native_delegate_pointer(self) -> int:
        return self._ptr


def _interpreter_with_xnnpack():
    from tflite_runtime.interpreter import Interpreter

    class XnnpackInterpreter(Interpreter):
        def __init__(self, **kwargs):
            super().__init__(experimental_delegates=[XnnpackDelegate(kwargs.get("num_threads", 1))], **kwargs)

    return XnnpackInterpreter


# ------------------------------------------------------------------------------------ export variant
def float_count_module(config, folded):
    """The ``TrainableModule`` of ``config`` with ``num_classes`` held in a float32 variable (the
    prototype of the export change; signatures keep their int32 ``num_classes`` input/output)."""
    import tensorflow as tf

    from converters.build_module import module_from_backbone
    from converters.trainable_module import MASKED_LOGIT, NORM_EPS

    module = module_from_backbone(config, folded)
    count = tf.Variable(np.float32(0.0), name="num_classes_f32", trainable=False)
    module._num_classes_f32 = count
    k, d = config.class_capacity, module.feature_dim

    def head(emb):
        r = tf.math.rsqrt(tf.reduce_sum(emb * emb, axis=1, keepdims=True) + NORM_EPS)
        e_hat = emb * r
        proto = module._vars["prototypes"]
        p_hat = proto * tf.math.rsqrt(tf.reduce_sum(proto * proto, axis=1, keepdims=True) + NORM_EPS)
        cos = tf.matmul(e_hat, p_hat, transpose_b=True)
        valid = tf.cast(tf.range(k, dtype=tf.float32) < count, tf.float32)
        logits = cos * (float(config.cosine_scale) * valid) + (1.0 - valid) * MASKED_LOGIT
        return logits, (r, e_hat, p_hat, valid)

    module._head = head
    names = module.names

    @tf.function(input_signature=[tf.TensorSpec([k, d], tf.float32, name="prototypes"),
                                  tf.TensorSpec([], tf.int32, name="num_classes")])
    def set_head(prototypes, num_classes):
        module._vars["prototypes"].assign(prototypes)
        count.assign(tf.cast(num_classes, tf.float32))
        return {"ok": tf.constant(1, tf.int32)}

    def read(n):
        return tf.cast(count, tf.int32) if n == "num_classes" else tf.identity(module._vars[n])

    @tf.function(input_signature=[])
    def get_state():
        return {n: read(n) for n in names}

    specs = [tf.TensorSpec(module._initial[n].shape, module._initial[n].dtype, name=n) for n in names]

    @tf.function(input_signature=specs)
    def set_state(*values):
        for n, value in zip(names, values):
            if n == "num_classes":
                count.assign(tf.cast(value, tf.float32))
            else:
                module._vars[n].assign(value)
        return {"ok": tf.constant(1, tf.int32)}

    @tf.function(input_signature=[])
    def reset_state():
        for n in names:
            if n == "num_classes":
                count.assign(float(module._initial[n]))
            else:
                module._vars[n].assign(tf.constant(module._initial[n]))
        return {"ok": tf.constant(1, tf.int32)}

    module.set_head, module.get_state, module.set_state, module.reset_state = set_head, get_state, set_state, reset_state
    return module


def export_infer_only(config, out: pathlib.Path) -> None:
    """Converts the ``infer`` signature alone of ``config``'s module (variables kept, no metadata)."""
    import tempfile

    import tensorflow as tf

    from converters.build_module import folded_backbone, module_from_backbone

    module = module_from_backbone(config, folded_backbone(config))
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={"infer": module.infer.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.experimental_enable_resource_variables = True
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        out.write_bytes(converter.convert())


def export_float_count(config, out: pathlib.Path) -> None:
    """Exports ``config`` through the normal path with the float32 count (monkeypatched builder)."""
    import converters.export as export

    original = export.module_from_backbone
    export.module_from_backbone = lambda cfg, folded: float_count_module(cfg, folded)
    try:
        export.write_export(config, out)
    finally:
        export.module_from_backbone = original


# ------------------------------------------------------------------------------------------ worker
def worker(spec: dict) -> dict:
    """Loads one file (optionally with the explicit delegate), replays the self-test, times infer
    and a train step of the given selection."""
    import os

    if spec.get("cpu") is not None:
        os.sched_setaffinity(0, {spec["cpu"]})
    sys.path.insert(0, str(ROOT))
    import tflite_train.runtime.interpreter as interp
    from tflite_train.runtime import TrainableModel
    from tflite_train.runtime.selftest import verify

    if spec["mode"] == "xnnpack":
        cls = _interpreter_with_xnnpack()
        interp.load_interpreter_class = lambda preferred=None: (cls, "tflite_runtime.interpreter+XNNPACK")
    elif spec["mode"] == "no_default_delegates":
        base = interp.load_interpreter_class()[0]
        module = sys.modules[base.__module__]

        class Plain(base):
            def __init__(self, **kwargs):
                super().__init__(experimental_op_resolver_type=module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                                 **kwargs)

        interp.load_interpreter_class = lambda preferred=None: (Plain, base.__module__ + " (no default delegates)")
    if spec.get("infer_only"):
        return _infer_only(spec, interp.load_interpreter_class()[0])
    try:
        model = TrainableModel(spec["model"], num_threads=1)
    except RuntimeError as err:
        return {"runtime": spec["mode"], "error": f"RuntimeError {err}".strip()}
    passed = verify(spec["model"]).passed
    x = np.random.default_rng(0).uniform(size=(1, *model.input_shape)).astype(np.float32)
    model.set_head(np.random.default_rng(1).normal(size=(5, model.feature_dim)))
    model.set_selection({n: np.asarray(c) for n, c in spec["selection"].items()})
    out = {"runtime": model.runtime, "selftest_passed": passed}
    for name, fn in (("infer", lambda: model.infer(x)), ("train_step", lambda: model.train_step(x, np.zeros(1, np.int64)))):
        for _ in range(3):
            fn()
        times = []
        start = time.perf_counter()
        while len(times) < spec["repeats"] and (time.perf_counter() - start < spec["max_seconds"] or len(times) < 10):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[name] = 1e3 * statistics.median(times)
    return out


def _timed_ms(fn, repeats: int, max_seconds: float) -> float:
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeats and (time.perf_counter() - start < max_seconds or len(times) < 10):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def _infer_only(spec: dict, interpreter_cls) -> dict:
    """Times ``infer`` of a file with that signature alone (no metadata: a bare interpreter)."""
    try:
        interpreter = interpreter_cls(model_path=spec["model"], num_threads=1)
    except RuntimeError as err:
        return {"runtime": spec["mode"], "error": f"RuntimeError {err}".strip()}
    runner = interpreter.get_signature_runner("infer")
    shape = runner.get_input_details()["images"]["shape_signature"]
    x = np.random.default_rng(0).uniform(size=(1, *shape[1:])).astype(np.float32)
    return {"runtime": spec["mode"], "infer": _timed_ms(lambda: runner(images=x), spec["repeats"], spec["max_seconds"]),
            "train_step": float("nan"), "selftest_passed": None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="mcunet")
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--weights", default=str(ROOT / "weights/mcunet_64_meta.weights.h5"))
    parser.add_argument("--candidate-blocks", type=int, default=6)
    parser.add_argument("--selection", default=None, help="JSON {layer: [channels]} (default: b13_depthwise, 1/4)")
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
    from converters.export import ensure_export
    from converters.fixtures import trained_config

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = trained_config(pathlib.Path(args.weights), (args.input_size, args.input_size),
                            candidate_blocks=args.candidate_blocks, train_variants=4)
    files = {"as exported (int32 num_classes)": out_dir / f"contract_k{args.candidate_blocks}.tflite",
             "float32 num_classes": out_dir / f"contract_k{args.candidate_blocks}_f32count.tflite"}
    files["infer signature alone"] = out_dir / f"infer_only_k{args.candidate_blocks}.tflite"
    ensure_export(config, files["as exported (int32 num_classes)"])
    if not files["float32 num_classes"].exists():
        export_float_count(config, files["float32 num_classes"])
    if not files["infer signature alone"].exists():
        export_infer_only(config, files["infer signature alone"])
    selection = json.loads(args.selection) if args.selection else None
    runs = [("ai-edge-litert, default", sys.executable, "default"),
            ("tflite-runtime 2.14, default (AUTO)", args.pi_python, "default"),
            ("tflite-runtime 2.14, BUILTIN_WITHOUT_DEFAULT_DELEGATES", args.pi_python, "no_default_delegates"),
            ("tflite-runtime 2.14, explicit XNNPACK", args.pi_python, "xnnpack")]
    print(f"{'file':<32} {'runtime':<56} {'infer ms':>9} {'step ms':>9}  self-test")
    from tflite_train.runtime import read_metadata

    meta = read_metadata(files["as exported (int32 num_classes)"])
    channels = {layer["name"]: layer["out_channels"] for layer in meta["layers"]}
    chosen = selection or {"b13_depthwise": list(range(channels["b13_depthwise"] // 4))}
    for label, path in files.items():
        for name, python, mode in runs:
            spec = {"model": str(path), "mode": mode, "selection": chosen, "repeats": args.repeats,
                    "max_seconds": args.max_seconds, "cpu": args.cpu, "infer_only": label == "infer signature alone"}
            done = subprocess.run([python, "-m", "bench.tflite_runtime_fastpath", "--worker", json.dumps(spec)],
                                  cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
            if done.returncode:
                raise RuntimeError(done.stderr[-3000:])
            r = json.loads(done.stdout.strip().splitlines()[-1])
            if "error" in r:
                print(f"{label:<32} {name:<56} {'delegate application failed: ' + r['error']}", flush=True)
            else:
                check = {True: "PASSED", False: "FAILED", None: "-"}[r["selftest_passed"]]
                print(f"{label:<32} {name:<56} {r['infer']:9.2f} {r['train_step']:9.2f}  {check}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
