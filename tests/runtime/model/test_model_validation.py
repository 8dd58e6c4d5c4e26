"""A model whose metadata lies about its graph is refused on load, naming the field (Pi env too)."""

from __future__ import annotations


import pytest

from tflite_train.runtime.model.integrity import seal
from tests.runtime.model_edits import EDITS, edited, rewrite_in_place
from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.contract import ContractError
from tflite_train.runtime import TrainableModel, read_metadata
from tflite_train.runtime.model.metadata import read_signature_defs


@pytest.mark.parametrize("name", ["tiny_adam_33", "byo_plain_cnn_23"])
def test_exported_models_pass_validation_and_every_signature_has_an_input(name):
    path = fixture_model(name)
    model = TrainableModel(path)
    graph = read_signature_defs(path.read_bytes())
    assert set(graph) == set(model.metadata["signatures"])
    assert all(sig["inputs"] for sig in graph.values())
    model.reset_state()
    assert model.get_state()["num_classes"] == 0


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edited_metadata_is_refused_naming_the_field(edit, tmp_path):
    data = fixture_model("tiny_adam_33").read_bytes()
    meta = read_metadata(data)
    new, message = edited(meta, edit)
    path = tmp_path / "edited.tflite"
    path.write_bytes(seal(rewrite_in_place(data, meta, new)))  # intact file, lying metadata
    assert read_metadata(path.read_bytes()) == {k: v for k, v in new.items() if k != "config"}
    with pytest.raises(ContractError, match=message):
        TrainableModel(path)
