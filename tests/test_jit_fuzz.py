"""Differential fuzzing of ember.jit: random Python source, run five ways.

A hypothesis strategy writes the *source* of a small function over tensor,
int and float parameters (arithmetic, unary ops, reductions, views, in-place
ops, `if` on ints and on tensor sums, `for` and `while` loops with `break`,
`continue` and early `return`).  The source goes to a real module file, so
`inspect.getsource` (which the front end uses) reads it as it would any
function.  The property: the eager result equals

  * the scripted function's result, on the first and on a cached call,
  * the generic (unspecialised) program run by the C VM,
  * the reference interpreter on the unoptimised graph,
  * the program after ember.jit.save -> ember.jit.load,

within floating tolerance (exactly for ints and shapes and dtypes), or all
of them raise the same exception type.  With float64 tensors that require
grad, the gradients of the sum of the outputs match eager's.  And
save -> load -> save writes the same bytes.

The generator tracks every variable's kind, shape and dtype, so almost all
programs it writes are valid Python: binary operands always broadcast, a
name reassigned in a branch or a loop keeps its kind and shape (TorchScript
requires one type per name), a name is only read where Python has bound it
on every path, and in-place ops write to tensors the function made itself.
Those are the script language's rules, not bugs it hides.

EMBER_FUZZ_EXAMPLES=2000 runs a longer search than the committed 50.
"""

import ast
import importlib.util
import io
import itertools
import math
import os
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember
from ember import jit
from ember.jit import interpreter

MAX_EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "50"))
FLOATS = (ember.float32, ember.float64)
DTYPES = (ember.float32, ember.float64, ember.int64)
LOOP_COUNTS = (0, 1, 7, 8, 9, 17)


# ---- what the generator knows about each variable ---------------------------------


class Var:
    """A name in the generated function: its kind ('tensor', 'int', 'float'),
    and for tensors its shape, its dtype (None once it may vary: after a
    merge or a loop that changes it) and the parameter it may alias."""

    def __init__(self, kind, shape=None, dtype=None, root=None, readonly=False):
        self.kind = kind
        self.shape = shape
        self.dtype = dtype
        self.root = root            # parameter name this tensor may be a view of
        self.readonly = readonly    # loop indices and while counters

    def copy(self):
        return Var(self.kind, self.shape, self.dtype, self.root, self.readonly)

    def merged(self, other):
        """The variable after a join of two paths (same kind and shape)."""
        dtype = self.dtype if self.dtype == other.dtype else None
        root = self.root or other.root
        return Var(self.kind, self.shape, dtype, root, self.readonly)


def names_in(source):
    """The variable names an expression's source reads."""
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)
            and node.id != "ember"}


def broadcast(a, b):
    """The broadcast shape of a and b, or None if they don't broadcast."""
    out = []
    for x, y in itertools.zip_longest(reversed(a), reversed(b), fillvalue=1):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)     # 1 against 0 is 0
    return tuple(reversed(out))


