"""The benchmark's rows: SparseUpdate's static ranking per backbone (``bench.methods``)."""

import math

from bench.config import LITE0_128, BenchConfig, preset_config
from bench.methods import accuracy_methods, paired_methods
from tflite_train.sparse import MIT_SPARSE_UPDATE_LAYERS, SPARSE_UPDATE_CRITERION

LITE0_CANDIDATES = ("b14_expand", "b14_depthwise", "b15_expand", "b15_depthwise", "final")


def test_sparse_update_ranks_by_contribution_without_a_published_list():
    """Lite0 has no published SparseUpdate list: the static ranking is the source tasks' contribution
    (Fisher potential alone), under TinyTrain's budgets; TinyTrain keeps Eq. 3."""
    config = preset_config("powered")
    rows = {m.label: m.adapt for m in paired_methods(config, LITE0_128, 4e6, LITE0_CANDIDATES)}
    sparse, tinytrain = rows["SparseUpdate"], rows["TinyTrain"]
    assert SPARSE_UPDATE_CRITERION == "fisher"
    assert (sparse.criterion, sparse.sparse_update_layers) == ("fisher", None)
    assert (sparse.memory_bytes, sparse.compute_fraction) == (tinytrain.memory_bytes, tinytrain.compute_fraction)
    assert tinytrain.criterion == "tinytrain"
    # a built-in backbone without MIT's list (the Table 1 section's rows)
    rows = {m.label: m.adapt for m in accuracy_methods(BenchConfig(backbone="mbv2"), 4e6, ("b15_expand", "final"))
            if m.adapt is not None}
    assert rows["SparseUpdate"].criterion == "fisher" and rows["TinyTrain"].criterion == "tinytrain"


def test_sparse_update_is_mits_list_where_published():
    """MCUNet: MIT's static list, unbudgeted (the paper's row); the criterion is unused."""
    layers = MIT_SPARSE_UPDATE_LAYERS["mcunet"]
    sparse = next(m.adapt for m in accuracy_methods(BenchConfig(), 4e6, (*layers, "final"))
                  if m.label == "SparseUpdate")
    assert sparse.sparse_update_layers == layers and sparse.memory_bytes == math.inf and sparse.compute_macs is None


def test_every_policy_runs_on_both_weights_of_a_meta_trained_run():
    """The shipped default's choice between the weights rests on paired rows: each policy again on the weights
    without meta-training, from that run's own exports (FullTrain: its every-block export), at the same config."""
    from bench.methods import NONE_NO_META, PAIRED_POLICIES, no_update_row, without_meta
    from bench.models import BASELINE, BASELINE_FULL, FULL, SPARSE, model_key

    rows = {m.label: m for m in paired_methods(preset_config("powered"), LITE0_128, 4e6, LITE0_CANDIDATES)}
    assert list(rows) == [*PAIRED_POLICIES, *(without_meta(p) for p in PAIRED_POLICIES)]
    for policy in PAIRED_POLICIES:
        meta, base = rows[policy], rows[without_meta(policy)]
        assert base.adapt == meta.adapt
        full = policy == "FullTrain"
        assert (meta.model, base.model) == (model_key(LITE0_128, FULL if full else SPARSE),
                                            model_key(LITE0_128, BASELINE_FULL if full else BASELINE))
        assert no_update_row(meta.label) == "None" and no_update_row(base.label) == NONE_NO_META
