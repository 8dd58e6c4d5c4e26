package org.tflitetrain.core.model;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tflitetrain.core.cost.LayerSpec;
import org.tflitetrain.core.cost.LayerTable;
import org.tflitetrain.core.cost.Optimizer;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.json.JsonException;

/**
 * The exported model's metadata JSON (CONTRACT.md v1), parsed and validated.
 *
 * <p>Required keys are checked for type and range; unknown keys are ignored (forward compatible);
 * {@code format} must be {@link Contract#FORMAT} and {@code format_version} must equal {@link #FORMAT_VERSION}.
 * The selection mask has {@link #maskLength()} = sum of C_out over {@code candidates}, concatenated in
 * {@code candidates} order. The optional {@code cached_cuts} (absent in files exported before the
 * cached cut) become {@link #cachedCuts}; their optional episode and accumulation signatures and the
 * top-level {@code apply_accumulated_signature} (absent in older files) {@link CachedCut#episodeSignature},
 * {@link CachedCut#accumulateSignature} and {@link #applyAccumulatedSignature}.
 */
public final class ModelMetadata {
  /** The metadata format this code reads ({@link Contract#FORMAT_VERSION}). */
  public static final int FORMAT_VERSION = Contract.FORMAT_VERSION;
  /** Value of the {@code format} key ({@link Contract#FORMAT}). */
  public static final String FORMAT = Contract.FORMAT;
  /** Name of the flatbuffer {@code Model.metadata} entry holding the JSON ({@link Contract#METADATA_NAME}). */
  public static final String METADATA_NAME = Contract.METADATA_NAME;

  public final int formatVersion;
  public final String backbone;
  public final String modelId;
  public final InputSpec input;
  public final int featureDim;
  public final int classCapacity;
  public final String headType;
  public final double headScale;
  public final OptimizerConfig optimizer;
  public final List<MetadataLayer> layers;
  public final LayerTable table;
  public final List<String> candidates;
  private final Map<String, Integer> maskOffsets;
  private final int maskLength;
  /**
   * The cached cuts (metadata {@code cached_cuts}), ascending by layer index; empty for a file
   * exported without them, which then trains on full steps.
   */
  public final List<CachedCut> cachedCuts;
  /**
   * {@code apply_accumulated} (metadata {@code apply_accumulated_signature}): one optimizer step with the
   * gradient the cuts' {@link CachedCut#accumulateSignature} accumulated; null for a file without it.
   */
  public final String applyAccumulatedSignature;
  /** The raw parsed JSON, for keys this class does not model (e.g. {@code signatures}). */
  public final Map<String, Object> raw;

