"""parse_ir(text): reads the printed graph format (ir.GraphPrinter) back.

    graph(%x : Tensor(float32, 2d), %n : int):
      %one : int = prim::Constant[value=1]()
      %y : Tensor = Tensor.t(%x)
      %z : Tensor = aten::add(%y, %one, alpha=%one)
      %r : Tensor = prim::If(%c)
        block0():
          -> (%y)
        block1():
          -> (%z)
      return (%r)

What the printer leaves out and the parser fills in:
* A call's callee.  A node may name it directly as its kind (`Tensor.t`,
  `operator.add`; the node's kind becomes ops.kind_of of it) or give it
  as an attribute (`aten::t[callee="Tensor.t"](%x)`); a bare `aten::NAME`
  or `prim::NAME` takes the first of ember.NAME, Tensor.NAME,
  operator.NAME, F.NAME, math.NAME, builtins.NAME, the prim helpers and
  attr.NAME that is an allowed callee (ops.callee_table).
* Subgraphs: `prim::FusionGroup_N(...)` reads the graph printed after
  `with prim::FusionGroup_N = ` into attrs["subgraph"].
Attribute values are Python literals (also inf, nan and ember dtypes);
tensor constants cannot be read back (ValueError).
"""

import ast
import math
import re

from . import ir
from . import ops
from . import types as T

NON_CALL_KINDS = frozenset({
    "prim::Constant", "prim::If", "prim::Loop", "prim::Uninitialized",
    "prim::RaiseException", "prim::FusionGroup"})

_NODE = re.compile(r"^(?:(?P<outs>.*?)\s=\s)?(?P<kind>[A-Za-z_][\w:.]*)"
                   r"(?P<rest>[\[(].*)$")
_BLOCK = re.compile(r"^block\d+\((?P<params>.*)\):$")


class IRParseError(ValueError):
    pass


def parse_ir(text):
    """The ir.Graph printed as `text`."""
    sections = re.split(r"^with (prim::\w+?_\d+) = ", text.strip("\n"),
                        flags=re.MULTILINE)
    subgraphs = {}
    for i in range(1, len(sections), 2):
        subgraphs[sections[i]] = _GraphParser(sections[i + 1], {}).parse()
    return _GraphParser(sections[0], subgraphs).parse()


