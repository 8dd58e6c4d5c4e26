"""The Markdown report of the ONNX Runtime peer bench (``bench.peer_ort``), from its result dict (pure)."""

from __future__ import annotations

from bench.table_output import markdown_table
from tflite_train import contract as C

WORKLOADS = ("infer", "tinytrain", "tinytrain_cached", "last_layer", "full")
LABELS = {"infer": "infer (ms)", "tinytrain": "TinyTrain step (ms)",
          "tinytrain_cached": "TinyTrain step from the cached cut (ms; ORT: its TinyTrain step)",
          "last_layer": "last-layer step (ms)", "full": "full step (ms)"}
ENGINES = ("ort", "litert", "tflite_runtime")
ENGINE_NAMES = {"ort": "ORT 1.19.2", "litert": "project, ai-edge-litert", "tflite_runtime": "project, tflite-runtime 2.14"}


def render(report: dict) -> str:
    """The Markdown report (pure)."""
    r, t = report, report["times_ms"]
    lines = [f"# Peer: ONNX Runtime training vs tflite-train ({r['backbone']}@{r['input_size']})", "",
             f"Command: `{r['command']}`", "",
             f"Machine: {r['machine']}, load average {r['load_average'][0]:.2f} (start) / {r['load_average'][1]:.2f} (end); batch 1, one thread"
             + (f", pinned to CPU {r['cpu']}" if r["cpu"] is not None else "")
             + f"; medians of up to {r['repeats']} calls (each workload in a fresh process), the lowest of "
             f"{r['rounds']} interleaved rounds per cell; peak RSS of that process.", "",
             f"Versions: {', '.join(f'{k} {v}' for k, v in r['versions'].items())}.", "",
             f"Selection (the project's TinyTrain policy on a {r['ways']}-way {r['shots']}-shot support set of "
             f"`{r['dataset']}`, seed {r['seed']}, B_mem {r['budget']['memory_mib']:.3f} MiB, B_compute "
             f"{r['budget']['compute']} of the full backward pass: the library's budgets): "
             + ", ".join(f"{n} ({len(c)}/{r['channels'][n]} channels)" for n, c in r["selection"].items())
             + f". ORT trains these {len(r['selection'])} layers whole (all channels). Last layer: "
             f"`{r['last_layer']}`. Full: every layer ({r['full_layers']} layers).", "",
             f"ONNX forward parity with Keras (same BN-folded weights, same cosine head): max relative difference "
             f"{r['parity'][C.EMBEDDINGS]:.2e} (embeddings), {r['parity'][C.LOGITS]:.2e} (logits).", ""]
    rss = r["peak_rss_mib"]
    lines += markdown_table(("ms", *(ENGINE_NAMES[e] for e in ENGINES)),
                            [*([LABELS[w], *(f"{t[e][w]:.2f}" for e in ENGINES)] for w in WORKLOADS),
                             *([f"peak RSS, {w} process (MiB)", *(f"{rss[e][w]:.1f}" for e in ENGINES)]
                               for w in ("infer", "tinytrain", "full"))])
    lines += ["", "The project on tflite-runtime 2.14 runs with the explicitly created XNNPACK delegate "
              "(`TrainableModel(xnnpack=True)`, batch 1 throughout; its wheel applies no delegate by default).",
              "", "Ratios (project / ORT, same run):", ""]
    lines += markdown_table(("", "ai-edge-litert", "tflite-runtime 2.14"),
                            [*([LABELS[w].replace(" (ms)", ""), f"{t['litert'][w] / t['ort'][w]:.2f}x",
                                f"{t['tflite_runtime'][w] / t['ort'][w]:.2f}x"] for w in WORKLOADS),
                             ["tflite-runtime `infer` / ai-edge-litert `infer`", "",
                              f"{t['tflite_runtime']['infer'] / t['litert']['infer']:.2f}x"]])
    lines += ["", "Project train signatures used: "
              + ", ".join(f"{w}: `{s}`" for w, s in r["signatures"].items()) + ".", "",
              "## What ORT cannot do here", "",
              "- **Channel-level selection.** ORT's `requires_grad` marks whole initializers trainable; it cannot "
              "update a subset of a layer's output channels. The TinyTrain selection above updates "
              "only the listed channels of each layer on the TFLite side (its kernels compute the weight gradient "
              "of every channel of a selected layer, faster on these runtimes than gathering the selected ones, "
              "and write the optimizer step to the listed channels only: the others keep their exact values); "
              "ORT updates every channel of those layers (more optimizer state than the budget allows).",
              "- **Changing the trainable set on the device.** The trainable set is baked into the training, "
              "eval and optimizer graphs and the checkpoint by `generate_artifacts`, which runs offline "
              "(it needs the `onnx` package and the ONNX Runtime training tooling, not the on-device API). A new "
              "support set that makes TinyTrain pick other layers or channels needs artifacts regenerated "
              "for that set and shipped to the device; the project's single `.tflite` file takes any "
              "selection at run time (`set_selection`).",
              "- ORT's artifacts here use AdamW (the ORT optimizer type closest to the project's Adam); the cosine "
              "head's prototypes are constants in both (not trained).", ""]
    return "\n".join(lines)
