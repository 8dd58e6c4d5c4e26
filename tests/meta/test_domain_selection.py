"""Leave-one-domain-out selection on a hand-computable grid."""

import pytest

from tflite_train.meta.domain_selection import HeldOutScore, lodo_scores, select_leave_one_domain_out

# (candidate, alpha, step) -> (accuracy with emoji held out, with glyphs held out)
GRID = {
    ("A", 1.0, 10): (0.90, 0.80),  # mean 0.85
    ("A", 1.0, 20): (0.95, 0.70),  # 0.825: best on emoji alone, poor on glyphs
    ("A", 0.5, 10): (0.86, 0.88),  # 0.87
    ("A", 0.5, 20): (0.88, 0.86),  # 0.87 (tie with step 10: fewer steps win)
    ("B", 1.0, 10): (0.84, 0.92),  # 0.88
    ("B", 1.0, 20): (0.85, 0.93),  # 0.89 <- the choice
    ("B", 0.5, 10): (0.82, 0.91),  # 0.865
    ("B", 0.5, 20): (0.83, 0.92),  # 0.875
}
START = (0.80, 0.90)  # step 0: the ImageNet weights, the same for every candidate and alpha: 0.85


def _scores(grid, start=START):
    out = []
    for (c, a, t), accs in grid.items():
        out += [HeldOutScore(c, h, t, a, x) for h, x in zip(("emoji", "glyphs"), accs)]
    for c in sorted({k[0] for k in grid}):
        for a in sorted({k[1] for k in grid}):
            out += [HeldOutScore(c, h, 0, a, x) for h, x in zip(("emoji", "glyphs"), start)]
    return out


def test_the_choice_maximises_the_mean_over_held_out_sources():
    choice = select_leave_one_domain_out(_scores(GRID))
    assert (choice.candidate, choice.alpha, choice.step) == ("B", 1.0, 20)
    assert choice.score == pytest.approx(0.89)
    assert choice.per_held_out == pytest.approx({"emoji": 0.85, "glyphs": 0.93})
    table = lodo_scores(_scores(GRID))
    assert table[("A", 1.0, 20)][0] == pytest.approx(0.825)
    assert table[("A", 0.5, 0)][0] == pytest.approx(0.85)


def test_ties_go_to_fewer_steps_then_smaller_alpha_then_the_earlier_candidate():
    grid = {k: v for k, v in GRID.items() if k[0] == "A" and k[1] == 0.5}  # 0.87 at steps 10 and 20
    assert select_leave_one_domain_out(_scores(grid)).step == 10
    grid = {("A", 0.5, 10): (0.86, 0.88), ("A", 1.0, 10): (0.86, 0.88)}
    assert select_leave_one_domain_out(_scores(grid)).alpha == 0.5
    grid = {("B", 1.0, 10): (0.86, 0.88), ("A", 1.0, 10): (0.86, 0.88)}
    assert select_leave_one_domain_out(_scores(grid)).candidate == "B"  # B is given first
    grid = {("A", 1.0, 10): (0.904, 0.904), ("A", 1.0, 20): (0.9040000000000001, 0.904)}  # float noise is a tie
    assert select_leave_one_domain_out(_scores(grid)).step == 10


def test_the_start_wins_when_no_candidate_transfers():
    grid = {("A", 1.0, 10): (0.99, 0.60)}  # far better on one held-out source, worse on average
    choice = select_leave_one_domain_out(_scores(grid))
    assert choice.step == 0 and choice.score == pytest.approx(0.85)


def test_incomplete_or_duplicated_scores_are_refused():
    scores = _scores(GRID)
    with pytest.raises(ValueError, match="B alpha=1 step=20: no score with glyphs held out"):
        lodo_scores([s for s in scores if not (s.candidate == "B" and s.step == 20 and s.alpha == 1.0
                                                and s.held_out == "glyphs")])
    with pytest.raises(ValueError, match="given twice"):
        lodo_scores(scores + scores[:1])
    with pytest.raises(ValueError, match="no held-out scores"):
        select_leave_one_domain_out([])