  private ModelMetadata(JsonFields root, Map<String, Object> raw) throws ModelMetadataException {
    this.raw = raw;
    String format = root.string(Contract.F_FORMAT);
    if (!FORMAT.equals(format)) {
      throw new ModelMetadataException(Contract.F_FORMAT + " must be \"" + FORMAT + "\"; got \"" + format + "\"");
    }
    long version = root.integer(Contract.F_FORMAT_VERSION);
    if (version != FORMAT_VERSION) {
      throw new ModelMetadataException("unsupported " + Contract.F_FORMAT_VERSION + " " + version + "; this app reads version "
          + FORMAT_VERSION + " (re-export the model or update the app)");
    }
    formatVersion = (int) version;
    backbone = root.string(Contract.F_BACKBONE);
    modelId = root.string(Contract.F_MODEL_ID);
    if (modelId.isEmpty()) {
      throw new ModelMetadataException(Contract.F_MODEL_ID + " must not be empty");
    }
    input = parseInput(root.object(Contract.F_INPUT));
    featureDim = root.integer(Contract.F_FEATURE_DIM, 1, Integer.MAX_VALUE);
    classCapacity = root.integer(Contract.F_CLASS_CAPACITY, 2, Integer.MAX_VALUE);
    JsonFields head = root.object(Contract.F_HEAD);
    headType = head.string(Contract.F_TYPE);
    if (!Contract.HEAD_TYPE.equals(headType)) {
      throw new ModelMetadataException(head.path(Contract.F_TYPE) + " must be \"" + Contract.HEAD_TYPE + "\"; got \""
          + headType + "\"");
    }
    headScale = head.number(Contract.F_SCALE);
    if (!(headScale > 0)) {
      throw new ModelMetadataException(head.path(Contract.F_SCALE) + " must be > 0; got " + headScale);
    }
    optimizer = parseOptimizer(root.object(Contract.F_OPTIMIZER));

    List<Object> layerList = root.array(Contract.F_LAYERS);
    if (layerList.isEmpty()) {
      throw new ModelMetadataException(Contract.F_LAYERS + " must not be empty");
    }
    List<MetadataLayer> parsedLayers = new ArrayList<>();
    List<LayerSpec> specs = new ArrayList<>();
    for (int i = 0; i < layerList.size(); i++) {
      MetadataLayer layer = parseLayer(JsonFields.of(layerList.get(i), Contract.F_LAYERS + "[" + i + "]"));
      parsedLayers.add(layer);
      specs.add(layer.spec);
    }
    try {
      table = new LayerTable(specs);
    } catch (IllegalArgumentException err) {
      throw new ModelMetadataException("invalid " + Contract.F_LAYERS + ": " + err.getMessage(), err);
    }
    layers = Collections.unmodifiableList(parsedLayers);

    List<Object> candidateList = root.array(Contract.F_CANDIDATES);
    if (candidateList.isEmpty()) {
      throw new ModelMetadataException(Contract.F_CANDIDATES + " must not be empty");
    }
    List<String> names = new ArrayList<>();
    Map<String, Integer> offsets = new LinkedHashMap<>();
    int offset = 0;
    int previous = -1;
    for (int i = 0; i < candidateList.size(); i++) {
      Object value = candidateList.get(i);
      if (!(value instanceof String)) {
        throw new ModelMetadataException(Contract.F_CANDIDATES + "[" + i + "] must be a string; got " + JsonFields.describe(value));
      }
      String name = (String) value;
      int index;
      try {
        index = table.indexOf(name);
      } catch (IllegalArgumentException err) {
        throw new ModelMetadataException(Contract.F_CANDIDATES + "[" + i + "] names unknown layer \"" + name + "\"", err);
      }
      if (index <= previous) {
        throw new ModelMetadataException(Contract.F_CANDIDATES + " must be unique and in forward order; \"" + name
            + "\" comes after layer " + previous);
      }
      if (!layers.get(index).candidate) {
        throw new ModelMetadataException(Contract.F_CANDIDATES + " lists \"" + name + "\" but its layer entry has " + Contract.F_CANDIDATE + "=false");
      }
      previous = index;
      names.add(name);
      offsets.put(name, offset);
      offset += table.get(index).outChannels;
    }
    for (MetadataLayer layer : layers) {
      if (layer.candidate && !offsets.containsKey(layer.spec.name)) {
        throw new ModelMetadataException("layer \"" + layer.spec.name + "\" has " + Contract.F_CANDIDATE + "=true but is not in "
            + Contract.F_CANDIDATES);
      }
    }
    candidates = Collections.unmodifiableList(names);
    maskOffsets = Collections.unmodifiableMap(offsets);
    maskLength = offset;
    // Absent in files exported before the cache; present, it must be an array (null is refused, as in Python).
    cachedCuts = raw.containsKey(Contract.F_CACHED_CUTS) ? parseCachedCuts(root.array(Contract.F_CACHED_CUTS), table)
        : List.of();
    applyAccumulatedSignature = raw.containsKey(Contract.F_APPLY_ACCUMULATED_SIGNATURE)
        ? cutSignature(root, Contract.F_APPLY_ACCUMULATED_SIGNATURE, Contract.APPLY_ACCUMULATED) : null;
    for (CachedCut cut : cachedCuts) {
      if (cut.accumulateSignature != null && applyAccumulatedSignature == null) {
        throw new ModelMetadataException(Contract.F_CACHED_CUTS + "[" + cut.layer + "] has an "
            + Contract.F_ACCUMULATE_SIGNATURE + " but the metadata lacks " + Contract.F_APPLY_ACCUMULATED_SIGNATURE);
      }
    }
  }

