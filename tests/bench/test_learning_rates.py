"""The (learning rate, passes) choice of a tuning round, by hand."""

import pytest


def test_best_setting_by_hand():
    from bench.learning_rates import best_learning_rate, best_setting

    assert best_learning_rate({1e-3: 50.0, 3e-3: 52.5, 3e-4: 41.0}) == 3e-3
    assert best_learning_rate({1e-3: 50.0, 3e-3: 50.0}) == 1e-3  # tie: the smaller rate
    assert best_setting({(1e-3, 40): 50.0, (3e-3, 10): 52.5, (1e-3, 10): 52.5}) == (1e-3, 10)
    assert best_setting({(1e-3, 40): 50.0, (1e-3, 10): 50.0, (3e-4, 40): 50.0}) == (1e-3, 10)  # tie: fewer epochs first
    with pytest.raises(ValueError, match="finite"):
        best_learning_rate({1e-3: float("nan")})
    with pytest.raises(ValueError, match="at least one"):
        best_setting({})
