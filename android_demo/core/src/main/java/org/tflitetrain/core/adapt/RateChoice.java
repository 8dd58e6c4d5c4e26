package org.tflitetrain.core.adapt;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.tflitetrain.core.adapt.AdaptationConfig.ChoiceScore;

/**
 * The per-task choice of the learning rate on held-out support images (P>M>F, Hu et al. CVPR 2022; TinyTrain
 * appendix C): the port of Python's {@code tflite_train.runtime.adaptation.rate_choice} (its pure functions are pinned by the
 * golden {@code procedure.json}).
 *
 * <p>The support set S splits into a prototype set S_p (one image per class) and a held-out set S_h (the rest);
 * each candidate rate eta fine-tunes on S_p and is scored on S_h by the nearest-prototype accuracy
 * acc(eta) = 1/|S_h| sum [argmax_k cos(f_eta(x), c_k^eta) = y], with c_k^eta the mean f_eta over S_p's class k;
 * {@link ChoiceScore#ACCURACY_LOSS} breaks accuracy ties by the held-out cross-entropy of the cosine head
 * ce(eta) = 1/|S_h| sum -log softmax_k(s cos(f_eta(x), c_k^eta))[y]. Ties then go to the rate listed first (0
 * first: "no update" wins unless a rate does strictly better). With nothing held out (every class one image) the
 * rule is {@link #NO_HOLDOUT_RULE}: rate 0.
 */
public final class RateChoice {
  /** What the choice does when the held-out set is empty (Python's {@code NO_HOLDOUT_RULE}). */
  public static final String NO_HOLDOUT_RULE =
      "no held-out image (every class has one support image): rate 0, no update (P>M>F's rule)";

  /** The chosen rate (0 = no update). */
  public final float rate;
  /** The candidate rates, in the order given. */
  private final float[] rates;
  /** Each candidate's held-out accuracy (empty when nothing was held out). */
  private final double[] accuracies;
  /** Held-out images the rates were scored on. */
  public final int heldOut;
  /** One line on why {@link #rate} won. */
  public final String reason;

  private RateChoice(float rate, float[] rates, double[] accuracies, int heldOut, String reason) {
    this.rate = rate;
    this.rates = rates;
    this.accuracies = accuracies;
    this.heldOut = heldOut;
    this.reason = reason;
  }

  /** The candidate rates that were scored (a copy; empty when nothing was held out). */
  public float[] rates() {
    return rates.clone();
  }

  /** Each scored rate's held-out accuracy (a copy, in the order of {@link #rates()}). */
  public double[] accuracies() {
    return accuracies.clone();
  }

  /**
   * (prototype indices, held-out indices) of a support set, both ascending: one image per class, picked
   * uniformly by {@code new java.util.Random(seed + 2)} (apart from the pseudo-query generator
   * {@code Random(seed)}; Python draws with {@code numpy.random.default_rng(seed + 2)}, so the picks differ
   * between the languages but not the rule), forms the prototypes; every other image is held out.
   *
   * @param labels classes 0..numClasses-1 (a continued run's class without a row gets no prototype image)
   * @throws IllegalArgumentException a label outside 0..numClasses-1
   */
  public static int[][] heldOutSplit(int[] labels, int numClasses, long seed) {
    List<List<Integer>> members = new ArrayList<>();
    for (int k = 0; k < numClasses; k++) {
      members.add(new ArrayList<>());
    }
    for (int i = 0; i < labels.length; i++) {
      if (labels[i] < 0 || labels[i] >= numClasses) {
        throw new IllegalArgumentException("labels must be in 0.." + (numClasses - 1) + "; got " + labels[i]);
      }
      members.get(labels[i]).add(i);
    }
    Random random = new Random(seed + 2);
    boolean[] chosen = new boolean[labels.length];
    int present = 0;
    for (int k = 0; k < numClasses; k++) {
      List<Integer> rows = members.get(k);
      if (!rows.isEmpty()) {
        chosen[rows.get(random.nextInt(rows.size()))] = true;
        present++;
      }
    }
    int[] prototypes = new int[present];
    int[] held = new int[labels.length - present];
    int p = 0;
    int h = 0;
    for (int i = 0; i < labels.length; i++) {
      if (chosen[i]) {
        prototypes[p++] = i;
      } else {
        held[h++] = i;
      }
    }
    return new int[][] {prototypes, held};
  }

