"""Why ``infer`` is slower on tflite-runtime 2.14 than on ai-edge-litert for the same file, and a fix.

Findings (evidence: the table this script writes; minimal repro models described below):

1. Cause of the gap: tflite-runtime 2.14's pip wheel never applies its default XNNPACK delegate.
   ``infer`` times the same with ``experimental_op_resolver_type`` AUTO and
   BUILTIN_WITHOUT_DEFAULT_DELEGATES (also on a one-conv model without variables), and the "Created
   TensorFlow Lite XNNPACK delegate" line is never logged, although the wheel's
   ``_pywrap_tensorflow_interpreter_wrapper.so`` contains XNNPACK and exports
   ``TfLiteXNNPackDelegateCreate``. ai-edge-litert applies it by default. Every op of every
   signature therefore runs on 2.14's builtin kernels, whatever the export looks like: no export
   change alone gives 2.14 the fast path.
2. The delegate can be created explicitly (``XnnpackDelegate``: ctypes on that library) and passed
   as ``experimental_delegates``: on a file holding the ``infer`` signature alone, 2.14 then runs
   ``infer`` on XNNPACK (row "infer signature alone"). On the exported contract,
   ``ModifyGraphWithDelegate`` fails (RuntimeError, no message). Bisected by converting subsets of
   signatures of the ``tiny_adam_33`` fixture module, and on minimal models:
   * any signature that updates a rank-0 (scalar) resource variable through an op (``num_classes``
     assigned from an input or constant int32, ``step.assign_add(1.0)``) makes it fail; the same
     variables with shape [1] do not. Prototype (``rank1_state_module``: ``num_classes``, ``step``,
     ``learning_rate`` as shape-[1] variables, signatures' scalar inputs/outputs unchanged, self-test
     passes): with it, ``infer`` plus any one other signature accepts the delegate;
   * still failing with rank-1 state: ``set_selection`` together with the general ``train_step``
     (live mask variables, so the per-layer IF-gated gathered updates are not folded away); each of
     the two alone with ``infer`` passes, and a minimal model with a live mask and an IF does not
     reproduce it. Not isolated further in this session.
3. So the Pi's runtime gets the fast path only with a runtime-side change (create the delegate
   explicitly, as ``XnnpackDelegate`` does) plus export changes: rank-1 scalar state (shown) and
   whatever in the IF-gated sparse ``train_step`` still blocks the delegate (open). Until then, a
   workable split is an infer-only companion graph for inference-heavy use on 2.14, or LiteRT.

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

from tflite_train import contract as C

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
SCALAR_STATE = (C.NUM_CLASSES, C.STEP, C.LEARNING_RATE)


class _Rank1Step:
    """A shape-[1] variable that takes scalar ``assign``/``assign_add`` and reads as a tensor."""

    def __init__(self, var) -> None:
        self.var = var

    @property
    def dtype(self):
        return self.var.dtype

    def assign(self, value):
        import tensorflow as tf

        return self.var.assign(tf.reshape(tf.cast(value, self.var.dtype), [1]))

    def assign_add(self, delta):
        import tensorflow as tf

        return self.var.assign_add(tf.reshape(tf.cast(delta, self.var.dtype), [1]))


def _register_step_conversion() -> None:
    import tensorflow as tf

    tf.register_tensor_conversion_function(
        _Rank1Step, lambda value, dtype=None, name=None, as_ref=False: tf.convert_to_tensor(value.var, dtype=dtype, name=name))


def rank1_state_module(config, folded):
    """The ``TrainableModule`` of ``config`` with its scalar state (``num_classes``, ``step``,
    ``learning_rate``) held in shape-[1] variables: the prototype of the export change. The signatures
    keep their scalar inputs and outputs (reshaped on assign and on read), so the contract is unchanged."""
    import tensorflow as tf

    from converters import trainable_module as tm

    _register_step_conversion()
    original_add = tm.TrainableModule._add_var

    def add_var(self, name, value):
        if name in SCALAR_STATE:
            self._initial[name] = np.array(value)
            self._vars[name] = tf.Variable(np.reshape(value, [1]), name=name, trainable=False)
        else:
            original_add(self, name, value)

    tm.TrainableModule._add_var = add_var
    try:
        from converters.build_module import module_from_backbone

        module = module_from_backbone(config, folded)
    finally:
        tm.TrainableModule._add_var = original_add
    module._vars["step"] = _Rank1Step(module._vars["step"])  # train_step's step.assign_add(1.0)
    names, v = module.names, module._vars
    k, d = config.class_capacity, module.feature_dim

    def put(n, value):
        return v[n].assign(tf.reshape(tf.cast(value, v[n].dtype), [1]) if n in SCALAR_STATE else value)

    @tf.function(input_signature=[tf.TensorSpec([k, d], tf.float32, name=C.PROTOTYPES),
                                  tf.TensorSpec([], tf.int32, name=C.NUM_CLASSES)])
    def set_head(prototypes, num_classes):
        put(C.PROTOTYPES, prototypes)
        put(C.NUM_CLASSES, num_classes)
        return {C.OK: tf.constant(1, tf.int32)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name=C.LEARNING_RATE)])
    def set_hparams(learning_rate):
        put(C.LEARNING_RATE, learning_rate)
        return {C.OK: tf.constant(1, tf.int32)}

    @tf.function(input_signature=[])
    def get_state():
        return {n: tf.reshape(v[n], []) if n in SCALAR_STATE else tf.identity(v[n]) for n in names}

    specs = [tf.TensorSpec(module._initial[n].shape, module._initial[n].dtype, name=n) for n in names]

    @tf.function(input_signature=specs)
    def set_state(*values):
        for n, value in zip(names, values):
            put(n, value)
        return {"ok": tf.constant(1, tf.int32)}

    @tf.function(input_signature=[])
    def reset_state():
        for n in names:
            put(n, tf.constant(module._initial[n]))
        return {"ok": tf.constant(1, tf.int32)}

    module.set_head, module.set_hparams, module.get_state = set_head, set_hparams, get_state
    module.set_state, module.reset_state = set_state, reset_state
    return module


def export_infer_only(config, out: pathlib.Path) -> None:
    """Converts the ``infer`` signature alone of ``config``'s module (variables kept, no metadata)."""
    import tempfile

    import tensorflow as tf

    from converters.build_module import folded_backbone, module_from_backbone

    module = module_from_backbone(config, folded_backbone(config))
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={C.INFER: module.infer.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.experimental_enable_resource_variables = True
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        out.write_bytes(converter.convert())


def export_rank1_state(config, out: pathlib.Path) -> None:
    """Exports ``config`` through the normal path with rank-1 scalar state (monkeypatched builder)."""
    import converters.export as export

    original = export.module_from_backbone
    export.module_from_backbone = rank1_state_module
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
    for name, fn in ((C.INFER, lambda: model.infer(x)), (C.TRAIN_STEP, lambda: model.train_step(x, np.zeros(1, np.int64)))):
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
    runner = interpreter.get_signature_runner(C.INFER)
    shape = runner.get_input_details()[C.IMAGES]["shape_signature"]
    x = np.random.default_rng(0).uniform(size=(1, *shape[1:])).astype(np.float32)
    return {"runtime": spec["mode"], C.INFER: _timed_ms(lambda: runner(images=x), spec["repeats"], spec["max_seconds"]),
            C.TRAIN_STEP: float("nan"), "selftest_passed": None}


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
    parser.add_argument("--out", default="bench/results/TFLITE_RUNTIME_FASTPATH.md")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    import os

    from converters.export import ensure_export
    from converters.fixtures import trained_config

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = trained_config(pathlib.Path(args.weights), (args.input_size, args.input_size),
                            candidate_blocks=args.candidate_blocks, train_variants=4)
    files = {"as exported": out_dir / f"contract_k{args.candidate_blocks}.tflite",
             "scalar state as shape [1]": out_dir / f"contract_k{args.candidate_blocks}_rank1state.tflite"}
    files["infer signature alone"] = out_dir / f"infer_only_k{args.candidate_blocks}.tflite"
    ensure_export(config, files["as exported"])
    if not files["scalar state as shape [1]"].exists():
        export_rank1_state(config, files["scalar state as shape [1]"])
    if not files["infer signature alone"].exists():
        export_infer_only(config, files["infer signature alone"])
    selection = json.loads(args.selection) if args.selection else None
    runs = [("ai-edge-litert, default", sys.executable, "default"),
            ("tflite-runtime 2.14, default (AUTO)", args.pi_python, "default"),
            ("tflite-runtime 2.14, BUILTIN_WITHOUT_DEFAULT_DELEGATES", args.pi_python, "no_default_delegates"),
            ("tflite-runtime 2.14, explicit XNNPACK", args.pi_python, "xnnpack")]
    header = f"{'file':<32} {'runtime':<56} {'infer ms':>9} {'step ms':>9}  self-test"
    print(header)
    table = [header]
    load = os.getloadavg()[0]
    from tflite_train.runtime import read_metadata

    meta = read_metadata(files["as exported"])
    channels = {layer["name"]: layer["out_channels"] for layer in meta[C.F_LAYERS]}
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
                line = f"{label:<32} {name:<56} {'delegate application failed: ' + r['error']}"
            else:
                check = {True: "PASSED", False: "FAILED", None: "-"}[r["selftest_passed"]]
                line = f"{label:<32} {name:<56} {r[C.INFER]:9.2f} {r[C.TRAIN_STEP]:9.2f}  {check}"
            print(line, flush=True)
            table.append(line)
    findings = __doc__.split("Run (needs")[0].split("minimal repro models described below):")[1]
    text = "\n".join([
        f"# tflite-runtime 2.14 vs ai-edge-litert: `infer` fast path ({args.backbone}@{args.input_size})", "",
        "Command: `python -m bench.tflite_runtime_fastpath " + " ".join(argv if argv is not None else sys.argv[1:]) + "`", "",
        f"Batch 1, one thread, medians of up to {args.repeats} calls per row (fresh process per row); train step = "
        f"the selection {', '.join(f'{n} ({len(c)} channels)' for n, c in chosen.items())}; "
        f"load average at start {load:.2f} (a shared 2-core machine: compare rows of one run).", "",
        "```", *table, "```", "", "## Findings", findings.rstrip(), ""])
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
