"""`python -m ember.tour` (what `make demo` runs) prints every chapter."""

import ember.tour


def test_tour_runs_every_chapter(capsys):
    assert ember.tour.main([]) == 0
    out = capsys.readouterr().out
    for number in range(1, len(ember.tour.CHAPTERS) + 1):
        assert f"== {number}. " in out
    assert "must match the size of tensor b (4)" in out  # the operators chapter
    # the autograd chapter: the model learned the spirals, the graph printed
    accuracy = float(out.split("training accuracy")[1].split("%")[0])
    assert accuracy >= 95.0
    assert "AccumulateGrad [64, 2] float32" in out
    # the script-compiler chapter: the peephole fired, a fusion group formed,
    # and the scripted function computed what eager code did
    assert "peephole: t(t(%x)) -> %x" in out
    assert "prim::FusionGroup_0" in out and "FUSED" in out
    assert float(out.split("largest difference")[1].split()[0]) < 1e-5
