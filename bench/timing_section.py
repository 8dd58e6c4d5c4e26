"""The timing section (Table 8 shape): per-policy adaptation time on one task, ``infer`` at batch 1,
and the TF-recipe peer (TF's own gradients converted with Flex ops) when configured."""

from __future__ import annotations

import time

from bench.adaptation_time import infer_seconds, time_method
from bench.config import BenchConfig
from bench.methods import timing_methods
from bench.policy_runs import Method
from bench.tasks import timing_task

__all__ = ["PEER_STEPS", "timing_section"]

PEER_STEPS = 40
"""Timed steps of the TF-recipe peer (its step time is the median)."""


def timing_section(config: BenchConfig, paths: dict, accuracy_rows: list[Method], target: str,
                    fisher_tasks: list | None) -> dict:
    task = timing_task(config, target)
    size = int(task.support.shape[0])
    rows = [time_method(m, paths[m.model], task, config.timing_runs, config.threads, fisher_tasks).to_dict()
            for m in timing_methods(config, accuracy_rows)]
    out = {"task": {"target": target, "ways": task.ways, "support": size}, "rows": rows,
           "infer_seconds_batch1": infer_seconds(paths["sparse"], task, config.threads)}
    if config.tf_recipe:
        from bench.tf_recipe import build_recipe_model, time_recipe_steps

        t0 = time.perf_counter()
        module, flex_model = build_recipe_model(config.backbone, config.input_size, config.weights, task.ways, 1,
                                                seed=config.seed)
        peer = time_recipe_steps(module, flex_model, 1, config.input_size, task.ways, PEER_STEPS,
                                 threads=config.threads, seed=config.seed)
        peer.update({"convert_seconds": time.perf_counter() - t0, "flex_model_bytes": len(flex_model), "batch_size": 1})
        out["tf_recipe"] = peer
    return out