def promote(a, b):
    """The result dtype of a binary op on tensors of dtypes a and b (None:
    unknown)."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    if ember.int64 in (a, b):
        return b if a == ember.int64 else a
    return ember.float64


def promote_number(dtype, number_kind):
    if dtype == ember.int64 and number_kind == "float":
        return ember.float32
    return dtype


def floating(dtype):
    """The dtype of a float-valued unary op (tanh, exp, sigmoid, /)."""
    if dtype is None:
        return None
    return ember.float32 if dtype == ember.int64 else dtype


# ---- the source generator ---------------------------------------------------------


class Writer:
    """Writes one random function, drawing every choice from hypothesis."""

    def __init__(self, draw, params, return_kinds, counter=None, helpers=None,
                 return_shape=None):
        self.draw = draw
        self.lines = []
        self.counter = counter or itertools.count()
        self.return_kinds = return_kinds
        self.return_shape = return_shape    # a helper returns one tensor of it
        self.params = params
        self.helpers = helpers if helpers is not None else []   # their sources
        self.emitted = []       # (source, Var, names it reads): CSE bait

    # -- small helpers ----------------------------------------------------------------
    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def chance(self, p):
        return self.draw(st.integers(0, 99)) < p * 100

    def fresh_name(self, prefix="v"):
        return f"{prefix}{next(self.counter)}"

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    # -- expressions --------------------------------------------------------------------
    def tensors(self, env, fits=None):
        """Names of tensor variables; with `fits`, those broadcasting into it."""
        names = [n for n, v in env.items() if v.kind == "tensor"]
        if fits is not None:
            names = [n for n in names if broadcast(env[n].shape, fits) == fits]
        return sorted(names)

    def of_kind(self, env, kind):
        return sorted(n for n, v in env.items() if v.kind == kind)

    def number(self, env, kind=None):
        """(source, kind) of an int or float expression."""
        kind = kind or self.choice(["int", "float"] if self.of_kind(env, "float") else ["int"])
        if self.chance(0.3):     # the identities a peephole may rewrite
            value = self.choice(["0", "1", "0.0", "1.0", "-0.0", "2"])
            return value, "float" if "." in value else "int"
        if kind == "int":
            return self.int_expr(env), "int"
        return self.float_expr(env), "float"

    def int_expr(self, env, depth=0):
        names = self.of_kind(env, "int")
        options = (["const", "var", "var", "binop", "shape", "unary", "item"] if depth < 2
                   else ["const", "var"])
        what = self.choice(options)
        if what == "const":
            return str(self.draw(st.integers(-3, 5)))
        if what == "unary":
            return self.choice([f"(-{self.int_expr(env, depth + 1)})",
                                f"abs({self.int_expr(env, depth + 1)})",
                                f"{self.choice(['min', 'max'])}({self.int_expr(env, depth + 1)}, "
                                f"{self.int_expr(env, depth + 1)})"])
        if what == "item":
            tensors = [n for n in self.tensors(env) if env[n].dtype == ember.int64]
            if not tensors:
                return self.choice(names)
            # .item() is a number (int or float) to the script, as in
            # TorchScript: int() says which
            return self.choice([f"int({self.choice(tensors)}.sum())",
                                f"int({self.choice(tensors)}.sum().item())"])
        if what == "var":
            return self.choice(names)
        if what == "shape":
            tensors = [n for n in self.tensors(env) if env[n].shape]
            if not tensors:
                return self.choice(names)
            name = self.choice(tensors)
            return f"{name}.shape[{self.draw(st.integers(0, len(env[name].shape) - 1))}]"
        op = self.choice(["+", "-", "+", "%", "//"])
        left = self.int_expr(env, depth + 1)
        if op in ("%", "//"):
            return f"({left} {op} {self.choice([1, 2, 3, -2])})"
        return f"({left} {op} {self.int_expr(env, depth + 1)})"

    def float_expr(self, env, depth=0):
        names = self.of_kind(env, "float")
        what = self.choice(["const", "var", "var", "binop", "item"] if depth < 2
                           else ["const", "var"])
        if what == "const" or not names:
            return self.choice(["0.5", "1.5", "-0.25", "2.0", "0.0", "-0.0", "1.0"])
        if what == "item":
            tensors = [n for n in self.tensors(env) if env[n].dtype in FLOATS]
            if not tensors:
                return self.choice(names)
            return self.choice([f"float({self.choice(tensors)}.sum())",
                                f"float({self.choice(tensors)}.sum().item())"])
        if what == "var":
            return self.choice(names)
        op = self.choice(["+", "-", "*"])
        other = self.choice([self.float_expr(env, depth + 1), self.int_expr(env, depth + 1)])
        return f"({self.float_expr(env, depth + 1)} {op} {other})"

    def tensor_expr(self, env, target=None, depth=0):
        """(source, Var) of a tensor expression; with `target`, of exactly
        that shape (the result may be a view: Var.root says of what)."""
        leaves = self.tensors(env) if target is None else [
            n for n in self.tensors(env) if env[n].shape == target]
        options = ["leaf"] * 2
        if depth < 3:
            options += ["binop", "binop", "number", "unary", "unary", "ifexp", "where"]
            if target is None or target == ():
                options += ["reduce"]
            if target is None or len(target) == 2:
                options += ["transpose"]
            if self.return_shape is None and len(self.helpers) < 3:
                options += ["call"]
            options += ["reshape"]
        what = self.choice(options)
        if what == "leaf" or (what in ("binop", "number", "unary", "ifexp", "where")
                              and not leaves):
            return self.leaf(env, leaves, target)
        if what == "binop":
            left, lv = self.tensor_expr(env, target, depth + 1)
            fits = lv.shape if target is not None else None
            partners = self.tensors(env, fits) if fits is not None else [
                n for n in self.tensors(env) if broadcast(env[n].shape, lv.shape) is not None]
            if not partners:
                return left, lv
            right, rv = self.tensor_expr_from(env, self.choice(partners), depth + 1)
            op = self.choice(["+", "-", "*", "/"])
            if self.chance(0.5):
                left, right, lv, rv = right, left, rv, lv
            dtype = promote(lv.dtype, rv.dtype)
            if op == "/":
                dtype = floating(dtype)
            return f"({left} {op} {right})", Var("tensor", broadcast(lv.shape, rv.shape), dtype)
        if what == "number":
            inner, v = self.tensor_expr(env, target, depth + 1)
            num, kind = self.number(env)
            op = self.choice(["+", "-", "*", "/"])
            dtype = floating(v.dtype) if op == "/" else promote_number(v.dtype, kind)
            if self.chance(0.5):
                return f"({inner} {op} {num})", Var("tensor", v.shape, dtype)
            return f"({num} {op} {inner})", Var("tensor", v.shape, dtype)
        if what == "unary":
            inner, v = self.tensor_expr(env, target, depth + 1)
            op = self.choice(["relu", "tanh", "exp", "abs", "neg", "sigmoid", "-"])
            if op == "-":
                return f"(-{inner})", Var("tensor", v.shape, v.dtype)
            if op == "exp":
                return f"{inner}.clamp(-4.0, 4.0).exp()", Var("tensor", v.shape, floating(v.dtype))
            dtype = floating(v.dtype) if op in ("tanh", "sigmoid") else v.dtype
            if self.chance(0.3) and op in ("relu", "tanh", "sigmoid", "abs", "neg"):
                return f"ember.{op}({inner})", Var("tensor", v.shape, dtype)
            return f"{inner}.{op}()", Var("tensor", v.shape, dtype)
        if what == "call" and leaves:
            return self.helper_call(env, self.choice(leaves))
        if what == "ifexp":
            left, lv = self.tensor_expr(env, target, depth + 1)
            right, rv = self.tensor_expr(env, lv.shape, depth + 1)
            return (f"({left} if {self.condition(env)} else {right})",
                    Var("tensor", lv.shape, lv.merged(rv).dtype, lv.root or rv.root))
        if what == "where":
            left, lv = self.tensor_expr(env, target, depth + 1)
            partners = self.tensors(env, lv.shape)
            right, rv = self.tensor_expr_from(env, self.choice(partners), depth + 1) \
                if partners else (left, lv)
            cond, _ = self.tensor_expr_from(env, self.choice(partners), depth + 1) \
                if partners else (left, lv)
            compare = self.choice([">", "<", ">=", "=="])
            return (f"ember.where({cond} {compare} {self.choice(['0', '0.5', '-1.0'])}, {left}, {right})",
                    Var("tensor", lv.shape, promote(lv.dtype, rv.dtype)))
        if what == "reduce":
            inner, v = self.tensor_expr(env, None, depth + 1)
            if target == () or not v.shape or self.chance(0.3):
                return f"{inner}.sum()", Var("tensor", (), v.dtype)
            dim = self.draw(st.integers(0, len(v.shape) - 1))
            if self.chance(0.5):
                shape = v.shape[:dim] + (1,) + v.shape[dim + 1:]
                return f"{inner}.sum({dim}, keepdim=True)", Var("tensor", shape, v.dtype)
            return f"{inner}.sum({dim})", Var("tensor", v.shape[:dim] + v.shape[dim + 1:], v.dtype)
        if what == "transpose":
            want = None if target is None else (target[1], target[0])
            inner, v = self.tensor_expr(env, want, depth + 1)
            if len(v.shape) != 2:
                return inner, v
            spelled = self.choice([".t()", ".transpose(0, 1)", ".transpose(1, 0)"])
            return f"{inner}{spelled}", Var("tensor", (v.shape[1], v.shape[0]), v.dtype, v.root)
        # reshape: to the target, or flatten and back
        inner, v = self.tensor_expr(env, target, depth + 1)
        numel = int(np.prod(v.shape, dtype=np.int64))
        if target is None and self.chance(0.5):
            return f"{inner}.reshape(-1)", Var("tensor", (numel,), v.dtype, v.root)
        shape = ", ".join(map(str, v.shape))
        spelled = self.choice([f"({shape},)" if len(v.shape) == 1 else f"({shape})",
                               f"{inner}.shape"]) if v.shape else "()"
        return f"{inner}.reshape({spelled})", Var("tensor", v.shape, v.dtype, v.root)

    def helper_call(self, env, first):
        """A call of a module-level helper function (the front end inlines
        it, early returns and all), which the call writes now or reuses."""
        shape = env[first].shape
        partners = self.tensors(env, shape)
        second = self.choice(partners)
        usable = [h for h in self.helpers if h[1] == shape and h[2] == env[second].shape]
        if usable and self.chance(0.5):
            name = self.choice(usable)[0]
        else:
            name = self.fresh_name("helper")
            self.write_helper(name, shape, env[second].shape)
        count = self.int_expr(env)
        return f"{name}({first}, {second}, {count})", Var("tensor", shape, None)

    def write_helper(self, name, shape, other_shape):
        env = {"u": Var("tensor", shape, None, root="u"),
               "w": Var("tensor", other_shape, None, root="w"), "m": Var("int")}
        writer = Writer(self.draw, {"u", "w", "m"}, ["tensor"], self.counter,
                        self.helpers, return_shape=shape)
        final = writer.block(env, 1, 1, 0, False, size=self.draw(st.integers(1, 3)))
        if final is not None:
            writer.emit(1, writer.return_statement(final))
        source = f"def {name}(u, w, m: int):\n" + "\n".join(writer.lines) + "\n"
        self.helpers.append((name, shape, other_shape, source))

    def leaf(self, env, leaves, target):
        if leaves:
            name = self.choice(leaves)
            return name, env[name].copy()
        # no variable of the target shape: zeros of it from any tensor
        name = self.choice(self.tensors(env))
        v = env[name]
        shape = ", ".join(map(str, target))
        return (f"ember.zeros(({shape}{',' if len(target) == 1 else ''}), dtype=ember.float32)",
                Var("tensor", target, ember.float32))

    def tensor_expr_from(self, env, name, depth):
        """A small expression around variable `name`, of its shape."""
        v = env[name]
        if depth < 3 and self.chance(0.3):
            op = self.choice(["relu", "abs", "tanh"])
            dtype = floating(v.dtype) if op == "tanh" else v.dtype
            return f"{name}.{op}()", Var("tensor", v.shape, dtype)
        return name, v.copy()

    def condition(self, env):
        what = self.choice(["int", "tensor", "tensor", "float", "both"])
        if what == "float" and self.of_kind(env, "float"):
            return f"{self.float_expr(env)} {self.choice(['>', '<', '>='])} {self.choice(['0.5', '1.0', '-1.0'])}"
        if what in ("int", "float"):
            return f"{self.int_expr(env)} {self.choice(['>', '<', '==', '!=', '>='])} {self.draw(st.integers(-1, 6))}"
        if what == "both":
            return f"({self.condition(env)}) {self.choice(['and', 'or'])} not ({self.condition(env)})"
        inner, v = self.tensor_expr(env, None, 1)
        compare = f"{inner}.sum() {self.choice(['>', '<'])} {self.choice(['0.0', '1.5', '-2.0', '3'])}"
        return self.choice([compare, f"bool({compare})"])

    # -- statements -----------------------------------------------------------------------
    def block(self, env, indent, depth, loop_depth, in_loop, size=None):
        """Writes statements; returns the environment after them, or None if
        the block always exits (return, break, continue as its last word)."""
        n = size if size is not None else self.draw(st.integers(1, 4 if depth < 2 else 2))
        for _ in range(n):
            env = self.statement(env, indent, depth, loop_depth, in_loop)
            if env is None:
                return None
        return env

    def statement(self, env, indent, depth, loop_depth, in_loop):
        options = ["assign"] * 4 + ["reassign"] * 3 + ["inplace"] * 2 + ["max", "number"]
        if depth < 3:
            options += ["if"] * 3
            if loop_depth < 2:
                options += ["for", "for", "while"]
        if in_loop:
            options += ["exit_if"] * 2
        options += ["return_if"]
        what = self.choice(options)
        return getattr(self, "stmt_" + what)(env, indent, depth, loop_depth, in_loop)

    def stmt_assign(self, env, indent, depth, loop_depth, in_loop):
        name = self.fresh_name()
        again = [(src, v) for src, v, reads in self.emitted
                 if all(r in env and env[r].kind == "tensor" and env[r].shape == shapes
                        for r, shapes in reads)]
        if again and self.chance(0.3):
            # an expression written before: the same computation again,
            # perhaps after an in-place write to what it reads
            source, v = self.choice(again)
            v = v.copy()
        else:
            source, v = self.tensor_expr(env)
            reads = sorted({(n, env[n].shape) for n in names_in(source) if n in env})
            if all(env[n].kind == "tensor" for n, _ in reads):
                self.emitted.append((source, v, reads))
        self.emit(indent, f"{name} = {source}")
        env = dict(env)
        env[name] = v
        return env

    def stmt_number(self, env, indent, depth, loop_depth, in_loop):
        env = dict(env)
        targets = [n for n, v in env.items() if v.kind in ("int", "float") and not v.readonly
                   and n not in self.params]
        if targets and self.chance(0.5):
            name = self.choice(targets)
            kind = env[name].kind
            source = self.int_expr(env) if kind == "int" else self.float_expr(env)
            op = self.choice(["=", "+=", "-="]) if kind == "int" else self.choice(["=", "+=", "*="])
            self.emit(indent, f"{name} {op} {source}")
            return env
        name = self.fresh_name("k")
        source, kind = self.number(env)
        self.emit(indent, f"{name} = {source}")
        env[name] = Var(kind)
        return env

    def stmt_reassign(self, env, indent, depth, loop_depth, in_loop):
        targets = [n for n in self.tensors(env) if not env[n].readonly]
        if not targets:
            return self.stmt_assign(env, indent, depth, loop_depth, in_loop)
        name = self.choice(targets)
        source, v = self.tensor_expr(env, env[name].shape)
        self.emit(indent, f"{name} = {source}")
        env = dict(env)
        env[name] = v
        return env

    def stmt_inplace(self, env, indent, depth, loop_depth, in_loop):
        """x += y, x.add_(y), x.mul_(y) on a tensor this function made."""
        targets = [n for n in self.tensors(env) if env[n].root is None or self.chance(0.1)]
        if not targets:
            # make a fresh one: arithmetic, not a view
            source, v = self.tensor_expr(env)
            name = self.fresh_name()
            self.emit(indent, f"{name} = {source} * 1")
            env = dict(env)
            env[name] = Var("tensor", v.shape, v.dtype)
            targets = [name]
        name = self.choice(targets)
        v = env[name]
        partners = self.tensors(env, v.shape)
        if v.dtype in FLOATS:
            operand = self.choice(partners + ["number"])
        else:       # an int64 (or unknown) tensor takes only int64 / int operands
            partners = [n for n in partners if env[n].dtype == ember.int64]
            operand = self.choice(partners + ["int"])
        if operand == "number":
            operand = self.number(env)[0]
        elif operand == "int":
            operand = self.int_expr(env)
        form = self.choice(["+=", "-=", "*=", "add_", "mul_", "sub_"])
        if form.endswith("_"):
            self.emit(indent, f"{name}.{form}({operand})")
        else:
            self.emit(indent, f"{name} {form} {operand}")
        return env

    def stmt_max(self, env, indent, depth, loop_depth, in_loop):
        tensors = [n for n in self.tensors(env) if env[n].shape]
        if not tensors:
            return self.stmt_assign(env, indent, depth, loop_depth, in_loop)
        name = self.choice(tensors)
        v = env[name]
        dim = self.draw(st.integers(0, len(v.shape) - 1))
        if v.shape[dim] == 0:
            # max over an empty dim raises; unused, DCE drops it (as
            # TorchScript's does: dead pure ops are assumed not to raise)
            return self.stmt_assign(env, indent, depth, loop_depth, in_loop)
        values, indices = self.fresh_name(), self.fresh_name()
        if self.chance(0.5):
            shape = v.shape[:dim] + (1,) + v.shape[dim + 1:]
            self.emit(indent, f"{values}, {indices} = {name}.max({dim}, keepdim=True)")
        else:
            shape = v.shape[:dim] + v.shape[dim + 1:]
            self.emit(indent, f"{values}, {indices} = {name}.max({dim})")
        env = dict(env)
        env[values] = Var("tensor", shape, v.dtype)
        env[indices] = Var("tensor", shape, ember.int64)
        return env

    def stmt_if(self, env, indent, depth, loop_depth, in_loop):
        self.emit(indent, f"if {self.condition(env)}:")
        # a new name both branches define (TorchScript: one type per name)
        shared = None
        if self.chance(0.5):
            source, v = self.tensor_expr(env)
            shared = (self.fresh_name(), v)
        then_env = self.branch(env, shared, indent + 1, depth, loop_depth, in_loop)
        if self.chance(0.3) and shared is None:
            return self.join(env, [then_env, env])
        self.emit(indent, "else:")
        else_env = self.branch(env, shared, indent + 1, depth, loop_depth, in_loop)
        return self.join(env, [then_env, else_env])

    def branch(self, env, shared, indent, depth, loop_depth, in_loop):
        out = self.block(dict(env), indent, depth + 1, loop_depth, in_loop)
        if out is not None and shared is not None:
            name, v = shared
            source, got = self.tensor_expr(out, v.shape)
            self.emit(indent, f"{name} = {source}")
            out = dict(out)
            out[name] = got
        return out

    def join(self, before, paths):
        """Names bound after an if: on every path that falls through."""
        paths = [p for p in paths if p is not None]
        if not paths:
            return None
        names = set(paths[0])
        for p in paths[1:]:
            names &= set(p)
        joined = {}
        for name in names:
            v = paths[0][name]
            for p in paths[1:]:
                v = v.merged(p[name])
            joined[name] = v
        return joined

    def stmt_for(self, env, indent, depth, loop_depth, in_loop):
        index = self.fresh_name("i")
        count = self.choice([str(c) for c in LOOP_COUNTS] + [self.int_expr(env)] * 2)
        form = self.choice(["count", "count", "start", "step"])
        if form == "start":
            count = f"{self.int_expr(env)}, {count}"
        elif form == "step":
            count = self.choice([f"{count}, {self.int_expr(env)}, {self.choice([2, 3, -1, -2])}",
                                 f"{self.int_expr(env)}, {count}, 2"])
        self.emit(indent, f"for {index} in range({count}):")
        body_env = dict(env)
        body_env[index] = Var("int", readonly=True)
        return self.loop_body(env, body_env, indent + 1, depth, loop_depth)

    def stmt_while(self, env, indent, depth, loop_depth, in_loop):
        counter = self.fresh_name("j")
        bound = self.choice([str(c) for c in LOOP_COUNTS] + [self.int_expr(env)])
        self.emit(indent, f"{counter} = 0")
        extra = f" and ({self.condition(env)})" if self.chance(0.3) else ""
        self.emit(indent, f"while {counter} < {bound}{extra}:")
        self.emit(indent + 1, f"{counter} += 1")
        body_env = dict(env)
        body_env[counter] = Var("int", readonly=True)
        after = self.loop_body(env, body_env, indent + 1, depth, loop_depth)
        if after is not None:
            after[counter] = Var("int", readonly=True)
        return after

    def loop_body(self, env, body_env, indent, depth, loop_depth):
        # a carried name may change dtype from one iteration to the next:
        # the body sees unknown dtypes for every tensor it can assign
        for name, v in body_env.items():
            if v.kind == "tensor":
                body_env[name] = Var("tensor", v.shape, None, v.root, v.readonly)
        out = self.block(body_env, indent, depth + 1, loop_depth + 1, True)
        # after the loop: the names bound before it (the body may not run)
        after = {}
        for name, v in env.items():
            merged = v
            if out is not None and name in out:
                merged = v.merged(out[name])
            merged = merged.merged(body_env[name]) if v.kind == "tensor" else merged
            after[name] = merged
        return after

    def stmt_exit_if(self, env, indent, depth, loop_depth, in_loop):
        self.emit(indent, f"if {self.condition(env)}:")
        inner = self.block(dict(env), indent + 1, depth + 1, loop_depth, in_loop,
                           size=self.draw(st.integers(0, 1)))
        if inner is not None:
            self.emit(indent + 1, self.choice(["break", "continue"]))
        return env

    def stmt_return_if(self, env, indent, depth, loop_depth, in_loop):
        if depth == 0 and not in_loop and self.chance(0.5):
            return env
        self.emit(indent, f"if {self.condition(env)}:")
        self.emit(indent + 1, self.return_statement(env))
        return env

    def return_statement(self, env):
        if self.return_shape is not None:
            return f"return {self.tensor_expr(env, self.return_shape, 2)[0]}"
        values = []
        for kind in self.return_kinds:
            if kind == "tensor":
                values.append(self.tensor_expr(env, None, 2)[0])
            elif kind == "int":
                values.append(self.int_expr(env))
            else:
                values.append(self.float_expr(env))
        return f"return ({', '.join(values)},)"


@st.composite
def programs(draw):
    """(source, function name, argument factory) of a random function."""
    rank = draw(st.integers(0, 2))
    size = st.integers(1, 3) | st.just(0) if draw(st.integers(0, 9)) == 0 else st.integers(1, 3)
    base = tuple(draw(st.lists(size, min_size=rank, max_size=rank)))
    n_tensors = draw(st.integers(1, 3))
    env, params, arg_specs = {}, [], []
    for k in range(n_tensors):
        name = "abc"[k]
        keep = draw(st.integers(0, len(base)))
        shape = tuple(d if draw(st.booleans()) else 1 for d in base[len(base) - keep:])
        dtype = draw(st.sampled_from(DTYPES))
        values = draw(st.lists(st.sampled_from([-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0]),
                               min_size=int(np.prod(shape, dtype=np.int64)),
                               max_size=int(np.prod(shape, dtype=np.int64))))
        env[name] = Var("tensor", shape, dtype, root=name)
        params.append(name)
        arg_specs.append(("tensor", shape, dtype, values))
    env["n"] = Var("int")
    params.append("n: int")
    arg_specs.append(("int", draw(st.integers(-1, 17))))
    if draw(st.booleans()):
        env["p"] = Var("float")
        params.append("p: float")
        arg_specs.append(("float", draw(st.sampled_from([-1.5, 0.0, 0.25, 2.0]))))
    return_kinds = ["tensor"] * draw(st.integers(1, 2)) + ["int"] * draw(st.integers(0, 1))
    if "p" in env and draw(st.booleans()):
        return_kinds.append("float")
    writer = Writer(draw, {"a", "b", "c", "n", "p"}, return_kinds)
    final = writer.block(env, 1, 0, 0, False, size=draw(st.integers(1, 6)))
    if final is not None:
        writer.lines.append("    " + writer.return_statement(final))
    helpers = "".join(h[3] + "\n\n" for h in writer.helpers)
    source = "import ember\n\n\n{}def fuzzed({}):\n{}\n".format(
        helpers, ", ".join(params), "\n".join(writer.lines))
    return source, arg_specs


# ---- running it five ways -----------------------------------------------------------


_module_counter = itertools.count()


def load_function(source, directory):
    """Writes `source` to a module file and imports it (so getsource works)."""
    name = f"ember_fuzzed_{os.getpid()}_{next(_module_counter)}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fuzzed


def make_args(arg_specs, grad=False):
    """Fresh arguments (in-place ops must never leak from one run into the
    next); with grad, float64 tensors require it."""
    args = []
    for spec in arg_specs:
        if spec[0] == "tensor":
            _, shape, dtype, values = spec
            t = ember.tensor(values, dtype=dtype).reshape(shape)    # (0, 3) too
            if grad and dtype == ember.float64:
                t.requires_grad_(True)
            args.append(t)
        else:
            args.append(spec[1])
    return args


def outcome(fn, args):
    """('ok', result) or ('raised', exception type)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:        # noqa: BLE001: the type is what is compared
        return ("raised", type(exc))


