"""Strict JSON (``tflite_train.contract.strict_json``): what the Java core's ``Json.parse`` refuses beyond
``json.loads`` -- a key repeated in one object, NaN and the infinities -- is refused, naming the key."""

from __future__ import annotations

import json

import pytest

from tflite_train.contract import StrictJsonError, loads_strict


def test_reads_what_json_reads():
    text = '{"a": [1, 2.5, {"b": null}], "c": {"a": true}, "d": "\\u00e9"}'
    assert loads_strict(text) == json.loads(text)  # equal keys in different objects are fine


@pytest.mark.parametrize("text, key", [
    ('{"a": 1, "a": 1}', "a"),
    ('{"x": {"deep": 1, "deep": 2}}', "deep"),
    ('[{"k": 1}, {"k": 1, "k": 2}]', "k"),
    ('{"\\u0061": 1, "a": 2}', "a"),  # the same key, escaped once
])
def test_a_duplicate_key_is_refused_naming_it(text, key):
    assert isinstance(json.loads(text), (dict, list))  # what Python alone would accept (the last value wins)
    with pytest.raises(StrictJsonError) as info:
        loads_strict(text)
    assert str(info.value) == f"duplicate key {key!r}"


def test_a_long_key_is_elided_in_the_message():
    key = "k" * 500
    with pytest.raises(StrictJsonError) as info:
        loads_strict(json.dumps({key: 1})[:-1] + f', "{key}": 2}}')
    assert str(info.value) == f"duplicate key {'k' * 80 + '...'!r}"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants_are_refused(constant):
    with pytest.raises(StrictJsonError, match=f"{constant} is not JSON"):
        loads_strict(f'{{"a": [{constant}]}}')


def test_errors_are_value_errors():
    assert issubclass(StrictJsonError, ValueError)
    with pytest.raises(ValueError):
        loads_strict('{"a": ')
