"""Offline training (TensorFlow/Keras): supervised pre-training and episodic ProtoNet meta-training."""

from tflite_train.meta.config import MetaTrainConfig, PretrainConfig, ScheduleConfig
from tflite_train.meta.evaluate import (
    EpisodeAccuracy,
    embed,
    episode_accuracies,
    evaluate_none_policy,
    paired_delta,
    protonet_episode_accuracy,
    summarize,
)
from tflite_train.meta.meta_train import meta_train
from tflite_train.meta.pretrain import pretrain
from tflite_train.meta.protonet import CosineHead, cosine_logits, prototypes, protonet_loss
from tflite_train.meta.run_io import make_strategy
from tflite_train.meta.schedule import WarmupCosine, warmup_cosine

__all__ = [
    "CosineHead",
    "EpisodeAccuracy",
    "MetaTrainConfig",
    "PretrainConfig",
    "ScheduleConfig",
    "WarmupCosine",
    "cosine_logits",
    "embed",
    "episode_accuracies",
    "evaluate_none_policy",
    "make_strategy",
    "meta_train",
    "paired_delta",
    "pretrain",
    "protonet_episode_accuracy",
    "protonet_loss",
    "prototypes",
    "summarize",
    "warmup_cosine",
]
