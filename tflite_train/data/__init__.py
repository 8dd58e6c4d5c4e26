"""Data: offline sources, the on-disk cache and the few-shot episode sampler (the augmentation is the device's,
``tflite_train.runtime.adaptation.augmentation``, re-exported here).

Loaders import PIL (and optional packages) lazily; the sampler and augmentation need numpy only, so
the on-device trainer can reuse them.
"""

from tflite_train.runtime.adaptation.augmentation import AugmentConfig, augment, translate, with_value_range
from tflite_train.data.cache import (
    CACHE_FORMAT,
    DEFAULT_IMAGE_SIZE,
    DatasetSpec,
    class_splits,
    default_datasets,
    image_folder_spec,
    load_split,
    prepare_cache,
    read_manifest,
    read_npz,
    verify_cache,
)
from tflite_train.data.dataset import LabeledImages, SourceUnavailable
from tflite_train.data.emoji import EmojiConfig, excluded_emoji, load_emoji
from tflite_train.data.icon_themes import IconTheme, IconThemesConfig, average_hash, load_icon_themes, near_duplicates
from tflite_train.data.line_icons import LineIconsConfig, load_line_icons
from tflite_train.data.npm_packages import NpmPackage, read_members, verify_tarball
from tflite_train.data.episodes import Episode, EpisodeConfig, sample_episode, sample_episodes

__all__ = [
    "AugmentConfig",
    "CACHE_FORMAT",
    "DEFAULT_IMAGE_SIZE",
    "DatasetSpec",
    "EmojiConfig",
    "Episode",
    "EpisodeConfig",
    "IconTheme",
    "IconThemesConfig",
    "LabeledImages",
    "LineIconsConfig",
    "NpmPackage",
    "SourceUnavailable",
    "augment",
    "average_hash",
    "class_splits",
    "default_datasets",
    "excluded_emoji",
    "image_folder_spec",
    "load_emoji",
    "load_icon_themes",
    "load_line_icons",
    "load_split",
    "near_duplicates",
    "prepare_cache",
    "read_manifest",
    "read_members",
    "read_npz",
    "sample_episode",
    "sample_episodes",
    "translate",
    "with_value_range",
    "verify_cache",
    "verify_tarball",
]
