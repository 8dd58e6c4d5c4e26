"""The adaptation-cost table (``bench.adaptation_cost.render``): seconds over the same process's infer time."""

from bench.adaptation_cost import render


def test_cost_is_seconds_over_infer_seconds_per_runtime_and_phase():
    results = [{"runtime": "litert", "infer_seconds": 0.002, "rows": {
        "pmf": {"seconds": 0.9, "phases": {"head": 0.05, "training": 0.85}, "updates": 20, "rate": 0.001},
        "previous": {"seconds": 2.0, "phases": {"training": 2.0}, "updates": 1000, "rate": None}}}]
    text = render(results, "python -m bench.adaptation_cost ...", 25)
    assert "| litert | pmf | 2.00 | 0.90 | **450** | head 25, training 425 | 20 | 0.001 |" in text
    assert "| litert | previous | 2.00 | 2.00 | **1000** | training 1000 | 1000 | - |" in text
    assert "25 support images" in text and "<= 500" in text
