"""Property-based: a baked classifier's metadata, generated from a valid one, never crashes the loader.

Mutations of a real baked file's metadata (``test_fuzz_headers``' strategies: well typed, ill typed) and raw
bytes go through ``check_baked_metadata`` and, when it accepts them, ``check_baked_graph`` against the
file's graph. The property: the metadata, or a ``BakedModelError`` of one line naming the file; never
another exception. Example counts: ``fuzz_profiles``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.runtime.fuzz_profiles import examples
from tests.runtime.runtime_fixtures import episode_arrays, fixture_model
from tests.runtime.model.test_fuzz_headers import JSON, ill_typed, well_typed
from tflite_train import contract as C
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.baked.baked_classifier import BakedModelError, check_baked_graph, check_baked_metadata
from tflite_train.runtime.baked.baked_model import bake_classifier
from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
from tflite_train.runtime.model.metadata import read_metadata_buffers

pytestmark = pytest.mark.pi

SOURCE = "c.tflite"


@pytest.fixture(scope="module")
def baked(fashion, tmp_path_factory) -> tuple[bytes, dict]:
    """(bytes, metadata) of the tiny fixture baked with a prototypes-only checkpoint."""
    model = TrainableModel(fixture_model("tiny_adam_33"))
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=2, queries=1, seed=1)
    result = adapt(model, xs, ys, AdaptConfig(policy="none", iterations=0))
    path = tmp_path_factory.mktemp("fuzz") / "c.ckpt"
    save_checkpoint(path, model, result.selection, class_names=("a", "b", "c"))
    data = bake_classifier(fixture_model("tiny_adam_33").read_bytes(), path.read_bytes())
    return data, json.loads(read_metadata_buffers(data)[C.BAKED_METADATA_NAME])


def _property(data: bytes, raw: bytes) -> None:
    try:
        check_baked_graph(data, check_baked_metadata(raw, SOURCE), SOURCE)
    except BakedModelError as err:
        assert str(err).startswith(f"{SOURCE}: ") and "\n" not in str(err)


@examples(150)
@given(data=st.data())
def test_fuzz_baked_metadata_well_typed(baked, data):
    _property(baked[0], json.dumps(data.draw(well_typed(baked[1]))).encode())


@examples(150)
@given(data=st.data())
def test_fuzz_baked_metadata_ill_typed(baked, data):
    _property(baked[0], json.dumps(data.draw(ill_typed(baked[1]))).encode())


@examples(100)
@given(raw=st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()))
def test_fuzz_baked_metadata_raw_bytes(baked, raw):
    _property(baked[0], raw)


def test_the_unchanged_metadata_is_accepted(baked):
    data, metadata = baked
    assert check_baked_metadata(json.dumps(metadata).encode(), SOURCE) == metadata
    check_baked_graph(data, metadata, SOURCE)
