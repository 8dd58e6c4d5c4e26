"""tflite-train: TinyTrain-style budgeted sparse fine-tuning of small CNNs on TensorFlow Lite.

The package is split by what a machine has installed: ``tflite_train.sparse`` and
``tflite_train.runtime`` need numpy and a TFLite interpreter only (a Raspberry Pi);
``tflite_train.models``, ``tflite_train.meta`` and ``tflite_train.converters`` (the exporter; in the repository
the top-level ``converters/`` folder, which ``tflite_train/converters`` links to) need TensorFlow and Keras.
Import those subpackages directly; this top level imports nothing heavy.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
