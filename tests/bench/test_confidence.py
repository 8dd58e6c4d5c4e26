"""Golden tests of the bench's confidence intervals, worked by hand (t quantiles from a printed t table)."""

import math

import pytest

from bench.confidence import mean_ci95, mean_over_groups_ci95, paired_delta_ci95, t_quantile


def test_t_quantiles_match_the_table():
    # Student's t, two-sided 95 %: 2 df 4.303, 3 df 3.182, 4 df 2.776 (any printed table).
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(3) == pytest.approx(3.182446, abs=1e-6)
    assert t_quantile(4) == pytest.approx(2.776445, abs=1e-6)


def test_mean_ci95_by_hand():
    # 1, 2, 3: mean 2, s = 1, n = 3: ci = t(2) / sqrt(3) = 4.302653 / 1.732051 = 2.484138
    result = mean_ci95([1.0, 2.0, 3.0])
    assert (result.mean, result.n, result.df) == (pytest.approx(2.0), 3, 2.0)
    assert result.ci95 == pytest.approx(2.484138, abs=1e-6)
    with pytest.raises(ValueError, match="at least 2"):
        mean_ci95([1.0])
    with pytest.raises(ValueError, match="finite"):
        mean_ci95([1.0, math.nan])


def test_paired_delta_by_hand():
    # a - b = 5, 2, 5, 8: mean 5, squared deviations 0 + 9 + 0 + 9 = 18, s^2 = 18 / 3 = 6,
    # SE = sqrt(6 / 4) = 1.224745, ci = t(3) * SE = 3.182446 * 1.224745 = 3.897685
    a, b = [60.0, 70.0, 80.0, 90.0], [55.0, 68.0, 75.0, 82.0]
    delta = paired_delta_ci95(a, b)
    assert delta.mean == pytest.approx(5.0) and delta.ci95 == pytest.approx(3.897685, abs=1e-5)
    # The unpaired intervals of a and b overlap widely (each about ± 20); the paired one does not reach 0.
    assert mean_ci95(a).ci95 > 20 and delta.low > 0
    assert paired_delta_ci95(b, a).mean == pytest.approx(-5.0)
    with pytest.raises(ValueError, match="same tasks"):
        paired_delta_ci95(a, b[:3])


def test_mean_over_targets_by_hand():
    # Target 1 differences 5, 2, 5, 8 (mean 5, s^2 = 6, n = 4); target 2: 1, 3 (mean 2, s^2 = 2, n = 2).
    # Average = (5 + 2) / 2 = 3.5 (each target weighs the same, whatever its N).
    # v1 = 6 / 4 / 2^2 = 0.375, v2 = 2 / 2 / 2^2 = 0.25, SE = sqrt(0.625) = 0.790569
    # df = 0.625^2 / (0.375^2 / 3 + 0.25^2 / 1) = 0.390625 / 0.109375 = 25 / 7 = 3.571429
    # t(25/7) = 2.912910 (between the table's 3.182 at 3 df and 2.776 at 4 df); ci = 2.912910 * 0.790569 = 2.302857
    result = mean_over_groups_ci95([[5.0, 2.0, 5.0, 8.0], [1.0, 3.0]])
    assert result.mean == pytest.approx(3.5) and result.n == 6
    assert result.df == pytest.approx(25 / 7)
    assert result.ci95 == pytest.approx(2.302857, abs=1e-5)
    # The mean of the per-target means, not of the pooled values ((5+2+5+8+1+3) / 6 = 4).
    assert result.mean != pytest.approx(4.0)


def test_one_group_is_the_plain_interval():
    values = [3.0, 7.0, 4.0, 9.0, 1.0]
    one, plain = mean_over_groups_ci95([values]), mean_ci95(values)
    assert (one.mean, one.df, one.n) == (pytest.approx(plain.mean), pytest.approx(plain.df), plain.n)
    assert one.ci95 == pytest.approx(plain.ci95)


def test_constant_differences_give_a_zero_width_interval():
    result = mean_over_groups_ci95([[2.0, 2.0], [4.0, 4.0, 4.0]])
    assert (result.mean, result.ci95) == (pytest.approx(3.0), 0.0)
    with pytest.raises(ValueError, match="at least one group"):
        mean_over_groups_ci95([])
