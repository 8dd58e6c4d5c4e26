"""Validation on load of metadata re-embedded with the flatbuffer writer (main env: needs the TF schema)."""

from __future__ import annotations

import json

import pytest

from tflite_train.contract import METADATA_NAME, ContractError
from tflite_train.converters.flatbuffer_metadata import add_metadata
from tflite_train.runtime import TrainableModel, read_metadata
from tflite_train.runtime.model.integrity import seal

from tests.runtime.model_edits import EDITS, edited
from tests.runtime.runtime_fixtures import fixture_model


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_metadata_rewritten_with_add_metadata_is_refused_naming_the_field(edit, tmp_path):
    data = fixture_model("tiny_adam_33").read_bytes()
    new, message = edited(read_metadata(data), edit)
    path = tmp_path / "edited.tflite"
    path.write_bytes(seal(add_metadata(data, {METADATA_NAME: json.dumps(new).encode()})))  # intact file, lying metadata
    assert read_metadata(path.read_bytes()) == new
    with pytest.raises(ContractError, match=message):
        TrainableModel(path)