def assert_same(expected, got, what):
    if expected[0] == "raised" or got[0] == "raised":
        assert expected == got, f"{what}: eager {expected}, got {got}"
        return
    assert_close(expected[1], got[1], what)


def assert_close(a, b, what):
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor), f"{what}: {type(b).__name__} for a tensor"
        assert a.dtype == b.dtype, f"{what}: dtype {b.dtype}, eager {a.dtype}"
        assert tuple(a.shape) == tuple(b.shape), f"{what}: shape {tuple(b.shape)}, eager {tuple(a.shape)}"
        x, y = a.detach().numpy(), b.detach().numpy()
        if a.dtype == ember.int64:
            np.testing.assert_array_equal(x, y, err_msg=what)
        else:
            tol = 1e-5 if a.dtype == ember.float32 else 1e-11
            np.testing.assert_allclose(y, x, rtol=tol, atol=tol, err_msg=what)
            zeros = (x == 0) & (y == 0)     # -0.0 is not 0.0 (x + 0 is not x)
            np.testing.assert_array_equal(np.signbit(y[zeros]), np.signbit(x[zeros]),
                                          err_msg=what + ": the sign of a zero")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), f"{what}: {b!r} for {a!r}"
        for x, y in zip(a, b):
            assert_close(x, y, what)
    elif isinstance(a, float):
        assert isinstance(b, float), f"{what}: {b!r} for the float {a!r}"
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12, nan_ok=True), what
        if a == 0 and b == 0:
            assert math.copysign(1, a) == math.copysign(1, b), what + ": the sign of a zero"
    else:
        assert type(a) is type(b) and a == b, f"{what}: {b!r}, eager {a!r}"