  /**
   * Parses and validates metadata JSON text.
   *
   * @throws ModelMetadataException for malformed JSON, a missing/ill-typed key, another format or version
   */
  public static ModelMetadata parse(String json) throws ModelMetadataException {
    Object parsed;
    try {
      parsed = Json.parse(json);
    } catch (JsonException err) {
      throw new ModelMetadataException("metadata is not valid JSON: " + err.getMessage(), err);
    }
    JsonFields root = JsonFields.of(parsed, "metadata");
    @SuppressWarnings("unchecked")
    Map<String, Object> raw = (Map<String, Object>) parsed;
    return new ModelMetadata(JsonFields.of(raw, ""), raw);
  }

  /** Parses UTF-8 metadata bytes. @throws ModelMetadataException also for invalid UTF-8 */
  public static ModelMetadata parse(byte[] utf8) throws ModelMetadataException {
    try {
      String text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(utf8)).toString();
      return parse(text);
    } catch (CharacterCodingException err) {
      throw new ModelMetadataException("metadata is not valid UTF-8", err);
    }
  }

  /** Reads the {@link Contract#METADATA_NAME} metadata entry straight from a {@code .tflite} file's bytes. */
  public static ModelMetadata fromTflite(ByteBuffer model) throws ModelMetadataException {
    return parse(TfliteMetadataReader.read(model, METADATA_NAME));
  }

  /**
   * Checks a {@code .tflite} file's integrity seal ({@link ModelChecksum#verify}), reads its metadata and
   * checks it against the file's graph ({@link #validateGraph}): call it before the bytes reach an
   * {@code Interpreter}; nothing runs on a corrupted file or one whose metadata lies.
   *
   * @throws ModelMetadataException naming the field (or the seal), the metadata value and the graph value
   */
  public static ModelMetadata load(ByteBuffer model) throws ModelMetadataException {
    ModelChecksum.verify(model);
    ModelMetadata metadata = fromTflite(model);
    metadata.validateGraph(TfliteMetadataReader.signatures(model));
    return metadata;
  }

  /**
   * Checks that the graph's signatures match this metadata (Python {@code tflite_train.contract.validate_graph}):
   * every contract signature (and train variant) exists with the declared inputs and outputs and at least one
   * input; class_capacity and feature_dim = set_head's prototypes [K, D]; input height/width/channels/dtype =
   * infer's images; every candidate layer has its state variables (get_state outputs) and a fisher output of
   * out_channels entries; the set_selection mask has the candidates' channels; every {@link #cachedCuts} entry
   * has its three signatures (and the episode and accumulation signatures it names) with the contract's tensors,
   * and their activations are float32 [N, shape...]; {@link #applyAccumulatedSignature}, when named, exists
   * with its dummy input and ok output.
   *
   * @throws ModelMetadataException one line naming the field, the metadata value and the graph value
   */
  public void validateGraph(Map<String, GraphSignature> graph) throws ModelMetadataException {
    Object declaredObject = raw.get(Contract.F_SIGNATURES);
    if (!(declaredObject instanceof Map)) {
      throw new ModelMetadataException("missing key " + Contract.F_SIGNATURES);
    }
    Map<?, ?> declared = (Map<?, ?>) declaredObject;
    List<String> names = new ArrayList<>(Contract.SIGNATURE_NAMES);
    Object variants = raw.get(Contract.F_TRAIN_VARIANTS);
    if (variants instanceof List) {
      for (Object v : (List<?>) variants) {
        if (v instanceof Map && ((Map<?, ?>) v).get(Contract.F_SIGNATURE) instanceof String) {
          names.add((String) ((Map<?, ?>) v).get(Contract.F_SIGNATURE));
        }
      }
    }
    for (CachedCut cut : cachedCuts) {
      names.addAll(List.of(cut.featuresSignature, cut.trainSignature, cut.inferSignature));
      for (String optional : Arrays.asList(cut.episodeSignature, cut.accumulateSignature)) {
        if (optional != null) {
          names.add(optional);
        }
      }
    }
    if (applyAccumulatedSignature != null) {
      names.add(applyAccumulatedSignature);
    }
    for (String name : names) {
      Object sig = declared.get(name);
      if (!(sig instanceof Map)) {
        throw new ModelMetadataException("metadata field " + Contract.F_SIGNATURES + " lacks the contract signature "
            + name);
      }
      GraphSignature g = graph.get(name);
      if (g == null) {
        throw lie(Contract.F_SIGNATURES + "." + name, "present", "no such signature (has " + graph.keySet() + ")");
      }
      for (String kind : List.of(Contract.F_INPUTS, Contract.F_OUTPUTS)) {
        Object list = ((Map<?, ?>) sig).get(kind);
        List<String> meta = new ArrayList<>();
        if (list instanceof List) {
          for (Object item : (List<?>) list) {
            meta.add(String.valueOf(item));
          }
        }
        List<String> actual = new ArrayList<>((kind.equals(Contract.F_INPUTS) ? g.inputs : g.outputs).keySet());
        Collections.sort(meta);
        Collections.sort(actual);
        if (!meta.equals(actual)) {
          throw lie(Contract.F_SIGNATURES + "." + name + "." + kind, meta, actual);
        }
      }
      if (g.inputs.isEmpty()) {
        throw new ModelMetadataException("signature " + name + " takes no input; the contract requires one (CONTRACT.md)");
      }
    }
    int[] protos = graph.get(Contract.SET_HEAD).inputs.get(Contract.PROTOTYPES).shape();
    if (protos[0] != classCapacity) {
      throw lie(Contract.F_CLASS_CAPACITY, classCapacity, protos[0]);
    }
    if (protos[1] != featureDim) {
      throw lie(Contract.F_FEATURE_DIM, featureDim, protos[1]);
    }
    GraphSignature.TensorInfo images = graph.get(Contract.INFER).inputs.get(Contract.IMAGES);
    int[] shape = images.shape();
    int[] meta = {input.height, input.width, input.channels};
    String[] keys = {Contract.F_HEIGHT, Contract.F_WIDTH, Contract.F_CHANNELS};
    for (int axis = 0; axis < 3; axis++) {
      if (shape.length != 4 || shape[axis + 1] != meta[axis]) {
        throw lie(Contract.F_INPUT + "." + keys[axis], meta[axis], Arrays.toString(shape));
      }
    }
    if (!input.dtype.equals(images.dtype)) {
      throw lie(Contract.F_INPUT + "." + Contract.F_DTYPE, input.dtype, images.dtype);
    }
    Map<String, GraphSignature.TensorInfo> state = graph.get(Contract.GET_STATE).outputs;
    Map<String, GraphSignature.TensorInfo> fisher = graph.get(Contract.FISHER).outputs;
    int total = 0;
    for (String layer : candidates) {
      for (String variable : Contract.layerState(layer, optimizer.optimizer.wireName)) {
        if (!state.containsKey(variable)) {
          throw lie(Contract.F_CANDIDATES + "[" + layer + "]", "state variable " + variable, "no such " + Contract.GET_STATE
              + " output");
        }
      }
      GraphSignature.TensorInfo out = fisher.get(layer);
      if (out == null) {
        throw lie(Contract.F_CANDIDATES + "[" + layer + "]", "a " + Contract.FISHER + " output", "none");
      }
      int channels = candidate(layer).outChannels;
      if (!Arrays.equals(out.shape(), new int[] {channels})) {
        throw lie(Contract.F_LAYERS + "[" + layer + "]." + Contract.F_OUT_CHANNELS, channels, Arrays.toString(out.shape()));
      }
      total += channels;
    }
    int[] mask = graph.get(Contract.SET_SELECTION).inputs.get(Contract.CHANNEL_MASK).shape();
    if (mask.length != 1 || mask[0] != total) {
      throw lie(Contract.F_CANDIDATES + " (sum of " + Contract.F_OUT_CHANNELS + ")", total, Arrays.toString(mask));
    }
    for (CachedCut cut : cachedCuts) {
      validateCut(cut, graph);
    }
    if (applyAccumulatedSignature != null) {
      GraphSignature apply = graph.get(applyAccumulatedSignature);
      tensor(apply, Contract.F_INPUTS, apply.inputs, Contract.DUMMY);
      tensor(apply, Contract.F_OUTPUTS, apply.outputs, Contract.OK);
    }
  }

  /** The contract tensors of one cut's three signatures, and its activations' dtype and shape. */
  private static void validateCut(CachedCut cut, Map<String, GraphSignature> graph) throws ModelMetadataException {
    GraphSignature features = graph.get(cut.featuresSignature);
    GraphSignature train = graph.get(cut.trainSignature);
    GraphSignature infer = graph.get(cut.inferSignature);
    List<GraphSignature.TensorInfo> activations = new ArrayList<>();
    activations.add(tensor(features, Contract.F_OUTPUTS, features.outputs, Contract.ACTIVATIONS));
    activations.add(tensor(train, Contract.F_INPUTS, train.inputs, Contract.ACTIVATIONS));
    activations.add(tensor(infer, Contract.F_INPUTS, infer.inputs, Contract.ACTIVATIONS));
    tensor(features, Contract.F_INPUTS, features.inputs, Contract.IMAGES);
    tensor(train, Contract.F_INPUTS, train.inputs, Contract.LABELS);
    for (String output : List.of(Contract.LOSS, Contract.ACCURACY)) {
      tensor(train, Contract.F_OUTPUTS, train.outputs, output);
    }
    for (String output : List.of(Contract.EMBEDDINGS, Contract.LOGITS)) {
      tensor(infer, Contract.F_OUTPUTS, infer.outputs, output);
    }
    for (String name : Arrays.asList(cut.episodeSignature, cut.accumulateSignature)) {
      if (name == null) {
        continue;
      }
      GraphSignature step = graph.get(name);
      activations.add(tensor(step, Contract.F_INPUTS, step.inputs, Contract.ACTIVATIONS));
      tensor(step, Contract.F_INPUTS, step.inputs, Contract.LABELS);
      if (name.equals(cut.episodeSignature)) {
        GraphSignature.TensorInfo support = tensor(step, Contract.F_INPUTS, step.inputs, Contract.SUPPORT_MASK);
        if (!"float32".equals(support.dtype)) {
          throw lie(Contract.F_SIGNATURES + "." + name + "." + Contract.F_INPUTS + "." + Contract.SUPPORT_MASK,
              "float32", support.dtype);
        }
      }
      for (String output : List.of(Contract.LOSS, Contract.ACCURACY)) {
        tensor(step, Contract.F_OUTPUTS, step.outputs, output);
      }
    }
    int[] expected = cut.shape();
    String field = Contract.F_CACHED_CUTS + "[" + cut.layer + "]." + Contract.F_SHAPE;
    for (GraphSignature.TensorInfo info : activations) {
      if (!"float32".equals(info.dtype)) {
        throw lie(field + " (dtype of " + Contract.ACTIVATIONS + ")", "float32", info.dtype);
      }
      int[] shape = info.shape();
      if (shape != null && (shape.length != expected.length + 1
          || !Arrays.equals(Arrays.copyOfRange(shape, 1, shape.length), expected))) {
        throw lie(field, Arrays.toString(expected), Arrays.toString(shape) + " (with the batch)");
      }
    }
  }

  private static GraphSignature.TensorInfo tensor(GraphSignature signature, String kind,
      Map<String, GraphSignature.TensorInfo> tensors, String name) throws ModelMetadataException {
    GraphSignature.TensorInfo info = tensors.get(name);
    if (info == null) {
      throw lie(Contract.F_SIGNATURES + "." + signature.name + "." + kind, "a tensor " + name, "none (has "
          + tensors.keySet() + ")");
    }
    return info;
  }

  private static ModelMetadataException lie(String field, Object metadataValue, Object graphValue) {
    return new ModelMetadataException("model file lies: metadata " + field + " = " + metadataValue
        + " but the graph has " + graphValue);
  }

  /** Length S of the {@code set_selection} channel mask. */
  public int maskLength() {
    return maskLength;
  }

  /** Offset of a candidate layer's channels in the mask. @throws IllegalArgumentException for a non-candidate */
  public int maskOffset(String layer) {
    Integer offset = maskOffsets.get(layer);
    if (offset == null) {
      throw new IllegalArgumentException("layer " + layer + " is not a candidate; candidates: " + candidates);
    }
    return offset;
  }

  /** The layer spec of a candidate by name. */
  public LayerSpec candidate(String layer) {
    maskOffset(layer);
    return table.get(layer);
  }

  /**
   * The {@code cached_cuts} entries (Python {@code tflite_train.contract.validation._validate_cached_cuts}):
   * each names a table layer at its index, has a positive activation shape and the contract's three
   * signature names for that layer; sorted ascending by index (a layer may have one cut only).
   */
  private static List<CachedCut> parseCachedCuts(List<Object> entries, LayerTable table) throws ModelMetadataException {
    List<CachedCut> cuts = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < entries.size(); i++) {
      JsonFields f = JsonFields.of(entries.get(i), Contract.F_CACHED_CUTS + "[" + i + "]");
      String layer = f.string(Contract.F_LOWEST_LAYER);
      int index = f.integer(Contract.F_LOWEST_INDEX, 0, Integer.MAX_VALUE);
      int tableIndex;
      try {
        tableIndex = table.indexOf(layer);
      } catch (IllegalArgumentException err) {
        throw new ModelMetadataException(f.path(Contract.F_LOWEST_LAYER) + " names unknown layer \"" + layer + "\"", err);
      }
      if (tableIndex != index) {
        throw new ModelMetadataException(f.path(Contract.F_LOWEST_INDEX) + " is " + index + " but " + Contract.F_LAYERS
            + " has \"" + layer + "\" at index " + tableIndex);
      }
      if (!seen.add(layer)) {
        throw new ModelMetadataException(Contract.F_CACHED_CUTS + " lists layer \"" + layer + "\" twice");
      }
      List<Object> dims = f.array(Contract.F_SHAPE);
      int[] shape = new int[dims.size()];
      for (int d = 0; d < shape.length; d++) {
        long size = JsonFields.asLong(dims.get(d), f.path(Contract.F_SHAPE) + "[" + d + "]");
        if (size < 1 || size > Integer.MAX_VALUE) {
          throw new ModelMetadataException(f.path(Contract.F_SHAPE) + " must be positive sizes; got " + dims);
        }
        shape[d] = (int) size;
      }
      if (shape.length == 0) {
        throw new ModelMetadataException(f.path(Contract.F_SHAPE) + " must be positive sizes; got []");
      }
      String features = cutSignature(f, Contract.F_FEATURES_SIGNATURE, Contract.FEATURES_PREFIX + layer);
      String train = cutSignature(f, Contract.F_TRAIN_SIGNATURE, Contract.TRAIN_FROM_PREFIX + layer);
      String infer = cutSignature(f, Contract.F_INFER_SIGNATURE, Contract.INFER_FROM_PREFIX + layer);
      long macs = f.integer(Contract.F_SUFFIX_FORWARD_MACS);
      if (macs < 0) {
        throw new ModelMetadataException(f.path(Contract.F_SUFFIX_FORWARD_MACS) + " must be >= 0; got " + macs);
      }
      // optional (files exported before the episode signatures have neither)
      String episode = f.has(Contract.F_EPISODE_SIGNATURE)
          ? cutSignature(f, Contract.F_EPISODE_SIGNATURE, Contract.EPISODE_FROM_PREFIX + layer) : null;
      String accumulate = f.has(Contract.F_ACCUMULATE_SIGNATURE)
          ? cutSignature(f, Contract.F_ACCUMULATE_SIGNATURE, Contract.ACCUMULATE_FROM_PREFIX + layer) : null;
      cuts.add(new CachedCut(layer, index, shape, features, train, infer, macs, episode, accumulate));
    }
    cuts.sort(Comparator.comparingInt(cut -> cut.index));
    return Collections.unmodifiableList(cuts);
  }

  private static String cutSignature(JsonFields f, String key, String expected) throws ModelMetadataException {
    String name = f.string(key);
    if (!name.equals(expected)) {
      throw new ModelMetadataException(f.path(key) + " is \"" + name + "\"; expected \"" + expected + "\"");
    }
    return name;
  }

  static InputSpec parseInput(JsonFields in) throws ModelMetadataException {
    int height = in.integer(Contract.F_HEIGHT, 1, 1 << 16);
    int width = in.integer(Contract.F_WIDTH, 1, 1 << 16);
    int channels = in.integer(Contract.F_CHANNELS, 1, 4);
    String dtype = in.string(Contract.F_DTYPE);
    if (!"float32".equals(dtype)) {
      throw new ModelMetadataException(in.path(Contract.F_DTYPE) + " must be \"float32\"; got \"" + dtype + "\"");
    }
    List<Double> range = in.numbers(Contract.F_RANGE);
    if (range.size() != 2 || !(range.get(0) < range.get(1))) {
      throw new ModelMetadataException(in.path(Contract.F_RANGE) + " must be [low, high] with low < high; got " + range);
    }
    List<Double> mean = in.numbers(Contract.F_MEAN);
    List<Double> std = in.numbers(Contract.F_STD);
    if (mean.size() != channels || std.size() != channels) {
      throw new ModelMetadataException(in.path(Contract.F_MEAN) + " and " + in.path(Contract.F_STD) + " must have "
          + channels + " entries; got " + mean.size() + " and " + std.size());
    }
    for (double s : std) {
      if (!(s > 0)) {
        throw new ModelMetadataException(in.path(Contract.F_STD) + " entries must be > 0; got " + std);
      }
    }
    String order = in.has(Contract.F_CHANNEL_ORDER) ? in.string(Contract.F_CHANNEL_ORDER) : Contract.CHANNEL_ORDER_RGB;
    if (!order.equals(Contract.CHANNEL_ORDER_RGB) && !order.equals(Contract.CHANNEL_ORDER_BGR)) {
      throw new ModelMetadataException(in.path(Contract.F_CHANNEL_ORDER) + " must be \"" + Contract.CHANNEL_ORDER_RGB
          + "\" or \"" + Contract.CHANNEL_ORDER_BGR + "\"; got " + JsonFields.describe(order));
    }
    if (order.equals(Contract.CHANNEL_ORDER_BGR) && channels != 3) {
      throw new ModelMetadataException(in.path(Contract.F_CHANNEL_ORDER) + " \"" + order + "\" needs "
          + in.path(Contract.F_CHANNELS) + " 3; got " + channels);
    }
    return new InputSpec(height, width, channels, dtype, range.get(0), range.get(1), mean, std, order);
  }

  private static OptimizerConfig parseOptimizer(JsonFields opt) throws ModelMetadataException {
    Optimizer optimizer;
    try {
      optimizer = Optimizer.fromName(opt.string(Contract.F_NAME));
    } catch (IllegalArgumentException err) {
      throw new ModelMetadataException(opt.path(Contract.F_NAME) + ": " + err.getMessage(), err);
    }
    double lr = opt.number(Contract.LEARNING_RATE);
    if (!(lr > 0)) {
      throw new ModelMetadataException(opt.path(Contract.LEARNING_RATE) + " must be > 0; got " + lr);
    }
    double beta1 = opt.has(Contract.F_BETA1) ? opt.number(Contract.F_BETA1) : 0.9;
    double beta2 = opt.has(Contract.F_BETA2) ? opt.number(Contract.F_BETA2) : 0.999;
    double epsilon = opt.has(Contract.F_EPSILON) ? opt.number(Contract.F_EPSILON) : 1e-7;
    double momentum = opt.has(Contract.F_MOMENTUM) ? opt.number(Contract.F_MOMENTUM) : 0.0;
    return new OptimizerConfig(optimizer, lr, beta1, beta2, epsilon, momentum);
  }

  private static MetadataLayer parseLayer(JsonFields f) throws ModelMetadataException {
    LayerSpec spec;
    try {
      spec = new LayerSpec(f.integer(Contract.F_INDEX, 0, Integer.MAX_VALUE), f.string(Contract.F_NAME),
          f.integer(Contract.F_BLOCK, -1, Integer.MAX_VALUE), f.string(Contract.F_ROLE),
          f.integer(Contract.F_KERNEL, 1, 1024), f.integer(Contract.F_STRIDE, 1, 1024),
          f.integer(Contract.F_IN_CHANNELS, 1, Integer.MAX_VALUE), f.integer(Contract.F_OUT_CHANNELS, 1, Integer.MAX_VALUE),
          f.integer(Contract.F_GROUPS, 1, Integer.MAX_VALUE), pair(f, Contract.F_IN_HW), pair(f, Contract.F_OUT_HW),
          f.string(Contract.F_ACTIVATION));
    } catch (IllegalArgumentException err) {
      throw new ModelMetadataException(f.path("") + " invalid: " + err.getMessage(), err);
    }
    for (int axis = 0; axis < 2; axis++) {
      int in = axis == 0 ? spec.inHeight() : spec.inWidth();
      int out = axis == 0 ? spec.outHeight() : spec.outWidth();
      boolean same = out == (in + spec.stride - 1) / spec.stride;
      boolean valid = in >= spec.kernel && out == (in - spec.kernel) / spec.stride + 1;
      if (!same && !valid) {
        throw new ModelMetadataException(f.path(Contract.F_OUT_HW) + " must be ceil(in_hw / stride) (\"same\" padding) or "
            + "floor((in_hw - kernel) / stride) + 1 (\"valid\") for layer " + spec.name);
      }
    }
    long params = f.integer(Contract.F_PARAMS);
    long forwardMacs = f.integer(Contract.F_FORWARD_MACS);
    if (params <= 0 || forwardMacs <= 0) {
      throw new ModelMetadataException(f.path(Contract.F_PARAMS) + " and " + Contract.F_FORWARD_MACS
          + " must be positive for layer " + spec.name);
    }
    return new MetadataLayer(spec, params, forwardMacs, f.bool(Contract.F_CANDIDATE));
  }

  private static int[] pair(JsonFields f, String key) throws ModelMetadataException {
    List<Object> values = f.array(key);
    if (values.size() != 2) {
      throw new ModelMetadataException(f.path(key) + " must have 2 entries; got " + values.size());
    }
    int[] out = new int[2];
    for (int i = 0; i < 2; i++) {
      long v = JsonFields.asLong(values.get(i), f.path(key) + "[" + i + "]");
      if (v < 1 || v > (1 << 16)) {
        throw new ModelMetadataException(f.path(key) + "[" + i + "] must be in 1..65536; got " + v);
      }
      out[i] = (int) v;
    }
    return out;
  }
}
