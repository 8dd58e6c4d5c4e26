"""Small Keras models the exporter cannot train as they are (shared by the converter tests)."""

import keras


def norm_on_top() -> keras.Model:
    """A GroupNormalization between the last conv and the embedding: no layer has a gradient path (seeded)."""
    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="early")(x)
    x = keras.layers.Conv2D(8, 3, padding="same", name="late")(x)
    x = keras.layers.BatchNormalization(name="late_bn")(x)
    x = keras.layers.ReLU(name="late_relu")(x)
    x = keras.layers.GroupNormalization(groups=2, name="ln")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="cls")(x))
