"""Writing Graphviz DOT text, and rendering it with the `dot` program.

The autograd graph (`ember.autograd.graph.to_dot`), the jit's IR
(`Graph.to_dot`) and the walkthrough's pictures (`docs/pictures.py`) all
write DOT through these helpers, so quoting and rendering live in one place.
Rendering runs Graphviz's `dot` in a subprocess: no Python binding needed.
"""

import shutil
import subprocess

# Shared look: a left-to-right reading is wrong for graphs that flow from a
# result down to its inputs, so every picture is drawn top to bottom.
GRAPH_ATTRS = 'rankdir=TB; graph [fontname="Helvetica"]; ' \
              'node [fontname="Helvetica", fontsize=11]; ' \
              'edge [fontname="Helvetica", fontsize=9];'


def quote(text):
    """`text` as a DOT string: quoted, with quotes and backslashes escaped
    and newlines as DOT's centred line breaks."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def attrs(**values):
    """` [k="v", ...]` for the given attributes, in sorted order (stable text)."""
    if not values:
        return ""
    return " [" + ", ".join(f"{k}={quote(v)}" for k, v in sorted(values.items())) + "]"


def digraph(name, lines):
    """A whole `digraph name { ... }` around body lines (already indented)."""
    return "\n".join([f"digraph {quote(name)} {{", "  " + GRAPH_ATTRS, *lines, "}"]) + "\n"


def render_svg(dot_text, path=None):
    """Runs `dot -Tsvg` on `dot_text`; writes the SVG to `path` when given
    and returns the SVG text.  RuntimeError when Graphviz is not installed."""
    program = shutil.which("dot")
    if program is None:
        raise RuntimeError(
            "rendering needs Graphviz's `dot` program, which was not found on "
            "PATH (Debian/Ubuntu: apt-get install graphviz; `make docs` installs it)")
    done = subprocess.run([program, "-Tsvg"], input=dot_text, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot -Tsvg failed: {done.stderr.strip()}")
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(done.stdout)
    return done.stdout
