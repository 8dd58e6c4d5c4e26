package org.tflitetrain.core.adapt;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.tflitetrain.core.Resources.list;
import static org.tflitetrain.core.Resources.obj;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tflitetrain.core.Resources;
import org.tflitetrain.core.adapt.AdaptationConfig.BatchMode;
import org.tflitetrain.core.adapt.AdaptationConfig.ChoiceScore;
import org.tflitetrain.core.adapt.AdaptationConfig.PrototypeMode;
import org.tflitetrain.core.json.Json;
import org.tflitetrain.core.model.Contract;

/**
 * The pure parts of the fine-tuning procedure against Python ({@code procedure.json}, written by
 * {@code tools.golden.procedure_vectors}): {@link RateChoice#heldOutScore} (accuracy exact, cross-entropy
 * within 1e-5: the inputs are read as floats), {@link RateChoice#choose} (rate and reason, refusals) and
 * {@link UpdatePlan#plan} (every field and the note, exactly); plus the held-out split's rule (one image per class, the rest held out).
 */
public class ProcedureGoldenTest {
  private static Map<String, Object> golden() {
    return obj(Json.parse(Resources.text("/golden/procedure.json")));
  }

  private static float[][] matrix(Object json) {
    List<Object> rows = list(json);
    float[][] out = new float[rows.size()][];
    for (int i = 0; i < out.length; i++) {
      List<Object> row = list(rows.get(i));
      out[i] = new float[row.size()];
      for (int j = 0; j < out[i].length; j++) {
        out[i][j] = ((Number) row.get(j)).floatValue();
      }
    }
    return out;
  }

  private static int[] ints(Object json) {
    return list(json).stream().mapToInt(x -> ((Number) x).intValue()).toArray();
  }

  private static float[] floats(Object json) {
    List<Object> values = list(json);
    float[] out = new float[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = ((Number) values.get(i)).floatValue();
    }
    return out;
  }

  @Test
  public void heldOutScoreEqualsPythons() {
    int cases = 0;
    for (Object item : list(golden().get("held_out_score"))) {
      Map<String, Object> c = obj(item);
      // the inputs are written as doubles with at most 4 decimals; as floats they differ by < 1e-7 relative
      double[] score = RateChoice.heldOutScore(matrix(c.get(Contract.EMBEDDINGS)), ints(c.get("labels")),
          matrix(c.get(Contract.PROTOTYPES)), ((Number) c.get("scale")).doubleValue());
      String where = "case " + cases;
      assertEquals(where, ((Number) c.get("accuracy")).doubleValue(), score[0], 0);
      assertEquals(where, ((Number) c.get("loss")).doubleValue(), score[1], 1e-5);
      cases++;
    }
    assertEquals(4, cases);
  }

  @Test
  public void chooseRateEqualsPythons() {
    int cases = 0;
    int errors = 0;
    for (Object item : list(golden().get("choose_rate"))) {
      Map<String, Object> c = obj(item);
      float[] rates = floats(c.get("rates"));
      List<Object> rawScores = list(c.get("scores"));
      double[][] scores = new double[rawScores.size()][];
      for (int i = 0; i < scores.length; i++) {
        List<Object> pair = list(rawScores.get(i));
        scores[i] = new double[] {((Number) pair.get(0)).doubleValue(), ((Number) pair.get(1)).doubleValue()};
      }
      int held = ((Number) c.get("held_out")).intValue();
      String rule = (String) c.get("choice_score");
      String where = "case " + cases + " " + c;
      if (c.containsKey("error")) {
        assertThrows(where, IllegalArgumentException.class,
            () -> RateChoice.choose(rates, scores, held, ChoiceScore.fromName(rule)));
        errors++;
      } else {
        RateChoice choice = RateChoice.choose(rates, scores, held, ChoiceScore.fromName(rule));
        assertEquals(where, ((Number) c.get("rate")).floatValue(), choice.rate, 0f);
        assertEquals(where, c.get("reason"), choice.reason);
        assertEquals(where, held, choice.heldOut);
      }
      cases++;
    }
    assertEquals(11, cases);
    assertEquals(4, errors);
  }

  @Test
  public void planUpdatesEqualsPythons() {
    int cases = 0;
    int noted = 0;
    for (Object item : list(golden().get("plan_updates"))) {
      Map<String, Object> c = obj(item);
      int limit = ((Number) c.get("fits_rows")).intValue();
      UpdatePlan plan = UpdatePlan.plan(PrototypeMode.fromName((String) c.get("prototype_mode")),
          BatchMode.fromName((String) c.get("batch_mode")), ((Number) c.get("batch")).intValue(),
          ((Number) c.get("num_support")).intValue(), (Boolean) c.get("cached"), (Boolean) c.get("episode"),
          (Boolean) c.get("accumulate"), rows -> rows <= limit);
      Map<String, Object> want = obj(c.get("plan"));
      String where = "case " + cases + " " + c;
      assertEquals(where, want.get("prototype_mode"), plan.prototypeMode.pythonName);
      assertEquals(where, want.get("mode"), plan.batchMode.pythonName);
      assertEquals(where, ((Number) want.get("batch")).intValue(), plan.batch);
      assertEquals(where, ((Number) want.get("rows")).intValue(), plan.rows);
      assertEquals(where, want.get("note"), plan.note);
      noted += plan.note.isEmpty() ? 0 : 1;
      cases++;
    }
    assertEquals(72, cases);
    assertTrue(noted > 20);
  }

  @Test
  public void heldOutSplitKeepsOneImagePerClassAndHoldsOutTheRest() {
    int[] labels = {0, 1, 2, 0, 1, 2, 0, 0, 1};
    for (long seed = 0; seed < 20; seed++) {
      int[][] split = RateChoice.heldOutSplit(labels, 3, seed);
      int[] prototypes = split[0];
      int[] held = split[1];
      assertEquals(3, prototypes.length);
      assertEquals(labels.length - 3, held.length);
      int[] classes = Arrays.stream(prototypes).map(i -> labels[i]).sorted().toArray();
      assertArrayEquals(new int[] {0, 1, 2}, classes);
      int[] all = new int[labels.length];
      System.arraycopy(prototypes, 0, all, 0, 3);
      System.arraycopy(held, 0, all, 3, held.length);
      Arrays.sort(all);
      assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5, 6, 7, 8}, all);
      assertTrue(isSorted(prototypes) && isSorted(held));
      assertArrayEquals(split[0], RateChoice.heldOutSplit(labels, 3, seed)[0]);  // seeded
    }
    // 1-shot: nothing to hold out
    assertEquals(0, RateChoice.heldOutSplit(new int[] {1, 0}, 2, 5)[1].length);
  }

  private static boolean isSorted(int[] values) {
    for (int i = 1; i < values.length; i++) {
      if (values[i] <= values[i - 1]) {
        return false;
      }
    }
    return true;
  }
}
