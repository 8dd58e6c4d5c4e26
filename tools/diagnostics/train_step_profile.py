"""Profile of the TinyTrain ``train_step`` on ai-edge-litert: where the step time goes, by part.

LiteRT's Python API has no op profiler, so the step is taken apart two ways, in one run:

1. **Export decomposition** (the real export, the real selection): ``infer``; ``train_step`` with no
   channel selected (forward + head + loss, every gated IF not taken); then the selected layers
   added one at a time from the top down. Each row's increment is that layer's update (weight
   gradient + optimizer step, in its IF) plus the input gradients between it and the layer above
   (the runtime picks the shallowest depth-specific train signature that reaches the layers).
   ``--before`` times a second export the same way, side by side (e.g. the same config exported by
   older code: ``git archive <commit> | tar -x -C <dir>`` and ``ensure_export`` with that ``PYTHONPATH``).
2. **Parts at the layers' real shapes** (single-op models built with TensorFlow from the
   converter's own op code, EfficientNet-Lite0@128: 1x1 192->1152 and 320->1280 at 4x4, 5x5
   depthwise of 1152 channels at 4x4): the update split into weight gradient, optimizer step and
   channel merge, each formulation the exporter used before beside the one it uses now, and the
   input gradient of a 1x1 conv on a variable kernel beside a constant one.

``--decompose-only`` times part 1 alone, on whatever interpreter the environment has: in the Pi env
(tflite-runtime 2.14, no TensorFlow) it profiles the step on 2.14 with its explicit XNNPACK delegate,
as the peer bench runs it::

    PYTHONPATH=$PWD .venv-pi/bin/python -m tools.diagnostics.train_step_profile --decompose-only \\
        --out bench/results/TRAIN_STEP_PROFILE_tflite_runtime.md

One command (main env: TensorFlow builds the single-op models, ai-edge-litert times them)::

    PYTHONPATH=$PWD .venv/bin/python -m tools.diagnostics.train_step_profile \\
        --model build/peer/models/efficientnet_lite0_128_sparse_k6.tflite \\
        --before build/prof/before_main/efficientnet_lite0_128_sparse_k6.tflite \\
        --out bench/results/TRAIN_STEP_PROFILE.md

The selection and inputs are the Lite0 peer bench's (``bench/results/PEER_ORT_lite0.json``,
``build/peer/efficientnet_lite0_128/inputs.npz``: run ``bench.peer_ort`` for Lite0 first). Batch 1,
one thread, pinned to CPU 0, medians of up to ``--repeats`` calls, the lowest of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import numpy as np

from bench.call_timing import median_seconds
from bench.table_output import markdown_table
from bench.worker_process import ROOT
from tflite_train import contract as C

B1, B2, EPS = 0.9, 0.999, 1e-8
POINTWISE = {"exp4": (4, 192, 1152), "final4": (4, 320, 1280), "proj4": (4, 1152, 192)}
"""name: (spatial size, C_in, C_out) of a 1x1 conv of EfficientNet-Lite0@128."""
DEPTHWISE = {"dw4": (4, 1152, 5)}
"""name: (spatial size, channels, kernel size) of a depthwise conv."""
UPDATE_VARIANTS = {
    "wgrad": "weight gradient only (assigned to a variable)",
    "adam_select": "weight gradient + Adam on whole tensors + SELECT_V2 merge (before)",
    "adam_masked": "weight gradient + masked Adam, mask in the coefficients (now)",
    "adam_nomerge": "weight gradient + Adam on whole tensors, no merge (lower bound)",
}
INPUT_GRAD_VARIANTS = {
    "ig_fc_var": "FULLY_CONNECTED on the variable kernel (before)",
    "ig_bmm_t_var": "transposed BATCH_MATMUL on the variable kernel (now)",
    "ig_fc_const": "FULLY_CONNECTED on a constant kernel (a frozen layer)",
}


def _convert(module, fns) -> bytes:
    from tflite_train.converters.export import convert_saved_module  # TensorFlow: imported only when building part 2

    return convert_saved_module(module, {k: f.get_concrete_function() for k, f in fns.items()})


def build_parts(out: pathlib.Path) -> None:
    """Writes the single-op models of part 2 into ``out`` (needs TensorFlow)."""
    import tensorflow as tf

    from tflite_train.converters.export_config import ExportConfig
    from tflite_train.converters.ops import conv
    from tflite_train.converters.optimizer_update import masked_optimizer_step

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    config = ExportConfig(optimizer="adam")

    def adam_whole(cur, grad, lr, t):  # the exporter's previous formulation
        m = B1 * cur[1] + (1.0 - B1) * grad
        v = B2 * cur[2] + (1.0 - B2) * grad * grad
        m_hat, v_hat = m / (1.0 - tf.pow(B1, t)), v / (1.0 - tf.pow(B2, t))
        return [cur[0] - lr * m_hat / (tf.sqrt(v_hat) + EPS), m, v]

    layers = {name: ("pw", s, cin, cout, 1) for name, (s, cin, cout) in POINTWISE.items() if name != "proj4"}
    layers.update({name: ("dw", s, c, c, k) for name, (s, c, k) in DEPTHWISE.items()})
    for name, (kind, s, cin, cout, k) in layers.items():
        kshape = [1, 1, cin, cout] if kind == "pw" else [k, k, cout, 1]
        spec = [tf.TensorSpec([None, s, s, cin], tf.float32), tf.TensorSpec([None, s, s, cout], tf.float32)]
        for variant in UPDATE_VARIANTS:
            m = tf.Module()
            m.w = [tf.Variable(rng.standard_normal(kshape).astype(np.float32)) for _ in range(3)]
            m.b = [tf.Variable(np.zeros([cout], np.float32)) for _ in range(3)]
            m.mask = tf.Variable((np.arange(cout) % 4 == 0).astype(np.float32))
            m.t, m.lr = tf.Variable([1.0]), tf.Variable([1e-3])

            @tf.function(input_signature=spec)
            def step(x, g, m=m, kind=kind, variant=variant, s=s, k=k):
                if kind == "pw":
                    dw, db = conv.conv2d_weight_grad(x, g, (s, s), (s, s), (1, 1), (1, 1), "same")
                else:
                    dw, db = conv.depthwise_weight_grad(x, g, (s, s), (s, s), (k, k), (1, 1), "same")
                if variant == "wgrad":
                    m.w[1].assign(dw)
                    m.b[1].assign(db)
                    return {"ok": tf.constant(1)}
                sel = m.mask > 0.5
                mask = tf.cast(sel, tf.float32)
                for variables, grad, is_kernel in ((m.w, dw, True), (m.b, db, False)):
                    cur = [v.read_value() for v in variables]
                    if variant == "adam_masked":
                        where = tf.reshape(mask, [-1, 1]) if kind == "dw" and is_kernel else mask
                        new = masked_optimizer_step(config, cur, grad, where, m.lr, m.t)
                    else:
                        new = adam_whole(cur, grad, m.lr, m.t)
                        if variant == "adam_select":
                            where = tf.reshape(sel, [1, 1, -1, 1]) if kind == "dw" and is_kernel else sel
                            new = [tf.where(where, n, c) for n, c in zip(new, cur)]
                    for v, value in zip(variables, new):
                        v.assign(value)
                return {"ok": tf.constant(1)}

            (out / f"{name}_{variant}.tflite").write_bytes(_convert(m, {"step": step}))
    for name, (s, cin, cout) in POINTWISE.items():
        k0 = rng.standard_normal([1, 1, cin, cout]).astype(np.float32)
        for variant in INPUT_GRAD_VARIANTS:
            m = tf.Module()
            m.w = tf.Variable(k0)

            def input_grad_fn(m, variant, s, k0):
                @tf.function(input_signature=[tf.TensorSpec([None, s, s, k0.shape[-1]], tf.float32)])
                def grad(g):
                    kernel = tf.constant(k0) if variant == "ig_fc_const" else m.w
                    return {"gx": conv.conv2d_input_grad(g, kernel, (s, s), (s, s), (1, 1), (1, 1), "same",
                                                         kernel_is_variable=(variant == "ig_bmm_t_var"))}
                return grad

            grad = input_grad_fn(m, variant, s, k0)

            @tf.function(input_signature=[tf.TensorSpec([1, 1, cin, cout], tf.float32)])
            def set_w(w, m=m):
                m.w.assign(w)
                return {"ok": tf.constant(1)}

            (out / f"{name}_{variant}.tflite").write_bytes(_convert(m, {"step": grad, "set_w": set_w}))


def _median_us(fn, repeats: int, rounds: int) -> float:
    """Lowest over ``rounds`` of the median µs of up to ``repeats`` calls (1.5 s per round at most)."""
    return min(median_seconds(fn, repeats, 1.5, warm_up=5, min_calls=1)[0] for _ in range(rounds)) * 1e6


def time_parts(models: pathlib.Path, repeats: int, rounds: int) -> dict[str, float]:
    """µs per call of every single-op model in ``models`` (ai-edge-litert, 1 thread)."""
    from ai_edge_litert.interpreter import Interpreter

    out = {}
    rng = np.random.default_rng(0)
    for path in sorted(models.glob("*.tflite")):
        runner = Interpreter(model_path=str(path), num_threads=1).get_signature_runner("step")
        args = {k: rng.standard_normal(v["shape"]).astype(np.float32) for k, v in runner.get_input_details().items()}
        out[path.stem] = _median_us(lambda: runner(**args), repeats, rounds)
        print(f"{path.stem:28s} {out[path.stem]:9.1f} us", flush=True)
    return out


def decompose(model_path: pathlib.Path, selection: dict, inputs: dict, repeats: int, rounds: int) -> tuple[str, list[dict]]:
    """The interpreter's module name, and rows (label, signature, ms) of ``infer``, the empty step and the
    cumulative selections, top down."""
    from tflite_train.runtime import TrainableModel

    model = TrainableModel(str(model_path), num_threads=1, xnnpack=True)
    images, labels = inputs["image"], inputs["label"].astype(np.int64)
    rows = []

    def prepare(chosen: dict) -> None:
        model.reset_state()
        model.set_head(inputs[C.PROTOTYPES])
        model.set_selection({n: np.asarray(c) for n, c in chosen.items()})

    prepare({})
    rows.append({"part": "infer", "signature": "infer",
                 "ms": _median_us(lambda: model.infer(images), repeats, rounds) / 1e3})
    order = list(selection)[::-1]
    for k in range(len(order) + 1):
        prepare({n: selection[n] for n in order[:k]})
        ms = _median_us(lambda: model.train_step(images, labels), repeats, rounds) / 1e3
        rows.append({"part": f"+ {order[k - 1]}" if k else "train_step, nothing selected",
                     "signature": model.train_signature(), "ms": ms})
        print(f"{rows[-1]['part']:34s} {ms:7.2f} ms", flush=True)
    return model.runtime, rows


def render(result: dict) -> str:
    """The Markdown report."""
    runtime = result.get("runtime", "ai_edge_litert")
    on = "ai-edge-litert" if runtime.startswith("ai_edge_litert") else f"`{runtime}` with its explicit XNNPACK delegate"
    lines = [f"# Train-step profile: EfficientNet-Lite0@128 TinyTrain step on {on}", "",
             f"Command: `{result['command']}`", "",
             f"Machine: load average {result['load'][0]:.2f} (start) / {result['load'][1]:.2f} (end), 2 cores shared "
             "with other jobs; batch 1, one thread, pinned to CPU 0; medians, lowest of "
             f"{result['rounds']} rounds. Compare figures within this run only.", "",
             "## 1. The step, decomposed (export, the Lite0 peer bench's selection, added top down)", "",
             "Increment = the layer's update IF (weight gradient + optimizer step) + the input gradients between "
             "it and the layer above.", ""]
    exports = result["exports"]
    header = ["part", "signature", *(f"{k} {what}" for k in exports for what in ("ms", "increment", "share of step"))]
    table = []
    n = len(next(iter(exports.values())))
    for i in range(n):
        row = next(iter(exports.values()))[i]
        cells = [row["part"], f"`{row['signature']}`"]
        for rows in exports.values():
            total = rows[-1]["ms"]
            ms = rows[i]["ms"]
            inc = ms - rows[i - 1]["ms"] if i >= 2 else ms if i == 1 else None
            cells += [f"{ms:.2f}", f"{inc:.2f}" if inc is not None else "", f"{inc / total:.0%}" if inc is not None
                      else ""]
        table.append(cells)
    lines += markdown_table(header, table)
    parts = result["parts"]
    if parts is None:
        return "\n".join([*lines, ""])

    def variant_table(names, variants: dict[str, str]) -> list[str]:
        rows = ([name, *(f"{parts[f'{name}_{v}']:.0f}" for v in variants)] for name in names)
        return [*markdown_table(("layer", *variants), rows), "", *[f"- `{k}`: {v}" for k, v in variants.items()], ""]

    lines += ["", "## 2. Parts at the layers' real shapes (single-op models, µs)", "",
              "Update of one layer (x, g_z given; kernel, bias and both Adam slots are variables; 1/4 of the "
              "channels selected):", "",
              *variant_table([*[n for n in POINTWISE if n != "proj4"], *DEPTHWISE], UPDATE_VARIANTS),
              "Input gradient of a 1x1 conv (g_z given):", "", *variant_table(POINTWISE, INPUT_GRAD_VARIANTS)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=pathlib.Path,
                        default=ROOT / "build/peer/models/efficientnet_lite0_128_sparse_k6.tflite")
    parser.add_argument("--before", type=pathlib.Path, default=None, help="a second export timed side by side")
    parser.add_argument("--peer-json", type=pathlib.Path, default=ROOT / "bench/results/PEER_ORT_lite0.json")
    parser.add_argument("--inputs", type=pathlib.Path, default=ROOT / "build/peer/efficientnet_lite0_128/inputs.npz")
    parser.add_argument("--parts-dir", type=pathlib.Path, default=ROOT / "build/train_step_profile")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--decompose-only", action="store_true",
                        help="part 1 only, on this environment's interpreter (no TensorFlow needed: the Pi env)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench/results/TRAIN_STEP_PROFILE.md")
    args = parser.parse_args(argv)
    for path, flag in ((args.model, "--model"), (args.peer_json, "--peer-json"), (args.inputs, "--inputs")):
        if not path.is_file():
            parser.error(f"{flag}: {path} does not exist (run bench.peer_ort for efficientnet_lite0 first)")
    if not args.decompose_only:
        build_parts(args.parts_dir)
    os.sched_setaffinity(0, {args.cpu})
    load_start = os.getloadavg()[0]
    selection = json.loads(args.peer_json.read_text())["selection"]
    inputs = dict(np.load(args.inputs))
    exports = {}
    if args.before is not None:
        _, exports["before"] = decompose(args.before, selection, inputs, args.repeats, args.rounds)
    runtime, exports["now"] = decompose(args.model, selection, inputs, args.repeats, args.rounds)
    parts = None if args.decompose_only else time_parts(args.parts_dir, args.repeats, args.rounds)
    argv_text = " ".join(argv) if argv is not None else " ".join(os.sys.argv[1:])
    result = {"command": f"python -m tools.diagnostics.train_step_profile {argv_text}".strip(), "runtime": runtime,
              "rounds": args.rounds,
              "load": (load_start, os.getloadavg()[0]), "exports": exports, "parts": parts}
    args.out.write_text(render(result))
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
