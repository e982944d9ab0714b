"""The walkthrough's pictures match the code that draws them.

`docs/pictures.py` draws each picture from live objects; the DOT files it
wrote are committed next to their SVGs.  Regenerating the DOT text here and
comparing it to the committed file catches a picture gone stale (a struct
field added, a pass that now fuses differently, a new node name).  The
tests compare DOT text, never pixels; rendering needs Graphviz's `dot` and
is skipped without it.
"""

import pathlib
import re
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import pictures  # noqa: E402  (docs/pictures.py)

CHAPTERS = sorted(pictures.PICTURES.parent.glob("*.md"))


@pytest.mark.parametrize("name", sorted(pictures.PICTURES_BY_NAME))
def test_committed_picture_is_current(name):
    committed = pictures.PICTURES / f"{name}.dot"
    assert committed.exists(), f"{committed} is missing: run `make docs`"
    fresh = pictures.generate([name])[name]
    assert fresh == committed.read_text(), (
        f"{committed.name} no longer matches the code that draws it: run "
        f"`make docs` and commit docs/walkthrough/pictures/")


@pytest.mark.parametrize("name", sorted(pictures.PICTURES_BY_NAME))
def test_every_picture_is_embedded_and_rendered(name):
    svg = pictures.PICTURES / f"{name}.svg"
    assert svg.exists(), f"{svg} is missing: run `make docs`"
    embeds = [p.name for p in CHAPTERS if f"(pictures/{name}.svg)" in p.read_text()]
    assert embeds, f"no chapter embeds pictures/{name}.svg"


def test_chapters_embed_only_existing_pictures():
    missing = []
    for chapter in CHAPTERS:
        for target in re.findall(r"!\[[^\]]*\]\((pictures/[^)\s]+)\)", chapter.read_text()):
            if not (pictures.PICTURES.parent / target).exists():
                missing.append(f"{chapter.name}: {target}")
    assert not missing, f"embedded pictures that do not exist: {missing}"


def test_byte_map_offsets_agree_with_the_type():
    offsets, size = pictures.thpvariable_offsets()
    import ember
    assert size == ember._C._TensorBase.__basicsize__
    assert offsets["weakreflist"] == ember.Tensor.__weakrefoffset__
    assert offsets["cdata"] == object.__basicsize__
    # every field in its own bytes, in the struct's order
    fields = [name for _, name in pictures._struct_fields("c/python/THP.h", "THPVariable")]
    assert [offsets[f] for f in fields] == sorted(offsets[f] for f in fields)


def test_stride_grid_cells_come_from_the_geometry():
    import ember
    t = ember.arange(6.).view(2, 3)
    assert pictures._touched(t.t()) == {0: [0], 3: [1], 1: [2], 4: [3], 2: [4], 5: [5]}
    assert pictures._touched(t[:, :1].expand(2, 3)) == {0: [0, 1, 2], 3: [3, 4, 5]}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_dot_renders_a_picture(tmp_path):
    from ember.utils import _dot
    text = pictures.generate(["chain_rule"])["chain_rule"]
    svg = _dot.render_svg(text, tmp_path / "chain_rule.svg")
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "MulBackward0" in (tmp_path / "chain_rule.svg").read_text()