def gradients(fn, arg_specs):
    """('ok', (outputs, grads of the inputs)) or ('raised', type) after
    backward of the sum of the tensor outputs that require grad."""
    args = make_args(arg_specs, grad=True)
    result = outcome(fn, args)
    if result[0] == "raised":
        return result
    outputs = result[1] if isinstance(result[1], tuple) else (result[1],)
    loss = None
    for out in outputs:
        if isinstance(out, ember.Tensor) and out.requires_grad:
            loss = out.sum() if loss is None else loss + out.sum()
    if loss is None:
        return ("ok", (outputs, ()))
    try:
        loss.backward()
    except Exception as exc:        # noqa: BLE001
        return ("raised", type(exc))
    grads = tuple(a.grad if isinstance(a, ember.Tensor) and a.grad is not None
                  else "no grad" for a in args)
    return ("ok", (outputs, tuple(g for g in grads if g != "no grad")))


def check_program(source, arg_specs, tmp):
    fn = load_function(source, tmp)
    expected = outcome(fn, make_args(arg_specs))
    scripted = jit.script(fn)
    assert_same(expected, outcome(scripted, make_args(arg_specs)), "scripted")
    assert_same(expected, outcome(scripted, make_args(arg_specs)), "scripted, cached")
    assert_same(expected, outcome(scripted.generic.code, make_args(arg_specs)), "generic program")
    assert_same(expected, outcome(lambda *a: interpreter.run_graph(scripted.graph, a),
                                  make_args(arg_specs)), "run_graph")
    # save -> load: same results, and save again writes the same bytes
    first = io.BytesIO()
    jit.save(scripted, first)
    loaded = jit.load(io.BytesIO(first.getvalue()))
    assert_same(expected, outcome(loaded, make_args(arg_specs)), "loaded")
    second = io.BytesIO()
    jit.save(loaded, second)
    assert first.getvalue() == second.getvalue(), "save -> load -> save changed the bytes"
    # autograd: float64 inputs require grad
    if any(s[0] == "tensor" and s[2] == ember.float64 for s in arg_specs):
        assert_same(gradients(fn, arg_specs), gradients(scripted, arg_specs), "autograd")


@pytest.fixture(scope="module")
def module_dir():
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        try:
            yield tmp
        finally:
            sys.path.remove(tmp)


@pytest.mark.noleakcheck
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(program=programs())
def test_scripted_equals_eager_on_random_programs(program, module_dir):
    source, arg_specs = program
    try:
        check_program(source, arg_specs, module_dir)
    except AssertionError as exc:
        exc.add_note("program:\n" + source + f"\narguments: {arg_specs}")
        raise
