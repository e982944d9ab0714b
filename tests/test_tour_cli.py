"""`python -m ember.tour --list / --chapter N / --out DIR`, the pictures the
tour saves, and its progress bar (only on a terminal)."""

import os
import shutil
import subprocess
import sys

import ember
import ember.tour


def test_list_names_each_section_its_chapter_and_source(capsys):
    assert ember.tour.main(["--list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 2 * len(ember.tour.CHAPTERS)
    for number, section in enumerate(ember.tour.CHAPTERS, 1):
        assert f"{number:2d}. {section.title}" in lines
        assert section.chapter.split(".")[0].isdigit()
        for path in section.source.split(", "):
            assert os.path.exists(os.path.join(os.path.dirname(__file__), "..", path)), path
    assert "==" not in out      # nothing ran


def test_chapter_runs_one_section(capsys, tmp_dir):
    number = [s.run for s in ember.tour.CHAPTERS].index(ember.tour.chapter_references) + 1
    assert ember.tour.main(["--chapter", str(number), "--out", str(tmp_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count("== ") == 1 and f"== {number}. References and the cyclic GC ==" in out
    assert "walkthrough ch. 3. Reference counts and 4. The cyclic GC" in out
    counts = [int(line.split()[-1]) for line in out.splitlines()
              if line.startswith(("  sys.getrefcount(t)", "  after alias", "  after del alias"))]
    assert len(counts) == 3
    assert counts[1] == counts[0] + 1 and counts[2] == counts[0]


def test_chapter_out_of_range(capsys):
    assert ember.tour.main(["--chapter", "0"]) == 2
    assert "expected 1 to" in capsys.readouterr().err


def jit_section():
    return [s.run for s in ember.tour.CHAPTERS].index(ember.tour.chapter_jit) + 1


def test_the_ir_picture_is_the_graph_that_runs(capsys, tmp_dir):
    assert ember.tour.main(["--chapter", str(jit_section()), "--out", str(tmp_dir)]) == 0
    out = capsys.readouterr().out
    x = ember.randn(512, 512)
    expected = ember.jit.script(ember.tour.scaled_gelu).graph_for(x, x).to_dot()
    assert (tmp_dir / "ir_graph.dot").read_text() == expected
    if shutil.which("dot"):
        assert "<svg" in (tmp_dir / "ir_graph.svg").read_text()
        assert f"Saved the picture as {tmp_dir / 'ir_graph.svg'}" in out
    # explain's lines count from the function, not the file
    assert "(line 3 of scaled_gelu)" in out


def test_without_dot_the_tour_saves_the_dot_file_and_says_so(capsys, tmp_dir, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert ember.tour.main(["--chapter", str(jit_section()), "--out", str(tmp_dir)]) == 0
    out = capsys.readouterr().out
    assert (tmp_dir / "ir_graph.dot").exists() and not (tmp_dir / "ir_graph.svg").exists()
    assert f"Saved the picture as {tmp_dir / 'ir_graph.dot'} (no SVG:" in out


def test_progress_bar_only_on_a_terminal(capsys, monkeypatch, tmp_dir):
    monkeypatch.setattr(ember.tour, "_output_dir", str(tmp_dir))
    ember.tour.chapter_autograd(steps=3)
    assert "training:" not in capsys.readouterr().out
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    ember.tour.chapter_autograd(steps=3)
    assert "training: 100%" in capsys.readouterr().out


def test_module_entry_point(tmp_dir):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "ember.tour", "--list"], cwd=tmp_dir,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "References and the cyclic GC" in done.stdout
    assert os.listdir(tmp_dir) == []      # --list saves nothing
