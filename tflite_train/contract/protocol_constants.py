"""The default adaptation protocol's numbers as the Java core reads them: ``Contract.PROTOCOL_*``.

Their single source is ``tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL`` (what ``AdaptConfig()``,
``adapt`` without flags and the demo run); this module only names them for the generated
``Contract.java`` (:func:`tflite_train.contract.rendering.java_source`), whose ``AdaptationConfig.Builder``
takes its defaults from them. The protocol is imported when the constants are asked for, never when the
contract is: the contract stays stdlib-only (``tflite_train.runtime`` imports numpy).
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["ProtocolConstant", "default_protocol_constants"]


@dataclasses.dataclass(frozen=True)
class ProtocolConstant:
    """One number of the protocol under its Java name.

    Attributes:
      name: The Java constant's name (``PROTOCOL_`` + the protocol field, upper case).
      java_type: "int" or "double".
      value: An int for "int"; a float for "double" (NaN: the field is None, "the model's own").
      doc: The constant's Javadoc sentence.
    """

    name: str
    java_type: str
    value: int | float
    doc: str

    def __post_init__(self) -> None:
        kind = int if self.java_type == "int" else (int, float) if self.java_type == "double" else None
        if kind is None:
            raise ValueError(f"java_type must be 'int' or 'double'; got {self.java_type!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, kind):
            field = self.name.removeprefix("PROTOCOL_").lower()
            raise TypeError(f"DEFAULT_PROTOCOL.{field} must be {'an int' if self.java_type == 'int' else 'a number'} "
                            f"for Java's {self.java_type} {self.name}; got {self.value!r}")


def default_protocol_constants() -> tuple[ProtocolConstant, ...]:
    """The numbers of ``DEFAULT_PROTOCOL``, in field order (read at each call, so a changed protocol changes
    the generated class and ``tests/contract/test_contract.py``'s drift test fails until it is regenerated).

    Returns:
      ``PROTOCOL_EPOCHS``, ``PROTOCOL_BATCH_SIZE``, ``PROTOCOL_COMPUTE_FRACTION`` and
      ``PROTOCOL_LEARNING_RATE`` (NaN when the protocol keeps the model's own learning rate).

    Raises:
      TypeError: A protocol field is not of the type Java declares for it (``ProtocolConstant``).
    """
    from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL  # not at import: the contract stays stdlib-only

    p = DEFAULT_PROTOCOL
    return (
        ProtocolConstant("PROTOCOL_EPOCHS", "int", p.epochs,
                         "Passes over the support set: epochs * ceil(N_support / batch size) optimizer steps."),
        ProtocolConstant("PROTOCOL_BATCH_SIZE", "int", p.batch_size, "Images per optimizer step."),
        ProtocolConstant("PROTOCOL_COMPUTE_FRACTION", "double", p.compute_fraction,
                         "B_compute as a fraction of the full backward pass (FullTrain's backward MACs per image)."),
        ProtocolConstant("PROTOCOL_LEARNING_RATE", "double",
                         math.nan if p.learning_rate is None else p.learning_rate,
                         "The optimizer's step size; NaN = the model's own (set at export)."),
    )