class _GraphParser:
    def __init__(self, text, subgraphs):
        self.lines = [line.strip() for line in text.splitlines() if line.strip()]
        self.subgraphs = subgraphs
        self.graph = ir.Graph()
        self.env = {}

    def parse(self):
        header, pos = self.header()
        for name, type_ in _params(header):
            self.define(name, self.graph.add_input(None, type_))
        blocks = [self.graph.block]
        last_node = [None]
        for line in self.lines[pos:]:
            if line.startswith("return"):
                self.graph.block.set_returns(self.values(_parens(line[len("return"):])))
            elif line.startswith("->"):
                blocks[-1].set_returns(self.values(_parens(line[2:])))
                blocks.pop()
                last_node.pop()
            elif _BLOCK.match(line):
                owner = last_node[-1]
                if owner is None or owner.kind not in ("prim::If", "prim::Loop"):
                    raise IRParseError(f"block without an If/Loop: {line!r}")
                block = owner.add_block()
                for name, type_ in _params(_BLOCK.match(line)["params"]):
                    self.define(name, block.add_param(type_))
                blocks.append(block)
                last_node.append(None)
            else:
                node = self.node(line)
                blocks[-1].append(node)
                last_node[-1] = node
        return self.graph

    def header(self):
        text = ""
        for pos, line in enumerate(self.lines):
            text += line
            if text.endswith("):"):
                if not text.startswith("graph("):
                    raise IRParseError(f"expected 'graph(...):', got {text!r}")
                return text[len("graph("):-2], pos + 1
        raise IRParseError("no 'graph(...):' header")

    def define(self, name, value):
        if name in self.env:
            raise IRParseError(f"%{name} defined twice")
        value.debug_name = name     # numbers too: printing gives the text back
        self.env[name] = value

    def values(self, names):
        try:
            return [self.env[n.strip().lstrip("%")] for n in names if n.strip()]
        except KeyError as e:
            raise IRParseError(f"use of undefined value %{e.args[0]}") from None

    def node(self, line):
        match = _NODE.match(line)
        if not match:
            raise IRParseError(f"cannot read node {line!r}")
        kind, rest = match["kind"], match["rest"]
        attrs = {}
        if rest.startswith("["):
            end = _matching(rest, 0)
            attrs = _attrs(rest[1:end])
            rest = rest[end + 1:]
        if not (rest.startswith("(") and rest.endswith(")")):
            raise IRParseError(f"cannot read inputs of {line!r}")
        subgraph_kind = re.fullmatch(r"(prim::\w+?)_(\d+)", kind)
        if subgraph_kind and kind in self.subgraphs:
            attrs["subgraph"] = self.subgraphs[kind]
            kind = subgraph_kind[1]
        callee = attrs.get("callee")
        if callee is None and "::" not in kind:
            callee, kind = kind, ops.kind_of(kind)
        elif callee is None and kind not in NON_CALL_KINDS:
            callee = default_callee(kind)
        if callee is not None:
            ops.resolve(callee)     # KeyError for anything not allowed
            attrs["callee"] = callee
        inputs, kwnames = [], []
        for item in _split(rest[1:-1]):
            key, eq, name = item.partition("=")
            if eq:
                kwnames.append(key.strip())
            inputs.extend(self.values([name if eq else item]))
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        outs = _params(match["outs"] or "")
        node = self.graph.create(kind, inputs, output_types=[t for _, t in outs],
                                 attrs=attrs)
        for (name, _), value in zip(outs, node.outputs):
            self.define(name, value)
        return node


def default_callee(kind):
    """'aten::mul' -> 'ember.mul' (the first allowed spelling)."""
    namespace, _, name = kind.partition("::")
    table = ops.callee_table()
    reverse_operator = {v: k for k, v in ops.OPERATOR_KINDS.items()}
    candidates = [f"ember.{name}", f"Tensor.{name}",
                  f"operator.{reverse_operator.get(name, name)}",
                  f"F.{name}", f"math.{name}", f"builtins.{name.lower()}",
                  f"attr.{name}"]
    candidates += [c for c, (_, k) in ops.PRIM_HELPERS.items() if k == kind]
    for callee in candidates:
        if callee in table and ops.kind_of(callee) == kind:
            return callee
    raise IRParseError(f"no allowed callee prints as {kind!r}")


def _params(text):
    """'%x : Tensor, %n : int' -> [('x', Tensor), ('n', Int)]."""
    result = []
    for item in _split(text):
        name, colon, type_text = item.partition(":")
        if not colon:
            raise IRParseError(f"expected '%name : Type', got {item!r}")
        result.append((name.strip().lstrip("%"), T.parse_type(type_text)))
    return result


def _parens(text):
    text = text.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise IRParseError(f"expected '(...)', got {text!r}")
    return _split(text[1:-1])


def _matching(text, start):
    """Index of the bracket closing text[start], skipping strings."""
    depth, quote = 0, None
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == "\\":
                continue
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth == 0:
                return i
    raise IRParseError(f"unbalanced brackets in {text!r}")


def _split(text):
    """Split on commas outside brackets and strings."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def _attrs(text):
    result = {}
    for item in _split(text):
        key, eq, literal = item.partition("=")
        if not eq:
            raise IRParseError(f"expected 'name=value' attribute, got {item!r}")
        result[key.strip()] = _literal(literal.strip())
    return result


def _literal(text):
    special = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
    if text in special:
        return special[text]
    if text.startswith("ember."):
        from .. import _C
        dtype = getattr(_C, text[len("ember."):], None)
        if isinstance(dtype, _C.dtype):
            return dtype
    if text.startswith("<Tensor"):
        raise IRParseError("tensor constants cannot be parsed back")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise IRParseError(f"cannot read attribute value {text!r}") from None
