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
from tflite_train.meta.feature_cache import FeatureCacheConfig, FeatureSet, build_feature_cache
from tflite_train.meta.domain_selection import HeldOutScore, LodoChoice, lodo_scores, select_leave_one_domain_out
from tflite_train.meta.lite0_weights import Candidate, Lite0WeightsConfig, train_lite0_weights
from tflite_train.meta.meta_train import meta_train
from tflite_train.meta.pretrain import pretrain
from tflite_train.meta.protonet import CosineHead, cosine_logits, prototypes, protonet_loss
from tflite_train.meta.run_io import make_strategy
from tflite_train.meta.schedule import WarmupCosine, warmup_cosine
from tflite_train.meta.upper_meta_train import (
    TRAINED_MODES,
    UpperMetaConfig,
    episode_sources,
    meta_train_upper,
    sample_feature_episode,
)
from tflite_train.meta.weight_interpolation import interpolate_weights

__all__ = [
    "Candidate",
    "CosineHead",
    "EpisodeAccuracy",
    "FeatureCacheConfig",
    "FeatureSet",
    "HeldOutScore",
    "Lite0WeightsConfig",
    "LodoChoice",
    "MetaTrainConfig",
    "PretrainConfig",
    "ScheduleConfig",
    "TRAINED_MODES",
    "UpperMetaConfig",
    "WarmupCosine",
    "build_feature_cache",
    "cosine_logits",
    "embed",
    "episode_accuracies",
    "episode_sources",
    "evaluate_none_policy",
    "interpolate_weights",
    "lodo_scores",
    "make_strategy",
    "meta_train",
    "meta_train_upper",
    "paired_delta",
    "pretrain",
    "protonet_episode_accuracy",
    "protonet_loss",
    "prototypes",
    "sample_feature_episode",
    "select_leave_one_domain_out",
    "summarize",
    "train_lite0_weights",
    "warmup_cosine",
]
