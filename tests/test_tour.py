"""`python -m ember.tour` (what `make demo` runs) prints every chapter."""

import ember.tour


def test_tour_runs_every_chapter(capsys):
    assert ember.tour.main([]) == 0
    out = capsys.readouterr().out
    for number in range(1, len(ember.tour.CHAPTERS) + 1):
        assert f"== {number}. " in out
    assert "must match the size of tensor b (4)" in out  # the operators chapter
