"""Micro-benchmark: the forward of one layer whose weights are a resource variable, per formulation.

Single-op ``.tflite`` models at the shapes of EfficientNet-Lite0@128's candidate layers (1x1 expand /
project convs at 4x4 and 8x8, the 1280-wide final conv, 5x5 depthwise), each with a variable
assigned by a second signature (so the converter keeps it a variable), timed per runtime:

* ``conv_const`` / ``dw_const``: the filter a constant (what a frozen layer is).
* ``conv_var`` / ``dw_var``: CONV_2D / DEPTHWISE_CONV_2D on the variable (the converter inserts a
  TRANSPOSE of the whole kernel before CONV_2D).
* ``bmm_var`` / ``bmm_const``: x [1, HW, C_in] x W [1, C_in, C_out] as one BATCH_MATMUL.
* ``fct_var`` / ``fct_const``: FULLY_CONNECTED on a kernel stored [C_out, C_in].
* ``cow_*``: the copy-on-write IF (dirty flag false: constant branch; ``_dirty``: variable branch).

Usage (medians of up to 2000 calls in 1.5 s, batch 1, one thread, pinned to CPU 0)::

    python -m bench.variable_weight_forward build --out build/vw          # main env (TensorFlow)
    python -m bench.variable_weight_forward time --models build/vw        # ai-edge-litert
    .venv-pi/bin/python bench/variable_weight_forward.py time --models build/vw   # tflite-runtime 2.14 + XNNPACK
                                                      # (a script: the bench package imports scipy)
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import time

import numpy as np

POINTWISE = {"exp4": (4, 192, 1152), "proj4": (4, 1152, 192), "final4": (4, 320, 1280), "exp8": (8, 112, 672),
             "proj8": (8, 672, 112)}
"""name: (spatial size, C_in, C_out) of a 1x1 conv."""
DEPTHWISE = {"dw4": (4, 1152, 5), "dw8": (8, 672, 5)}
"""name: (spatial size, channels, kernel size) of a depthwise conv."""
VARIANTS = ("conv_const", "conv_var", "bmm_var", "bmm_const", "fct_var", "fct_const", "cow_bmm", "cow_bmm_dirty",
            "cow_conv")


def build(out: pathlib.Path) -> None:
    """Writes one ``.tflite`` per (shape, variant) into ``out``."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    out.mkdir(parents=True, exist_ok=True)

    from tflite_train.converters.export import convert_saved_module

    def convert(module, fns) -> bytes:
        return convert_saved_module(module, {k: f.get_concrete_function() for k, f in fns.items()})

    def emit(name, module, forward, spec):
        def setter(v):
            module.v.assign(v)
            module.dirty.assign([True])
            return {"ok": tf.constant(1)}
        fns = {"infer": tf.function(forward, input_signature=[spec]),
               "set": tf.function(setter, input_signature=[tf.TensorSpec(module.v.shape, tf.float32, name="v")])}
        (out / f"{name}.tflite").write_bytes(convert(module, fns))

    def module(w, dirty):
        m = tf.Module()
        m.v = tf.Variable(w, trainable=False)
        m.dirty = tf.Variable([dirty], trainable=False)
        return m

    def pointwise_forward(variant, m, w, wt, h, cin, cout):
        def bmm(x, k):
            return tf.reshape(tf.linalg.matmul(tf.reshape(x, [1, -1, cin]), tf.reshape(k, [1, cin, cout])), [1, h, h, cout])

        def forward(x):
            conv = lambda k: tf.nn.conv2d(x, k, 1, "VALID")  # noqa: E731
            if variant in ("conv_const", "conv_var"):
                return {"y": conv(tf.constant(w) if variant == "conv_const" else m.v)}
            if variant in ("bmm_const", "bmm_var"):
                return {"y": bmm(x, tf.constant(w) if variant == "bmm_const" else m.v)}
            if variant in ("fct_const", "fct_var"):
                k = tf.constant(wt) if variant == "fct_const" else m.v
                return {"y": tf.reshape(tf.matmul(tf.reshape(x, [-1, cin]), k, transpose_b=True), [1, h, h, cout])}
            if variant.startswith("cow_bmm"):
                return {"y": tf.cond(m.dirty[0], lambda: bmm(x, m.v), lambda: bmm(x, tf.constant(w)))}
            return {"y": tf.cond(m.dirty[0], lambda: conv(m.v), lambda: conv(tf.constant(w)))}
        return forward

    def depthwise_forward(variant, m, w):
        def forward(x):
            dw = lambda k: tf.nn.depthwise_conv2d(x, k, [1, 1, 1, 1], "SAME")  # noqa: E731
            if variant == "cow_dw":
                return {"y": tf.cond(m.dirty[0], lambda: dw(m.v), lambda: dw(tf.constant(w)))}
            return {"y": dw(tf.constant(w) if variant == "dw_const" else m.v)}
        return forward

    for case, (h, cin, cout) in POINTWISE.items():
        w = (rng.standard_normal([1, 1, cin, cout]) * 0.05).astype(np.float32)
        wt = w.reshape(cin, cout).T.copy()
        spec = tf.TensorSpec([1, h, h, cin], tf.float32, name="x")
        for variant in VARIANTS:
            m = module(wt if variant.startswith("fct") else w, variant.endswith("dirty"))
            emit(f"{case}_{variant}", m, pointwise_forward(variant, m, w, wt, h, cin, cout), spec)

    for case, (h, c, k) in DEPTHWISE.items():
        w = (rng.standard_normal([k, k, c, 1]) * 0.05).astype(np.float32)
        spec = tf.TensorSpec([1, h, h, c], tf.float32, name="x")
        for variant in ("dw_const", "dw_var", "cow_dw"):
            m = module(w, False)
            emit(f"{case}_{variant}", m, depthwise_forward(variant, m, w), spec)


def time_models(models: pathlib.Path) -> dict[str, float]:
    """Median µs per ``infer`` call of every model in ``models`` on this environment's runtime."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        def make(path):
            return Interpreter(model_path=path, num_threads=1)
    except ImportError:
        from tflite_runtime.interpreter import Interpreter

        from tflite_train.runtime.xnnpack import XnnpackDelegate

        def make(path):
            delegate = XnnpackDelegate(1)
            interpreter = Interpreter(model_path=path, num_threads=1, experimental_delegates=[delegate])
            interpreter.delegate = delegate
            return interpreter
    os.sched_setaffinity(0, {0})
    result = {}
    for path in sorted(glob.glob(str(models / "*.tflite"))):
        name = pathlib.Path(path).stem
        interpreter = make(path)
        run = interpreter.get_signature_runner("infer")
        x = np.random.default_rng(0).standard_normal(run.get_input_details()["x"]["shape"]).astype(np.float32)
        if name.endswith("dirty"):
            setter = interpreter.get_signature_runner("set")
            shape = setter.get_input_details()["v"]["shape"]
            setter(v=np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 0.05)
        for _ in range(20):
            run(x=x)
        times, end = [], time.perf_counter() + 1.5
        while time.perf_counter() < end and len(times) < 2000:
            t0 = time.perf_counter()
            run(x=x)
            times.append(time.perf_counter() - t0)
        result[name] = float(np.median(times)) * 1e6
        print(f"{name:24s} {result[name]:9.1f} us", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build").add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/vw"))
    sub.add_parser("time").add_argument("--models", type=pathlib.Path, default=pathlib.Path("build/vw"))
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.out)
    else:
        print(f"load average {os.getloadavg()[0]:.2f}")
        time_models(args.models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
