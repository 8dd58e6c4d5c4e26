package org.tflitetrain.core.model;

import java.util.List;

/**
 * Signature and tensor names of the trainable-model contract (CONTRACT.md), mirrored from the
 * single Python source {@code tflite_train/contract.py}; the golden file {@code golden/contract.json}
 * (generated from it) pins every constant here in {@code ContractTest}.
 *
 * <p>Every signature takes at least one input: TFLite's Java {@code Interpreter.runSignature} throws
 * {@code IllegalArgumentException("Input error: Inputs should not be null or empty.")} for an empty
 * input map, so {@code get_state} and {@code reset_state} take the scalar int32 {@link #DUMMY}.
 */
public final class Contract {
  public static final String INFER = "infer";
  public static final String FISHER = "fisher";
  public static final String TRAIN_STEP = "train_step";
  public static final String SET_HEAD = "set_head";
  public static final String SET_SELECTION = "set_selection";
  public static final String SET_HPARAMS = "set_hparams";
  public static final String GET_STATE = "get_state";
  public static final String SET_STATE = "set_state";
  public static final String RESET_STATE = "reset_state";
  /** Every signature of the contract, in export order. */
  public static final List<String> SIGNATURES = List.of(INFER, FISHER, TRAIN_STEP, SET_HEAD, SET_SELECTION,
      SET_HPARAMS, GET_STATE, SET_STATE, RESET_STATE);

  public static final String IMAGES = "images";
  public static final String LABELS = "labels";
  public static final String PROTOTYPES = "prototypes";
  public static final String NUM_CLASSES = "num_classes";
  public static final String CHANNEL_MASK = "channel_mask";
  public static final String LEARNING_RATE = "learning_rate";
  /** Scalar int32 input of the signatures that need no argument (value ignored). */
  public static final String DUMMY = "dummy";
  public static final String EMBEDDINGS = "embeddings";
  public static final String LOGITS = "logits";
  public static final String LOSS = "loss";
  public static final String ACCURACY = "accuracy";
  public static final String OK = "ok";

  /** Metadata field holding signature name -> {inputs, outputs}. */
  public static final String F_SIGNATURES = "signatures";
  /** Top-level metadata fields (CONTRACT.md, Python {@code tflite_train.contract.METADATA_FIELDS}). */
  public static final String F_FORMAT = "format";
  public static final String F_FORMAT_VERSION = "format_version";
  public static final String F_BACKBONE = "backbone";
  public static final String F_MODEL_ID = "model_id";
  public static final String F_INPUT = "input";
  public static final String F_FEATURE_DIM = "feature_dim";
  public static final String F_CLASS_CAPACITY = "class_capacity";
  public static final String F_HEAD = "head";
  public static final String F_OPTIMIZER = "optimizer";
  public static final String F_LAYERS = "layers";
  public static final String F_CANDIDATES = "candidates";
  public static final String F_STATE = "state";
  public static final String F_TRAIN_VARIANTS = "train_variants";
  /** Key of a {@code train_variants} entry naming its signature. */
  public static final String F_SIGNATURE = "signature";
  /** Every top-level field this class names, for {@code ContractTest}. */
  public static final List<String> FIELDS = List.of(F_FORMAT, F_FORMAT_VERSION, F_BACKBONE, F_MODEL_ID, F_INPUT,
      F_FEATURE_DIM, F_CLASS_CAPACITY, F_HEAD, F_OPTIMIZER, F_LAYERS, F_CANDIDATES, F_STATE, F_TRAIN_VARIANTS,
      F_SIGNATURES);
  public static final String F_INPUTS = "inputs";
  public static final String F_OUTPUTS = "outputs";

  public static final String KERNEL_SUFFIX = "_kernel";
  public static final String BIAS_SUFFIX = "_bias";
  public static final String MASK_SUFFIX = "_mask";

  /** Slot names of an optimizer: a slot variable is {@code <layer>_<kernel|bias>_<slot>}. */
  public static List<String> optimizerSlots(String optimizer) {
    switch (optimizer) {
      case "adam": return List.of("m", "v");
      case "sgd_momentum": return List.of("mom");
      default: throw new IllegalArgumentException("optimizer must be adam or sgd_momentum; got " + optimizer);
    }
  }

  /** The state variables of one candidate layer, in {@code get_state} order. */
  public static List<String> layerState(String layer, String optimizer) {
    List<String> out = new java.util.ArrayList<>(List.of(layer + KERNEL_SUFFIX, layer + BIAS_SUFFIX));
    for (String param : List.of(KERNEL_SUFFIX, BIAS_SUFFIX)) {
      for (String slot : optimizerSlots(optimizer)) {
        out.add(layer + param + "_" + slot);
      }
    }
    out.add(layer + MASK_SUFFIX);
    return out;
  }

  private Contract() {}
}
