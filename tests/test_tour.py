"""`python -m ember.tour` (what `make demo` runs) prints every chapter."""

import ember.tour


def test_tour_runs_every_chapter(capsys, tmp_dir):
    assert ember.tour.main(["--out", str(tmp_dir)]) == 0
    out = capsys.readouterr().out
    for number, section in enumerate(ember.tour.CHAPTERS, 1):
        assert f"== {number}. {section.title} ==" in out
        assert f"(walkthrough ch. {section.chapter}; source: {section.source})" in out
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
    # the GC section: the cycle outlived `del` and the collector broke it
    gc_part = out.split("References and the cyclic GC")[1]
    assert gc_part.split("tensor still alive?")[1].split()[0] == "True"
    assert gc_part.split("tensor still alive?")[2].split()[0] == "False"
    # no progress bar when stdout is not a terminal
    assert "it/s" not in out and "100%" not in out
    # the pictures, saved where asked and announced
    for name in ("autograd_graph", "ir_graph"):
        assert (tmp_dir / f"{name}.dot").read_text().startswith("digraph")
        assert str(tmp_dir / f"{name}.") in out
