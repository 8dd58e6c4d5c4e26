"""tflite-train: budgeted sparse on-device fine-tuning (TinyTrain) exported to TensorFlow Lite."""

from setuptools import find_packages, setup

setup(
    name="tflite-train",
    version="0.1.0",
    description="Meta-train small CNNs and fine-tune them sparsely on TFLite under memory/compute budgets",
    packages=find_packages(include=["tflite_train", "tflite_train.*", "converters", "converters.*", "bench", "bench.*"]),
    python_requires=">=3.10",
    install_requires=["numpy"],
    extras_require={
        "train": ["tensorflow-cpu==2.21.0", "keras>=3.0", "absl-py", "tqdm", "matplotlib", "pillow"],
        "pi": ["numpy", "ai-edge-litert"],
        "pi-legacy": ["numpy<2", "tflite-runtime==2.14.0"],
        "dev": ["pytest"],
        "bench": ["onnx==1.17.0", "onnxruntime-training==1.19.2"],
    },
    entry_points={"console_scripts": ["tflite-train=tflite_train.cli:main"]},
)
