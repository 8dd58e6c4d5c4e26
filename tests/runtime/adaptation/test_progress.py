"""Progress bars: tqdm on a terminal, nothing otherwise; the trainer advances them to their totals."""

from __future__ import annotations

import io

import numpy as np

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model
from tflite_train.runtime import AdaptConfig, adapt, class_logits
from tflite_train.runtime.adaptation.progress import no_progress, terminal_progress
from tflite_train.runtime.model.interpreter import TrainableModel


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_on_a_terminal_and_not_quiet():
    terminal = _Terminal()
    with terminal_progress(True, terminal)("fisher", 8) as bar:
        for _ in range(8):
            bar.update(1)
    assert "fisher:" in terminal.getvalue() and "0/8" in terminal.getvalue()  # drawn (then cleared: leave=False)
    assert terminal_progress(True, io.StringIO()) is no_progress  # not a TTY (a pipe, a log file)
    assert terminal_progress(False, _Terminal()) is no_progress  # --quiet


class _Recorder:
    def __init__(self):
        self.bars = {}

    def __call__(self, description, total):
        recorder = self

        class Bar:
            def __enter__(self):
                recorder.bars[description] = [total, 0, ""]
                return self

            def __exit__(self, *exc):
                return None

            def update(self, n=1):
                recorder.bars[description][1] += n

            def set_postfix_str(self, text):
                recorder.bars[description][2] = text

        return Bar()


def test_adapt_and_predict_advance_their_bars(fashion):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    images, labels, queries, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=2)
    recorder = _Recorder()
    adapt(model, images, labels, AdaptConfig(epochs=2, fisher_chunk_size=4), progress=recorder)
    assert recorder.bars["fisher"][:2] == [9, 9]
    assert recorder.bars["training"][:2] == [18, 18] and recorder.bars["training"][2].startswith("epoch 2 loss ")
    logits = class_logits(model, queries, chunk_size=4, progress=recorder)
    assert recorder.bars["predicting"][:2] == [6, 6] and logits.shape == (6, 3) and np.isfinite(logits).all()
