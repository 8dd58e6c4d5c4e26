"""Usage (repo root): .venv/bin/python weights/experiments/multiscript/control.py INIT.weights.h5 OUT_DIR STEPS PEAK_LR [SOURCE]

Control arm: continue SUPERVISED pre-training from the pre-trained weights for the same number of
images that meta-training sees (fresh linear head, same LR schedule shape and peak as meta-training)."""
import sys
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
from tflite_train.data.cache import load_split
from tflite_train.meta.config import PretrainConfig, ScheduleConfig
from tflite_train.meta.pretrain import pretrain
from tflite_train.models.keras_backbone import build_backbone
import logging; logging.basicConfig(level=logging.INFO)
init, out, steps, lr = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
b = build_backbone("mcunet", 64)
b.model.load_weights(init)
pretrain(load_split("build/data_cache", sys.argv[5] if len(sys.argv) > 5 else "glyphs_multiscript", "train"), PretrainConfig(steps=steps, schedule=ScheduleConfig(peak_lr=lr), seed=1), out, backbone=b)
