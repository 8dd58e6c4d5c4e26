"""The trainable ``.tflite`` contract (CONTRACT.md): the single source of every signature name, its
inputs and outputs, the state it reads and writes, the metadata field names, the format version and
the checkpoint format.

Stdlib only: the exporter (TensorFlow), the on-device runtime (numpy + an interpreter) and the
golden generators all import it; nothing else spells a signature, tensor, metadata or checkpoint
name (``tests/contract/test_contract_spelling.py``). The Java core reads the same names from the generated
``org.tflitetrain.core.model.Contract`` (:func:`java_source`).

Modules, by concept: :mod:`~tflite_train.contract.signatures` (signatures, tensors, state),
:mod:`~tflite_train.contract.metadata_schema` (metadata entries and fields),
:mod:`~tflite_train.contract.checkpoint_format` (checkpoint header),
:mod:`~tflite_train.contract.baked_format` (the baked classifier of ``tflite-train bake``),
:mod:`~tflite_train.contract.validation` (version rule, graph vs. metadata),
:mod:`~tflite_train.contract.protocol_constants` (the default adaptation protocol's numbers for Java,
read from ``tflite_train.runtime.adaptation.protocol`` only when asked for),
:mod:`~tflite_train.contract.strict_json` (the JSON both sides read: duplicate keys and NaN refused),
:mod:`~tflite_train.contract.rendering` (CONTRACT.md tables, Contract.java). Every public name is
re-exported here and read as ``contract.NAME``.
"""

from tflite_train.contract import (
    baked_format,
    checkpoint_format,
    errors,
    metadata_schema,
    protocol_constants,
    rendering,
    signatures,
    strict_json,
    validation,
)
from tflite_train.contract.baked_format import *  # noqa: F403 (names listed in its __all__)
from tflite_train.contract.checkpoint_format import *  # noqa: F403
from tflite_train.contract.errors import *  # noqa: F403
from tflite_train.contract.metadata_schema import *  # noqa: F403
from tflite_train.contract.protocol_constants import *  # noqa: F403
from tflite_train.contract.rendering import *  # noqa: F403
from tflite_train.contract.signatures import *  # noqa: F403
from tflite_train.contract.strict_json import *  # noqa: F403
from tflite_train.contract.validation import *  # noqa: F403

__all__ = [*signatures.__all__, *metadata_schema.__all__, *checkpoint_format.__all__,
           *baked_format.__all__, *errors.__all__,
           *validation.__all__, *protocol_constants.__all__, *rendering.__all__, *strict_json.__all__]
