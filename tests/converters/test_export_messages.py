"""Bring-your-own export (issue 24): frozen layers only need to run (shape inference through Keras' symbolic
call), and every refusal is one line a CLI user can act on -- the Keras layer named, a flag that works, never
Flex / Select TF ops or ``safe_mode=False``; a successful ``export`` is quiet unless ``-v``.

Models are tiny (32 px) and exported without the optional signatures where the CLI is not the point.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import keras
import pytest

from tflite_train.cli import main
from tflite_train.converters import ExportConfig, RegionError, write_export
from tflite_train.converters.build_module import prepare_model
from tflite_train.converters.candidate_choice import AUTO
from tflite_train.converters.export import ConversionError
from tflite_train.converters.keras_io import ModelFileError, load_keras_model
from tflite_train.runtime.model.selftest import verify
from tests.converters.blocked_models import norm_on_top

FAST = dict(backbone="keras", input_size=None, class_capacity=2, train_variants=0, cache_signatures=False,
            selftest_batch=1)


class ChannelGain(keras.layers.Layer):
    """A custom layer with a weight and no ``compute_output_shape`` (like ConvNeXt's LayerScale)."""

    def build(self, input_shape) -> None:
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="gain")

    def call(self, x):
        return x * self.gain + 0.1


def _cnn(middle, size: int = 32) -> keras.Model:
    """conv 'c1' -> ``middle`` layers -> conv 'c2' -> pooling -> classifier."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((size, size, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="c1")(x)
    for layer in middle:
        x = layer(x)
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="c2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="cls")(x))


def _lstm_net(unroll: bool) -> keras.Model:
    """An LSTM over the 4 positions of a 2x2 feature map, below the candidate 'c2'."""
    return _cnn([keras.layers.Conv2D(8, 3, strides=8, padding="same", name="to_2x2"),
                 keras.layers.Reshape((4, 8), name="seq"),
                 keras.layers.LSTM(8, return_sequences=True, unroll=unroll, name="lstm"),
                 keras.layers.Reshape((2, 2, 8), name="img")])


def test_custom_layer_without_output_shape_runs_frozen(tmp_path):
    assert "compute_output_shape" not in ChannelGain.__dict__
    out = tmp_path / "m.tflite"
    result = write_export(ExportConfig(candidates=AUTO, **FAST), out, _cnn([ChannelGain(name="gain")]))
    assert result.metadata["candidates"] == ["c2"]  # the region stops above the custom layer
    assert verify(out).passed  # the frozen custom layer runs as TFLite converts it
    with pytest.raises(RegionError, match=r"^layer 'gain' \(ChannelGain\) has no on-device gradient; .*from:c2"):
        prepare_model(_cnn([ChannelGain(name="gain")]), ExportConfig(candidates="all", **FAST))


def test_frozen_lstm_is_refused_naming_it_and_the_advice_works(tmp_path, capfd):
    path = tmp_path / "lstm.keras"
    _lstm_net(unroll=False).save(path)
    out = tmp_path / "out" / "m.tflite"
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--candidates", "from:c2"]) == 2
    err = capfd.readouterr().err.strip().splitlines()  # fd 2: the converter's C++ diagnostics would land there
    assert len(err) == 1, err
    assert err[0].startswith("tflite-train export: error: layer 'lstm' (LSTM) does not convert to TFLite builtin ops")
    assert "unroll=True" in err[0]
    assert "flex" not in err[0].lower() and "select" not in err[0].lower()
    assert not out.parent.exists()
    result = write_export(ExportConfig(candidates="from:c2", **FAST), out, _lstm_net(unroll=True))  # as advised
    assert result.metadata["candidates"] == ["c2"]


def test_conversion_refusal_without_a_single_culprit_names_no_flex():
    from tflite_train.converters.export import conversion_refusal
    from tflite_train.converters.graph import prepare_graph, read_keras
    from tflite_train.converters.graph.ir import InputSpec

    nodes, output = read_keras(_cnn([]), (32, 32, 3))
    graph = prepare_graph(nodes, output, InputSpec((32, 32, 3), (0.0, 1.0), (0.0,) * 3, (1.0,) * 3))
    report = ("error: 'tf.Foo' op is neither a custom op nor a flex op\nerror: failed to legalize operation 'tf.Bar'"
              "\nPlease consider using Select TF ops")
    text = conversion_refusal(graph, report)
    assert "tf.Bar, tf.Foo" in text and "select" not in text.lower() and "flex" not in text.lower()
    assert issubclass(ConversionError, ValueError)


def test_lambda_and_custom_class_files_get_advice_a_cli_user_can_follow(tmp_path):
    lam = tmp_path / "lam.keras"
    _cnn([keras.layers.Lambda(lambda t: t * 2.0, name="double")]).save(lam)
    with pytest.raises(ModelFileError) as err:
        load_keras_model(lam)
    text = str(err.value)
    assert text.startswith(f"--keras-model {str(lam)!r}: layer 'double' is a Lambda")
    assert "safe_mode" not in text and "built-in Keras layers" in text and "tflite_train.converters.export_keras" in text
    custom = tmp_path / "custom.keras"
    _cnn([ChannelGain(name="gain")]).save(custom)
    with pytest.raises(ModelFileError, match="layer class 'ChannelGain' is not part of Keras.*export_keras"):
        load_keras_model(custom)


def test_grouped_conv_is_refused_naming_groups():
    """A grouped conv trains (``converters.ops.grouped_conv``); a dilated one is refused naming its settings."""
    model = _cnn([keras.layers.Conv2D(8, 3, padding="same", groups=4, dilation_rate=2, name="grouped")])
    with pytest.raises(RegionError) as err:
        prepare_model(model, ExportConfig(candidates="all", **FAST))
    assert str(err.value).startswith("layer 'grouped' (Conv2D with groups=4, dilation_rate=(2, 2)) has no on-device "
                                     "gradient")


def test_no_candidates_would_export_names_flags_that_do(tmp_path, capsys):
    path = tmp_path / "m.keras"
    norm_on_top().save(path)
    out = tmp_path / "out" / "m.tflite"
    assert main(["export", "--keras-model", str(path), "--out", str(out), "--candidates", "all"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    flags = "--feature-layer late_relu --candidates from:early"
    assert err == ["tflite-train export: error: layer 'ln' (GroupNormalization) has no on-device gradient; no "
                   "--candidates would export: it lies between the last trainable layer and the embedding; "
                   f"{flags} would export"]
    assert not out.parent.exists()
    assert main(["export", "--keras-model", str(path), "--out", str(out), *flags.split(), "--capacity", "2"]) == 0
    assert "candidates from:early: early, late" in capsys.readouterr().out
    assert verify(out).passed


TF_STARTUP = re.compile(r"absl::|oneDNN|TF_ENABLE_ONEDNN_OPTS|cpu_feature_guard|rebuild TensorFlow|^[IWEF]\d{4} ",
                        re.MULTILINE)
"""A line of TensorFlow's C++ start-up (absl's "All log messages before absl::InitializeLog() ...", the oneDNN
notice, the CPU-feature guard) or any glog-style line ("I0000 00:00:...")."""


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", "tflite_train.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600, check=False)


def test_export_is_quiet_unless_verbose(tmp_path):
    path = tmp_path / "m.keras"
    _cnn([]).save(path)
    out = tmp_path / "m.tflite"
    done = _run_cli("export", "--keras-model", str(path), "--out", str(out), "--capacity", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} ")
    lines = done.stderr.strip().splitlines()
    assert len(lines) <= 2 and all(line.startswith("tflite-train: ") for line in lines), done.stderr
    assert not TF_STARTUP.search(done.stdout + done.stderr), done.stdout + done.stderr
    # -v: TensorFlow's own logs too (a refusal, to keep the test short: nothing is converted)
    quiet = _run_cli("export", "--keras-model", str(path), "--out", str(out), "--candidates", "layers:9")
    loud = _run_cli("-v", "export", "--keras-model", str(path), "--out", str(out), "--candidates", "layers:9")
    assert quiet.returncode == loud.returncode == 2
    assert quiet.stderr.strip().splitlines() == [
        "tflite-train export: error: --candidates 'layers:9': K must lie in 1..2 (the model's weighted layers)"]
    assert len(loud.stderr.strip().splitlines()) > 2, loud.stderr
    assert not TF_STARTUP.search(quiet.stdout + quiet.stderr) and TF_STARTUP.search(loud.stderr), loud.stderr
