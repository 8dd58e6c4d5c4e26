package org.tflitetrain.core.model;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.json.JsonException;

/**
 * The metadata of a baked classifier, the file {@code tflite-train bake} writes (CONTRACT.md "Baked
 * classifier"; Python {@code tflite_train.runtime.baked.baked_classifier}): one signature {@link Contract#CLASSIFY}
 * from {@link Contract#IMAGES} to {@link Contract#LOGITS} [N, classes], no state; run it with
 * {@code Interpreter.runSignature} (or any {@code SignatureRunner}) after {@link #load} accepted it.
 *
 * <p>{@link #load} checks what Python's loader checks, before the bytes reach an interpreter: the integrity
 * seal ({@link ModelChecksum#verify}); the {@link Contract#BAKED_METADATA_NAME} entry (UTF-8 JSON; format
 * {@link Contract#BAKED_FORMAT} version {@link Contract#BAKED_FORMAT_VERSION}; class names, the export's input
 * object, head, model id, checkpoint sha256); and the graph: exactly the one signature, images float32
 * [-1, H, W, C] of the input object, logits float32 [-1, classes]. Unknown keys are ignored.
 */
public final class BakedClassifierMetadata {
  private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");

  /** The class of each logit, in order. */
  public final List<String> classNames;
  /** The images the classifier takes: the export's size and value range (normalised inside the graph). */
  public final InputSpec input;
  /** Cosine scale s of the head: logits_c = s cos(e, p_c). */
  public final double headScale;
  /** {@code model_id} of the export it was baked from. */
  public final String modelId;
  /** sha256 (hex) of the checkpoint file it was baked from. */
  public final String checkpointSha256;

  private BakedClassifierMetadata(JsonFields root) throws ModelMetadataException {
    String format = root.string(Contract.F_FORMAT);
    if (!Contract.BAKED_FORMAT.equals(format)) {
      throw new ModelMetadataException(root.path(Contract.F_FORMAT) + " must be \"" + Contract.BAKED_FORMAT
          + "\"; got " + JsonFields.describe(format));
    }
    long version = root.integer(Contract.F_FORMAT_VERSION);
    if (version != Contract.BAKED_FORMAT_VERSION) {
      throw new ModelMetadataException("unsupported " + Contract.F_FORMAT_VERSION + " " + version
          + "; this app reads version " + Contract.BAKED_FORMAT_VERSION + " (bake the classifier again or update the app)");
    }
    List<Object> names = root.array(Contract.CK_CLASS_NAMES);
    if (names.isEmpty()) {
      throw new ModelMetadataException(root.path(Contract.CK_CLASS_NAMES) + " must name at least one class");
    }
    List<String> parsed = new ArrayList<>();
    for (int i = 0; i < names.size(); i++) {
      if (!(names.get(i) instanceof String)) {
        throw new ModelMetadataException(root.path(Contract.CK_CLASS_NAMES) + "[" + i + "] must be a string; got "
            + JsonFields.describe(names.get(i)));
      }
      parsed.add((String) names.get(i));
    }
    classNames = Collections.unmodifiableList(parsed);
    input = ModelMetadata.parseInput(root.object(Contract.F_INPUT));
    JsonFields head = root.object(Contract.F_HEAD);
    String headType = head.string(Contract.F_TYPE);
    if (!Contract.HEAD_TYPE.equals(headType)) {
      throw new ModelMetadataException(head.path(Contract.F_TYPE) + " must be \"" + Contract.HEAD_TYPE + "\"; got "
          + JsonFields.describe(headType));
    }
    headScale = head.number(Contract.F_SCALE);
    if (!(headScale > 0)) {
      throw new ModelMetadataException(head.path(Contract.F_SCALE) + " must be > 0; got " + headScale);
    }
    modelId = root.string(Contract.F_MODEL_ID);
    if (modelId.isEmpty()) {
      throw new ModelMetadataException(root.path(Contract.F_MODEL_ID) + " must not be empty");
    }
    checkpointSha256 = root.string(Contract.F_CHECKPOINT_SHA256);
    if (!SHA256.matcher(checkpointSha256).matches()) {
      throw new ModelMetadataException(root.path(Contract.F_CHECKPOINT_SHA256) + " must be 64 lower-case hex digits; got "
          + JsonFields.describe(checkpointSha256));
    }
  }

  /** Parses and checks the metadata's UTF-8 JSON bytes (not the graph). */
  public static BakedClassifierMetadata parse(byte[] utf8) throws ModelMetadataException {
    String text;
    try {
      text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(utf8)).toString();
    } catch (CharacterCodingException err) {
      throw new ModelMetadataException(Contract.BAKED_METADATA_NAME + " metadata is not valid UTF-8", err);
    }
    try {
      return new BakedClassifierMetadata(JsonFields.of(Json.parse(text), ""));
    } catch (JsonException err) {
      throw new ModelMetadataException(Contract.BAKED_METADATA_NAME + " metadata is not valid JSON: " + err.getMessage(),
          err);
    }
  }

  /**
   * Checks a baked classifier's bytes (class documentation) and returns its metadata: call it before the bytes
   * reach an {@code Interpreter}.
   *
   * @throws ModelMetadataException one line naming the seal, the field or the signature, and what is wrong
   */
  public static BakedClassifierMetadata load(ByteBuffer model) throws ModelMetadataException {
    ModelChecksum.verify(model);
    List<String> entries = TfliteMetadataReader.names(model);
    if (!entries.contains(Contract.BAKED_METADATA_NAME)) {
      throw new ModelMetadataException("no " + Contract.BAKED_METADATA_NAME + " metadata entry: not a baked classifier"
          + (entries.contains(Contract.METADATA_NAME) ? " (an exported model: bake it with a checkpoint first)" : ""));
    }
    BakedClassifierMetadata metadata = parse(TfliteMetadataReader.read(model, Contract.BAKED_METADATA_NAME));
    metadata.validateGraph(TfliteMetadataReader.signatures(model));
    return metadata;
  }

  /** Checks that the graph is the one signature this metadata describes (class documentation). */
  public void validateGraph(Map<String, GraphSignature> graph) throws ModelMetadataException {
    if (!graph.keySet().equals(Collections.singleton(Contract.CLASSIFY))) {
      throw new ModelMetadataException("a baked classifier has the one signature \"" + Contract.CLASSIFY
          + "\"; this file has " + graph.keySet());
    }
    GraphSignature signature = graph.get(Contract.CLASSIFY);
    check(signature.inputs, Contract.IMAGES, new int[] {-1, input.height, input.width, input.channels}, "inputs");
    check(signature.outputs, Contract.LOGITS, new int[] {-1, classNames.size()}, "outputs");
  }

  private static void check(Map<String, GraphSignature.TensorInfo> tensors, String name, int[] shape, String kind)
      throws ModelMetadataException {
    GraphSignature.TensorInfo info = tensors.get(name);
    if (tensors.size() != 1 || info == null || !"float32".equals(info.dtype) || !Arrays.equals(shape, info.shape())) {
      throw new ModelMetadataException("signature \"" + Contract.CLASSIFY + "\" " + kind + " are " + tensors
          + "; the metadata says " + name + " float32" + Arrays.toString(shape));
    }
  }
}