  /**
   * {accuracy, mean cross-entropy} of the cosine classifier logits = s cos(e, c_k) on the rows (the exported
   * head; an argmax tie goes to the lower class id), in double precision as Python's {@code held_out_score}.
   *
   * @param embeddings one row per image
   * @param labels each row's class, an index into {@code prototypes}
   * @param prototypes one row per class
   * @param scale the head scale s (metadata {@code head.scale})
   */
  public static double[] heldOutScore(float[][] embeddings, int[] labels, float[][] prototypes, double scale) {
    if (embeddings.length != labels.length || embeddings.length == 0) {
      throw new IllegalArgumentException("need one label per embedding row and at least one row; got "
          + embeddings.length + " rows and " + labels.length + " labels");
    }
    double[][] c = new double[prototypes.length][];
    for (int k = 0; k < c.length; k++) {
      c[k] = unit(prototypes[k]);
    }
    int correct = 0;
    double loss = 0;
    for (int i = 0; i < embeddings.length; i++) {
      double[] e = unit(embeddings[i]);
      double[] logits = new double[c.length];
      double max = Double.NEGATIVE_INFINITY;
      int best = 0;
      for (int k = 0; k < c.length; k++) {
        double dot = 0;
        for (int j = 0; j < e.length; j++) {
          dot += e[j] * c[k][j];
        }
        logits[k] = scale * dot;
        if (logits[k] > max) {
          max = logits[k];
          best = k;
        }
      }
      double sum = 0;
      for (int k = 0; k < c.length; k++) {
        sum += Math.exp(logits[k] - max);
      }
      loss -= logits[labels[i]] - max - Math.log(sum);
      correct += best == labels[i] ? 1 : 0;
    }
    return new double[] {(double) correct / labels.length, loss / labels.length};
  }

  private static double[] unit(float[] v) {
    double norm = 0;
    for (float x : v) {
      norm += (double) x * x;
    }
    norm = Math.sqrt(norm + 1e-12);
    double[] out = new double[v.length];
    for (int j = 0; j < v.length; j++) {
      out[j] = v[j] / norm;
    }
    return out;
  }

  /**
   * The rate with the best held-out score by {@code rule} (Python's {@code choose_rate}).
   *
   * @param rates the candidate rates in priority order (0 first: "no update" wins ties)
   * @param scores each rate's {accuracy, cross-entropy} as {@link #heldOutScore} gives (ignored when
   *     {@code heldOut} is 0)
   * @param heldOut number of held-out images; 0 applies {@link #NO_HOLDOUT_RULE}
   * @throws IllegalArgumentException no rates, a negative or non-finite rate, or scores of another length
   */
  public static RateChoice choose(float[] rates, double[][] scores, int heldOut, ChoiceScore rule) {
    if (rates == null || rates.length == 0) {
      throw new IllegalArgumentException("candidate rates must be a non-empty list of finite numbers >= 0; got "
          + Arrays.toString(rates));
    }
    for (float rate : rates) {
      if (!(rate >= 0) || Float.isInfinite(rate)) {
        throw new IllegalArgumentException("candidate rates must be a non-empty list of finite numbers >= 0; got "
            + Arrays.toString(rates));
      }
    }
    if (rule == null) {
      throw new IllegalArgumentException("rule must not be null");
    }
    if (heldOut == 0) {
      return new RateChoice(0f, new float[0], new double[0], 0, NO_HOLDOUT_RULE);
    }
    if (scores.length != rates.length) {
      throw new IllegalArgumentException(scores.length + " scores for " + rates.length + " candidate rates");
    }
    int best = 0;
    for (int i = 1; i < rates.length; i++) {
      double accuracy = scores[i][0];
      double bestAccuracy = scores[best][0];
      if (accuracy > bestAccuracy
          || (rule == ChoiceScore.ACCURACY_LOSS && accuracy == bestAccuracy && scores[i][1] < scores[best][1])) {
        best = i;
      }
    }
    double[] accuracies = new double[rates.length];
    for (int i = 0; i < rates.length; i++) {
      accuracies[i] = scores[i][0];
    }
    String reason = String.format(Locale.ROOT, "best held-out accuracy %.3f on %d image(s)", scores[best][0], heldOut)
        + (rule == ChoiceScore.ACCURACY_LOSS ? String.format(Locale.ROOT, ", cross-entropy %.3f", scores[best][1]) : "")
        + (rates[best] == 0f ? " (no rate beat no update)" : "");
    return new RateChoice(rates[best], rates.clone(), accuracies, heldOut, reason);
  }

  @Override
  public String toString() {
    return "RateChoice(" + rate + ": " + reason + ")";
  }
}
