"""The front end of ember.jit: Python source -> a typed SSA graph (ir.Graph).

Note [The front end]
~~~~~~~~~~~~~~~~~~~~
TorchScript's emitter in small (script-compilers.md, section 1.1).  The
source of a function is read with `inspect.getsource`, parsed with `ast`,
and walked statement by statement.  An *environment* maps each variable
name to the SSA Value it holds now; assigning a name just rebinds it, so
the graph is in SSA form as it is built (no loads and stores to erase):

* `if`: both branches are emitted with a copy of the environment; every
  name whose Value differs afterwards becomes an output of the prim::If
  (its phi node).  A name bound on one branch only is remembered as an
  `Undefined` marker, an error only if it is read later.
* loops: names bound before the loop and assigned in its body are carried
  (block parameters and outputs of prim::Loop).  If the body gives a
  carried name a wider type (None -> Optional[T]) the loop is emitted again.
* exits (`return`, `break`, `continue`) follow TorchScript's exit
  transform: they set flag variables ("$returned", "$broke", "$continued")
  and the return value ("$ret"), which live in the environment like any
  name, so they merge at Ifs and are carried by loops for free.  The
  statements after a statement that may exit are guarded by
  `prim::If(not exited)`; a loop's condition is `not (broke or returned)`.
  On a path that always exits, names it lacks are `prim::Uninitialized`.

Compile-time-only things (the `ember` and `math` modules, Python functions
to inline, a module's `self`) are *sugared values*: classes below that
never reach the graph.  Calls to plain Python functions, to scripted
functions, to a module's methods and submodules are inlined; a condition
that is a compile-time constant (`if self.bias is not None`, `if
self.padding_mode != "zeros"`) compiles only the branch taken (Note
[Conditions decided at compile time]).

What the graph holds beyond ops.py's callees: `prim.slice` / `prim.ellipsis`
build index objects (`x[1:, ...]`), `prim.tuple` a tuple index; a constant
index into a tuple reads the TupleConstruct's input directly or calls
operator.getitem typed with the element type; `for` over a tuple or a
ModuleList/Sequential is unrolled at compile time.

Not supported (each a ScriptError naming the construct): with, try,
lambda, comprehensions, nested def/class, global/nonlocal, del, dicts and
sets, star arguments, :=, yield, loop else clauses, break/continue/return
inside an unrolled loop, assignment to
attributes (except `self.buffer += v`, in place).
"""

import ast
import builtins
import inspect
import linecache
import math
import textwrap
import typing

from . import ir, ops
from . import types as T
from .interpreter import EXCEPTIONS, INT64_MAX

RET, RETURNED, BROKE, CONTINUED = "$ret", "$returned", "$broke", "$continued"

UNSUPPORTED = {
    ast.With: "with statements", ast.AsyncWith: "with statements",
    ast.Lambda: "lambda expressions", ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions", ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions", ast.Try: "try blocks",
    ast.Global: "global statements", ast.Nonlocal: "nonlocal statements",
    ast.FunctionDef: "nested function definitions",
    ast.AsyncFunctionDef: "async functions", ast.ClassDef: "class definitions",
    ast.Starred: "starred expressions", ast.NamedExpr: "assignment expressions (:=)",
    ast.Yield: "yield expressions", ast.YieldFrom: "yield expressions",
    ast.Await: "await expressions", ast.Delete: "del statements",
    ast.Dict: "dict literals", ast.Set: "set literals",
    ast.Import: "import statements", ast.ImportFrom: "import statements",
    ast.AsyncFor: "async for loops", ast.Match: "match statements",
}
if hasattr(ast, "TryStar"):
    UNSUPPORTED[ast.TryStar] = "try blocks"

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
          ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow",
          ast.MatMult: "matmul", ast.BitAnd: "and_", ast.BitOr: "or_",
          ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift"}
BINOP_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                 ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
                 ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
                 ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
COMPARISONS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le",
               ast.Gt: "gt", ast.GtE: "ge"}


class Signature:
    """A scripted function's parameters and return type."""

    def __init__(self, name, params, return_type):
        self.name = name
        self.params = params            # [Parameter]
        self.return_type = return_type

    @property
    def names(self):
        return [p.name for p in self.params]

    @property
    def types(self):
        return [p.type for p in self.params]

    @property
    def defaults(self):
        """{name: default} of the parameters that have one."""
        return {p.name: p.default for p in self.params if p.has_default}

    def __repr__(self):
        args = ", ".join(map(str, self.params))
        return f"{self.name}({args}) -> {self.return_type}"


class Parameter:
    EMPTY = inspect.Parameter.empty

    def __init__(self, name, type_, default=inspect.Parameter.empty):
        self.name = name
        self.type = type_
        self.default = default

    @property
    def has_default(self):
        return self.default is not self.EMPTY

    def __repr__(self):
        text = f"{self.name}: {self.type}"
        return text + (f" = {self.default!r}" if self.has_default else "")


# ---------------------------------------------------------------------------
# Sugared values: what a name or attribute means at compile time only.


class Sugared:
    """Base class of compile-time-only values."""
    description = "a compile-time object"


class PythonModule(Sugared):
    def __init__(self, namespace, module):
        self.namespace = namespace      # "ember", "F", "math", "typing"...
        self.module = module
        self.description = f"module '{getattr(module, '__name__', namespace)}'"


class Callee(Sugared):
    """An allowlisted callable (ops.py), with `self` bound for methods."""

    def __init__(self, name, bound=None):
        self.name = name
        self.bound = bound
        self.description = f"function '{name}'"


class PythonFunction(Sugared):
    """A plain Python function (or a method with `self_module` bound): its
    calls are compiled and inlined."""

    def __init__(self, fn, self_module=None):
        self.fn = fn
        self.self_module = self_module
        self.description = f"function '{fn.__name__}'"


class ModuleRef(Sugared):
    """An nn.Module reached from `self` (its attributes are resolved at
    compile time; calling it inlines its forward)."""

    def __init__(self, module, prefix):
        self.module = module
        self.prefix = prefix
        self.description = f"module of type {type(module).__name__}"


class ExceptionClass(Sugared):
    def __init__(self, name):
        self.name = name
        self.description = f"exception class '{name}'"


class BuiltinFunction(Sugared):
    def __init__(self, name):
        self.name = name
        self.description = f"builtin '{name}'"


class Undefined:
    """A name that is bound on some paths only; reading it is an error."""

    def __init__(self, message):
        self.message = message


def _unwrap_script_function(obj):
    """The Python function behind an already-scripted function, or None."""
    if not hasattr(obj, "graph"):
        return None
    for attr in ("__wrapped__", "original_fn", "_fn"):
        inner = getattr(obj, attr, None)
        if inspect.isfunction(inner):
            return inner
    return None


# ---------------------------------------------------------------------------
# Source handling


class Source:
    """A function's parsed source and how to map AST positions to the file."""

    def __init__(self, fn):
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise ir.ScriptError(
                f"could not get the source of {getattr(fn, '__name__', fn)!r}: {exc}")
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        self.file_lines = linecache.getlines(self.filename) or lines
        self.first_line = first
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        self.indent = (len(lines[0]) - len(lines[0].lstrip())) if lines else 0
        if dedented == text:
            self.indent = 0
        try:
            tree = ast.parse(dedented)
        except SyntaxError as exc:
            raise ir.ScriptError(f"could not parse the source of "
                                 f"{fn.__name__}: {exc.msg}") from None
        self.tree = tree.body[0]
        self.function_name = fn.__name__

    def range(self, node):
        lineno = getattr(node, "lineno", 1)
        end_lineno = getattr(node, "end_lineno", None) or lineno
        col = getattr(node, "col_offset", 0)
        end_col = getattr(node, "end_col_offset", None)
        return ir.SourceRange(
            self.filename, self.file_lines, lineno + self.first_line - 1,
            col + self.indent, end_lineno + self.first_line - 1,
            None if end_col is None else end_col + self.indent,
            self.function_name, self.first_line)


# ---------------------------------------------------------------------------
# Annotations -> types


def type_from_annotation(annotation, error):
    """A Python annotation object (typing or builtin generics) -> JitType."""
    from .._tensor import Tensor
    simple = {int: T.Int, float: T.Float, bool: T.Bool, str: T.Str,
              type(None): T.NoneT, None: T.NoneT, Tensor: T.Tensor}
    if isinstance(annotation, str):
        try:
            return T.parse_type(annotation)
        except ValueError:
            error(f"unknown type annotation {annotation!r}")
    if annotation in simple:
        return simple[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, typing.List) and len(args) == 1:
        return T.ListType(type_from_annotation(args[0], error))
    if origin in (tuple, typing.Tuple):
        return T.TupleType([type_from_annotation(a, error) for a in args])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(args) == 2:
            return T.OptionalType(type_from_annotation(others[0], error))
    if getattr(annotation, "__name__", None) == "dtype":
        return T.Dtype
    error(f"unknown type annotation {annotation!r}")


def _compatible_assignment(old, new):
    """Whether a name of type `old` may be rebound to a value of type `new`."""
    if old == new or isinstance(old, T.AnyType):
        return True
    if isinstance(old, T.NoneType) or isinstance(new, T.NoneType):
        return T.unify(old, new) is not None
    if isinstance(old, T.TensorType) and isinstance(new, T.TensorType):
        return True
    if isinstance(old, T.OptionalType):
        return new.is_subtype_of(old)
    unified = T.unify(old, new)
    return unified is not None and (unified == old or unified == new)


def _merge_type(a, b):
    if isinstance(a, T.AnyType):
        return b
    if isinstance(b, T.AnyType):
        return a
    return T.unify(a, b)


# ---------------------------------------------------------------------------
# What statements contain (for loop-carried names and exit guards)


def assigned_names(stmts):
    """Names a statement list may bind (not in nested functions)."""
    names = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def exits_in(stmts, in_loop):
    """The exit kinds (RETURNED, BROKE, CONTINUED) a statement list may take;
    break/continue count only if they leave the current loop."""
    found = set()

    def visit(node, loop_depth):
        if isinstance(node, ast.Return):
            found.add(RETURNED)
        elif isinstance(node, ast.Break) and loop_depth == 0 and in_loop:
            found.add(BROKE)
        elif isinstance(node, ast.Continue) and loop_depth == 0 and in_loop:
            found.add(CONTINUED)
        inner = loop_depth + isinstance(node, (ast.For, ast.While))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                visit(child, inner)

    for stmt in stmts:
        visit(stmt, 0)
    return found


# ---------------------------------------------------------------------------
# The emitter


class Emitter:
    """Emits one function's body into a graph (and inlines its callees)."""

    def __init__(self, graph, source, fn_globals, closure, inline_stack,
                 self_module=None, param_inputs=None):
        self.graph = graph
        self.source = source
        self.globals = fn_globals
        self.closure = closure
        self.inline_stack = inline_stack
        self.self_module = self_module
        self.param_inputs = param_inputs if param_inputs is not None else {}
        self.block = graph.block
        self.env = {}
        self.return_type = None         # the annotation, if any
        self.first_return_type = None
        self.exit_flags = ()            # flags the current loop body checks
        self.pending_refinements = {}   # names known not None after a stmt
        self.last_branch_exits = (None, None)

    # -- errors and nodes ----------------------------------------------------
    def error(self, message, node):
        raise ir.ScriptError(message, self.source.range(node)
                             if node is not None else None)

    def emit(self, kind, inputs=(), output_types=(T.Tensor,), attrs=None, node=None):
        created = self.graph.create(kind, inputs, output_types=output_types,
                                    attrs=attrs, source_range=self.source.range(node)
                                    if node is not None else None)
        self.block.append(created)
        return created

    def constant(self, value, node=None):
        type_ = T.type_of_value(value)
        if type_ is None:
            self.error(f"cannot use a constant of type {type(value).__name__}", node)
        return self.emit("prim::Constant", (), (type_,), {"value": value}, node).output

    def uninitialized(self, type_, node=None):
        return self.emit("prim::Uninitialized", (), (type_,), None, node).output

    def call(self, callee, args, node, kwargs=(), output_types=None):
        """A call node: positional args, then keyword (name, value) pairs."""
        kwnames = tuple(name for name, _ in kwargs)
        inputs = list(args) + [value for _, value in kwargs]
        types = [v.type for v in inputs]
        if output_types is None:
            output_types = ops.result_types(callee, types, kwnames)
        attrs = {"callee": callee}
        if kwnames:
            attrs["kwnames"] = kwnames
        return self.emit(ops.kind_of(callee), inputs, output_types, attrs, node).output

    # -- the function --------------------------------------------------------
    def bind_parameters(self, signature, values):
        for param, value in zip(signature.params, values):
            self.env[param.name] = value

    def emit_body(self, fndef, return_annotation):
        """Emits the statements; returns the Value returned."""
        self.return_type = return_annotation
        body = list(fndef.body)
        if not isinstance(body[-1], ast.Return):
            # Falling off the end returns None (guarded like any return).
            implicit = ast.copy_location(ast.Return(value=None), body[-1])
            implicit.implicit = True
            body.append(implicit)
        if exits_in(body[:-1], False):
            self.env[RETURNED] = self.constant(False)
        self.emit_statements(body)
        if RET not in self.env:  # every path raises
            self.env[RET] = self.uninitialized(self.return_type or T.NoneT)
        return self.env[RET]

    # -- statements ------------------------------------------------------------
    def emit_statements(self, stmts):
        """Emits a statement list; returns the exit kind if it always exits
        ("dead" for return/raise, "loop" for break/continue), else None."""
        for index, stmt in enumerate(stmts):
            self.pending_refinements = {}
            exited = self.emit_statement(stmt)
            refined, self.pending_refinements = self.pending_refinements, {}
            if exited:
                return exited
            rest = stmts[index + 1:]
            in_loop = bool(self.exit_flags)
            may_exit = exits_in([stmt], in_loop) & set(self.env)
            if rest and may_exit:
                return self.emit_guarded(sorted(may_exit), rest, stmt, refined)
            if rest:  # here only a raise can have exited: nothing to guard
                self.apply_refinements(refined)
        return None

    def apply_refinements(self, refined):
        """Binds each name to its Optional value unwrapped (the code here
        runs only where the value is known not to be None)."""
        for name, value in refined.items():
            if self.env.get(name) is value:
                self.env[name] = self.call("prim.unwrap_optional", [value], None)

    def emit_guarded(self, flags, rest, after, refined):
        """`if not (flag or ...): rest` -- the statements after a statement
        that may have exited."""
        exited = None
        for flag in flags:
            value = self.env[flag]
            exited = value if exited is None else self.call(
                "operator.or_", [exited, value], after)
        keep_going = self.call("operator.not_", [exited], after)
        kind = "loop" if set(flags) & {BROKE, CONTINUED} else "dead"
        def run_rest():
            return self.with_refinements(refined, rest)
        return self.emit_if_blocks(keep_going, run_rest, lambda: kind, after)

    def emit_statement(self, stmt):
        if type(stmt) in UNSUPPORTED:
            self.error(f"{UNSUPPORTED[type(stmt)]} aren't supported", stmt)
        method = getattr(self, "stmt_" + type(stmt).__name__, None)
        if method is None:
            self.error(f"{type(stmt).__name__} statements aren't supported", stmt)
        return method(stmt)

    def stmt_Pass(self, stmt):
        return None

    def stmt_Expr(self, stmt):
        if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return None  # a docstring
        self.emit_expr(stmt.value)
        return None

    def stmt_Assign(self, stmt):
        if len(stmt.targets) != 1:
            self.error("chained assignments (a = b = c) aren't supported", stmt)
        value = self.emit_value(stmt.value)
        self.assign(stmt.targets[0], value, stmt)

    def stmt_AnnAssign(self, stmt):
        declared = self.annotation_type(stmt.annotation)
        if stmt.value is None:
            self.error("declarations without a value aren't supported", stmt)
        if isinstance(stmt.value, ast.List) and not stmt.value.elts:
            if not isinstance(declared, T.ListType):
                self.error(f"an empty list can't have type {declared}", stmt)
            value = self.call("prim.list", [], stmt, output_types=[declared])
        else:
            value = self.emit_value(stmt.value)
        if not value.type.is_subtype_of(declared):
            self.error(f"Variable '{stmt.target.id}' is annotated with type "
                       f"{declared} but is being assigned to a value of type "
                       f"{value.type}", stmt)
        if isinstance(declared, T.OptionalType) and value.type != declared:
            value = self.retype(value, declared)
        self.assign(stmt.target, self.as_declared(value, declared, stmt), stmt)

    def as_declared(self, value, declared, node):
        """An int where a float is declared becomes a float (x: float = 0),
        so the name keeps its declared type."""
        if isinstance(declared, T.FloatType) and isinstance(value.type, T.IntType):
            return self.call("builtins.float", [value], node, output_types=[T.Float])
        return value

    @staticmethod
    def retype(value, type_):
        """A constant (None) or uninitialized value seen under a wider static
        type (an Optional variable); other values keep their narrower type,
        which is a subtype."""
        if value.node.kind in ("prim::Constant", "prim::Uninitialized"):
            value.type = type_
        return value

    def stmt_AugAssign(self, stmt):
        op = BINOPS.get(type(stmt.op))
        target = stmt.target
        if isinstance(target, ast.Name):
            current = self.lookup(target.id, target)
            rhs = self.emit_value(stmt.value)
            result = self.binary(self.inplace_name(op), current, rhs, stmt, stmt.op)
            self.assign(target, result, stmt)
        elif isinstance(target, ast.Subscript):
            container = self.emit_value(target.value)
            index = self.emit_index(target.slice, container)
            current = self.getitem(container, index, target)
            rhs = self.emit_value(stmt.value)
            result = self.binary(self.inplace_name(op), current, rhs, stmt, stmt.op)
            self.setitem(container, index, result, stmt)
        elif isinstance(target, ast.Attribute):
            self.augment_module_state(target, stmt)
        else:
            self.error("augmented assignment to this target isn't supported", stmt)

    def augment_module_state(self, target, stmt):
        """`self.buffer += v`: in place on the state tensor (a graph input),
        as eager code does; other attributes can't change in a script."""
        base = self.emit_expr(target.value)
        current = self.emit_expr(target) if isinstance(base, ModuleRef) else None
        if not isinstance(current, ir.Value) or not isinstance(current.type, T.TensorType) \
                or current.node.kind != "prim::Param":
            self.error("augmented assignment to an attribute is only supported "
                       "on a module's parameters and buffers", stmt)
        rhs = self.emit_value(stmt.value)
        self.binary(self.inplace_name(BINOPS[type(stmt.op)]), current, rhs, stmt, stmt.op)

    @staticmethod
    def inplace_name(op):
        """operator.iadd for +=, ...; the plain operator where none exists."""
        name = "i" + op.rstrip("_")
        return name if name in ops.OPERATOR_NAMES else op

    def stmt_Return(self, stmt):
        self.emit_return(stmt.value, stmt, getattr(stmt, "implicit", False))
        return "dead"

    def emit_return(self, expr, stmt, implicit=False):
        value = self.constant(None) if expr is None else self.emit_value(expr)
        if self.return_type is not None:
            if not value.type.is_subtype_of(self.return_type):
                self.error(f"Function is annotated to return {self.return_type} "
                           f"but may fall off the end (returning None)"
                           if implicit else
                           f"Return value was annotated as having type "
                           f"{self.return_type} but this returns a value of "
                           f"type {value.type}", stmt)
        elif self.first_return_type is not None and \
                T.unify(self.first_return_type, value.type) is None:
            self.error(f"Previous return statement returned a value of type "
                       f"{self.first_return_type} but this return statement "
                       f"returns a value of type {value.type}", stmt)
        if self.first_return_type is None:
            self.first_return_type = value.type
        self.env[RET] = value
        if RETURNED in self.env:
            self.env[RETURNED] = self.constant(True)

    def stmt_Break(self, stmt):
        return self.loop_exit(BROKE, "break", stmt)

    def stmt_Continue(self, stmt):
        return self.loop_exit(CONTINUED, "continue", stmt)

    def loop_exit(self, flag, word, stmt):
        if flag not in self.env:
            self.error(f"'{word}' outside loop"
                       if not self.exit_flags else
                       f"'{word}' isn't supported in a loop over a tuple", stmt)
        self.env[flag] = self.constant(True)
        return "loop"

    def stmt_Raise(self, stmt):
        exc = stmt.exc
        if exc is None:
            self.error("bare 'raise' isn't supported", stmt)
        func, args = (exc.func, exc.args) if isinstance(exc, ast.Call) else (exc, [])
        if isinstance(exc, ast.Call) and exc.keywords:
            self.error("exceptions take no keyword arguments", exc)
        cls = self.emit_expr(func)
        if not isinstance(cls, ExceptionClass):
            self.error("only exceptions of the classes "
                       f"{', '.join(sorted(EXCEPTIONS))} can be raised", exc)
        if len(args) > 1:
            self.error("exceptions take at most one argument (the message)", exc)
        message = [self.emit_value(a) for a in args]
        self.emit("prim::RaiseException", message, (), {"exception": cls.name}, stmt)
        return "dead"

    def stmt_Assert(self, stmt):
        cond = self.emit_condition(stmt.test)

        def fail():
            message = [] if stmt.msg is None else [self.emit_value(stmt.msg)]
            self.emit("prim::RaiseException", message, (),
                      {"exception": "AssertionError"}, stmt)
            return "dead"
        self.emit_if_blocks(cond, lambda: None, fail, stmt)
        return None

    def stmt_If(self, stmt):
        cond = self.emit_condition(stmt.test)
        if cond.node.kind == "prim::Constant":
            # Decided at compile time (`if self.bias is not None`, a module
            # flag): only the taken branch is compiled, as in TorchScript, so
            # the other may hold code that would not type-check.
            return self.emit_statements(stmt.body if cond.node.attrs["value"]
                                        else stmt.orelse)
        then_refined, else_refined = self.refinements(stmt.test)
        exited = self.emit_if_blocks(
            cond, lambda: self.emit_refined(then_refined, stmt.body),
            lambda: self.emit_refined(else_refined, stmt.orelse), stmt)
        then_exit, else_exit = self.last_branch_exits
        # `if x is None: return` -- x is not None after the if.
        if then_exit and not else_exit:
            self.pending_refinements = else_refined
        elif else_exit and not then_exit:
            self.pending_refinements = then_refined
        return exited

    def emit_refined(self, refined, stmts):
        """A branch's statements with `x is not None` names unwrapped."""
        return self.with_refinements(refined, stmts)

    def with_refinements(self, refined, stmts):
        """Emits stmts with the refined names unwrapped; names still bound to
        the unwrapped value afterwards go back to the original, so the
        branches don't merge a needless Optional output."""
        originals = {name: self.env.get(name) for name in refined}
        self.apply_refinements(refined)
        unwrapped = {name: self.env.get(name) for name in refined}
        exited = self.emit_statements(stmts)
        for name, value in unwrapped.items():
            if self.env.get(name) is value:
                self.env[name] = originals[name]
        return exited

    # -- if / merging ------------------------------------------------------------
    def emit_if_blocks(self, cond, then_fn, else_fn, node, values=None,
                       value_types=None):
        """A prim::If whose branches run then_fn/else_fn (which emit into
        the branch and return its exit kind).  The environments are
        merged; `values`, if given, are two functions giving extra outputs
        (for expressions).  Returns the exit kind, or the extra outputs."""
        if_node = self.emit("prim::If", [cond], (), None, node)
        outer_block, saved = self.block, self.env
        branches = []
        for index, fn in enumerate((then_fn, else_fn)):
            self.block = if_node.add_block()
            self.env = dict(saved)
            exited = fn()
            extra = values[index]() if values is not None else []
            branches.append((self.block, self.env, exited, extra))
        self.block = outer_block
        self.env = saved
        outputs = self.merge_branches(if_node, branches, node, value_types)
        if values is not None:
            return outputs
        kinds = [b[2] for b in branches]
        self.last_branch_exits = kinds
        if all(kinds):
            return "loop" if "loop" in kinds else "dead"
        return None

    def merge_branches(self, if_node, branches, node, value_types):
        (then_block, then_env, then_exit, then_extra), \
            (else_block, else_env, else_exit, else_extra) = branches
        names = []
        for name in list(then_env) + [n for n in else_env if n not in then_env]:
            a, b = then_env.get(name), else_env.get(name)
            if a is b:
                if a is not None:
                    self.env[name] = a
                continue
            names.append(name)
        returns = [[], []]
        merged_types = []
        for i, (a, b) in enumerate(zip(then_extra, else_extra)):
            t = value_types[i] if value_types else _merge_type(a.type, b.type)
            if t is None:
                self.error(f"the two branches give types {a.type} and {b.type}, "
                           "which can't be merged", node)
            returns[0].append(a)
            returns[1].append(b)
            merged_types.append(t)
        kept_names = []
        for name in names:
            a, b = then_env.get(name), else_env.get(name)
            result = self.merge_name(name, a, b, then_exit, else_exit, node)
            if result is None:
                continue
            if isinstance(result, Undefined):
                self.env[name] = result
                continue
            t, a_value, b_value = result
            returns[0].append(a_value)
            returns[1].append(b_value)
            merged_types.append(t)
            kept_names.append(name)
        for index, block in enumerate((then_block, else_block)):
            saved = self.block
            self.block = block
            fixed = []
            for value, t in zip(returns[index], merged_types):
                if value is None:
                    value = self.uninitialized(t)
                fixed.append(value)
            self.block = saved
            block.set_returns(fixed)
        outputs = [if_node.add_output(t) for t in merged_types]
        extra_count = len(then_extra)
        for name, value in zip(kept_names, outputs[extra_count:]):
            if not name.startswith("$"):
                value.debug_name = name
            self.env[name] = value
        return outputs[:extra_count]

    def merge_name(self, name, a, b, then_exit, else_exit, node):
        """How a name bound differently on the two branches merges:
        None (dropped), Undefined, or (type, then value, else value) where a
        value of None means prim::Uninitialized."""
        dead = {"then": then_exit == "dead" or (then_exit and a is None),
                "else": else_exit == "dead" or (else_exit and b is None)}
        # what a path that always exits holds doesn't matter
        if dead["then"] and isinstance(a, Undefined):
            a = None
        if dead["else"] and isinstance(b, Undefined):
            b = None
        if a is None and b is None:
            return None
        for value in (a, b):
            if isinstance(value, Undefined):
                return value
        if isinstance(a, Sugared) or isinstance(b, Sugared):
            return Undefined(f"{name} is not defined on every path (of the if "
                             f"at line {self.source.range(node).lineno})")
        if a is None or b is None:
            missing_side = "then" if a is None else "else"
            if not dead[missing_side] and not name.startswith("$"):
                return Undefined(f"{name} is not defined in the "
                                 f"{'true' if a is None else 'false'} branch "
                                 f"(of the if at line {self.source.range(node).lineno})")
            present = a if a is not None else b
            return (present.type, a, b)
        if dead["then"] and dead["else"]:
            t = _merge_type(a.type, b.type)
            if t is None:
                return None
            return (t, a, b)
        for side, value, other in (("then", a, b), ("else", b, a)):
            if dead[side]:
                t = _merge_type(value.type, other.type)
                if t is None:
                    return (other.type, None if side == "then" else a,
                            None if side == "else" else b)
        t = _merge_type(a.type, b.type)
        if t is None:
            self.error(f"Type mismatch: {name} is set to type {a.type} in the "
                       f"true branch and type {b.type} in the false branch", node)
        return (t, a, b)

    # -- loops -----------------------------------------------------------------
    def stmt_While(self, stmt):
        if stmt.orelse:
            self.error("else clauses on loops aren't supported", stmt)
        start_cond = self.emit_condition(stmt.test)
        return self.emit_loop(
            stmt, self.constant(INT64_MAX), start_cond,
            lambda index: None,
            lambda: self.emit_condition(stmt.test))

    def stmt_For(self, stmt):
        """`for` over range/enumerate/zip/a list/a tensor: a prim::Loop whose
        trip count is the length; over a tuple or a module list: unrolled."""
        if stmt.orelse:
            self.error("else clauses on loops aren't supported", stmt)
        iterable = stmt.iter
        if not self.is_builtin_call(iterable, ("range", "enumerate", "zip")):
            value = self.emit_expr(iterable)
            if isinstance(value, ModuleRef):
                return self.emit_module_list_loop(stmt, value)
            if isinstance(value, ir.Value) and isinstance(value.type, T.TupleType):
                return self.emit_unrolled_loop(stmt, value)
        else:
            value = None
        length, item = self.iteration(iterable, value)

        def bind(index):
            self.assign(stmt.target, item(index), stmt)
        return self.emit_loop(stmt, length, self.constant(True), bind, None)

    def is_builtin_call(self, expr, names):
        return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) \
            and expr.func.id in names and expr.func.id not in self.env \
            and expr.func.id not in self.globals and expr.func.id not in self.closure

    def iteration(self, expr, value=None):
        """(trip count, item(index) -> Value) of an iterable; `value` is the
        iterable already emitted, if it was."""
        if value is None and self.is_builtin_call(expr, ("range",)):
            return self.range_iteration(expr)
        if value is None and self.is_builtin_call(expr, ("enumerate", "zip")):
            if any(isinstance(a, ast.Starred) for a in expr.args):
                self.error("starred arguments (*args) aren't supported", expr)
            return (self.enumerate_iteration(expr) if expr.func.id == "enumerate"
                    else self.zip_iteration(expr))
        if value is None:
            value = self.emit_expr(expr)
        if isinstance(value, Sugared):
            self.error(f"can't iterate over {value.description}", expr)
        if not isinstance(value.type, (T.ListType, T.TensorType)):
            self.error(f"can't iterate over a value of type {value.type}"
                       + (" here (only directly in a for loop)"
                          if isinstance(value.type, T.TupleType) else ""), expr)
        length = self.call("builtins.len", [value], expr)
        return length, lambda index: self.getitem(value, index, expr)

    def range_iteration(self, call):
        if call.keywords or not 1 <= len(call.args) <= 3:
            self.error("range() takes 1 to 3 positional arguments", call)
        args = [self.emit_value(a) for a in call.args]
        for arg, expr in zip(args, call.args):
            if not isinstance(arg.type, T.IntType):
                self.error(f"range() arguments must be int, not {arg.type}", expr)
        start, stop, step = (
            (self.constant(0), args[0], None) if len(args) == 1 else
            (args[0], args[1], args[2] if len(args) == 3 else None))
        trip = self.call("prim.range_length",
                         [start, stop, step or self.constant(1)], call,
                         output_types=[T.Int])

        def item(index):
            i = index
            if step is not None:
                i = self.call("operator.mul", [i, step], call)
            if len(args) > 1:
                i = self.call("operator.add", [start, i], call)
            return i
        return trip, item

    def enumerate_iteration(self, call):
        if not 1 <= len(call.args) <= 2 or any(k.arg != "start" for k in call.keywords):
            self.error("enumerate() takes an iterable and an optional start", call)
        length, inner = self.iteration(call.args[0])
        start_expr = call.args[1] if len(call.args) == 2 else (
            call.keywords[0].value if call.keywords else None)
        start = None if start_expr is None else self.emit_value(start_expr)
        if start is not None and not isinstance(start.type, T.IntType):
            self.error(f"enumerate() start must be an int, not {start.type}", start_expr)

        def item(index):
            count = index if start is None else self.call(
                "operator.add", [start, index], call)
            return self.call("prim.tuple", [count, inner(index)], call)
        return length, item

    def zip_iteration(self, call):
        if not call.args or call.keywords:
            self.error("zip() takes one or more iterables (and no keywords)", call)
        parts = [self.iteration(arg) for arg in call.args]
        length = parts[0][0]
        for other, _ in parts[1:]:
            length = self.call("builtins.min", [length, other], call,
                               output_types=[T.Int])

        def item(index):
            return self.call("prim.tuple", [fn(index) for _, fn in parts], call)
        return length, item

    def emit_unrolled_loop(self, stmt, value):
        saved_flags = self.exit_flags
        self.exit_flags = ("unrolled",)
        if exits_in(stmt.body, True) - {RETURNED}:
            self.error("break and continue aren't supported in a loop over a tuple", stmt)
        if RETURNED in exits_in(stmt.body, True):
            self.error("return isn't supported in a loop over a tuple", stmt)
        try:
            for index in range(len(value.type.elems)):
                # each unrolled iteration binds the name afresh (any type)
                for name in assigned_names([stmt.target]):
                    self.env.pop(name, None)
                self.assign(stmt.target, self.tuple_item(value, index, stmt.iter), stmt)
                exited = self.emit_statements(stmt.body)
                if exited:
                    return exited
        finally:
            self.exit_flags = saved_flags
        return None

    def emit_module_list_loop(self, stmt, ref):
        modules = getattr(ref.module, "_modules", None)
        if modules is None:
            self.error(f"can't iterate over {ref.description}", stmt.iter)
        if exits_in(stmt.body, True):
            self.error("break, continue and return aren't supported in a loop "
                       "over modules", stmt)
        for name, module in modules.items():
            sub = ModuleRef(module, ref.prefix + name + ".")
            if not isinstance(stmt.target, ast.Name):
                self.error("the loop variable must be a name", stmt.target)
            self.env[stmt.target.id] = sub
            self.emit_statements(stmt.body)
        return None

    def emit_loop(self, stmt, trip, start_cond, bind, next_cond):
        """A prim::Loop for a for/while statement; `bind(index)` binds the
        loop variable, `next_cond()` re-evaluates a while condition."""
        assigned = assigned_names(stmt.body) | assigned_names([stmt.target]) \
            if hasattr(stmt, "target") else assigned_names(stmt.body)
        exits = exits_in(stmt.body, True)
        if RETURNED in exits:
            assigned |= {RET, RETURNED}
            if RETURNED not in self.env:
                self.env[RETURNED] = self.constant(False)
            if RET not in self.env:
                self.env[RET] = self.uninitialized(self.return_type or T.Any)
        carried = [n for n in self.env if n in assigned
                   and isinstance(self.env[n], ir.Value)]
        types = [self.env[n].type for n in carried]
        for _attempt in range(4):
            node, widened = self.try_emit_loop(stmt, trip, start_cond, bind,
                                               next_cond, carried, types, exits)
            if widened is None:
                break
            node.destroy()
            types = widened
        else:
            self.error("the loop-carried types don't settle", stmt)
        for name, value in zip(carried, node.outputs):
            self.env[name] = value
            if not name.startswith("$"):
                value.debug_name = name
        for name in assigned - set(carried):
            if not name.startswith("$") and not isinstance(self.env.get(name), Sugared):
                self.env[name] = Undefined(
                    f"{name} is first defined inside the loop at line "
                    f"{self.source.range(stmt).lineno} and may be undefined after it")
        return None

    def try_emit_loop(self, stmt, trip, start_cond, bind, next_cond, carried,
                      types, exits):
        initial = []
        for name, t in zip(carried, types):
            value = self.env[name]
            if value.type != t:
                value = self.retype(value, t)
            initial.append(value)
        loop = self.emit("prim::Loop", [trip, start_cond] + initial,
                         list(types), None, stmt)
        body = loop.add_block()
        outer_block, saved_env, saved_flags = self.block, self.env, self.exit_flags
        self.block, self.env = body, dict(saved_env)
        index = body.add_param(T.Int, "i")
        for name, t in zip(carried, types):
            param = body.add_param(t, None if name.startswith("$") else name)
            self.env[name] = param
        loop_flags = [f for f in (BROKE, CONTINUED) if f in exits]
        for flag in loop_flags:
            self.env[flag] = self.constant(False)
        self.exit_flags = tuple(loop_flags) + ((RETURNED,) if RETURNED in exits else ()) or ("loop",)
        try:
            bind(index)
            self.emit_statements(stmt.body)
            cond = self.loop_condition(stmt, exits, next_cond)
        finally:
            self.exit_flags = saved_flags
        body_env = self.env
        results = []
        widened = list(types)
        changed = False
        for i, (name, t) in enumerate(zip(carried, types)):
            value = body_env.get(name)
            if not isinstance(value, ir.Value):
                self.error(f"{name} is not defined on every path through the "
                           "loop body", stmt)
            if value.type != t and not (isinstance(t, T.TensorType)
                                        and isinstance(value.type, T.TensorType)):
                merged = _merge_type(t, value.type)
                if merged is None or not _compatible_assignment(t, value.type):
                    self.error(f"Variable '{name}' previously had type {t} but "
                               f"is now being assigned to a value of type "
                               f"{value.type}", stmt)
                if merged != t:
                    widened[i] = merged
                    changed = True
            elif value.type != t:
                widened[i] = T.unify(t, value.type)
            results.append(value)
        body.set_returns([cond] + results)
        self.block, self.env = outer_block, saved_env
        for value, t in zip(loop.outputs, widened):
            value.type = t
        for param, t in zip(body.params[1:], widened):
            if param.type != t and not changed:
                param.type = t
        return loop, (widened if changed else None)

    def loop_condition(self, stmt, exits, next_cond):
        """The body's continue-condition: not (broke or returned), and the
        while condition (evaluated only if the loop didn't exit)."""
        stop_flags = [f for f in (BROKE, RETURNED) if f in exits]
        stopped = None
        for flag in stop_flags:
            value = self.env[flag]
            stopped = value if stopped is None else self.call(
                "operator.or_", [stopped, value], stmt)
        if stopped is None:
            return next_cond() if next_cond else self.constant(True)
        if next_cond is None:
            return self.call("operator.not_", [stopped], stmt)
        return self.emit_if_blocks(
            stopped, lambda: None, lambda: None, stmt,
            values=(lambda: [self.constant(False)], lambda: [next_cond()]),
            value_types=[T.Bool])[0]

    # -- assignment ----------------------------------------------------------------
    def assign(self, target, value, stmt):
        if isinstance(target, ast.Name):
            self.bind_name(target.id, value, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.unpack(target, value, stmt)
        elif isinstance(target, ast.Subscript):
            container = self.emit_value(target.value)
            index = self.emit_index(target.slice, container)
            self.setitem(container, index, value, stmt)
        elif isinstance(target, ast.Starred):
            self.error("starred expressions aren't supported", target)
        else:
            self.error("assignment to this target isn't supported "
                       "(only names, tuples and tensor items)", target)

    def bind_name(self, name, value, node):
        old = self.env.get(name)
        if isinstance(old, ir.Value) and not _compatible_assignment(old.type, value.type):
            self.error(f"Variable '{name}' previously had type {old.type} but is "
                       f"now being assigned to a value of type {value.type}", node)
        if isinstance(old, Sugared):
            self.error(f"can't reassign '{name}', which is {old.description}", node)
        if value.debug_name is None and value.node.kind != "prim::Param":
            value.debug_name = name
        self.env[name] = value

    def unpack(self, target, value, stmt):
        n = len(target.elts)
        if isinstance(value.type, T.TupleType):
            if len(value.type.elems) != n:
                self.error(f"too many values to unpack: need {n} but found "
                           f"{len(value.type.elems)}" if len(value.type.elems) > n
                           else f"not enough values to unpack: need {n} but found "
                           f"{len(value.type.elems)}", stmt)
            items = [self.tuple_item(value, i, stmt) for i in range(n)]
        elif isinstance(value.type, T.ListType):
            self.check_list_length(value, n, stmt)
            items = [self.getitem(value, self.constant(i), stmt) for i in range(n)]
        else:
            self.error(f"can't unpack a value of type {value.type}", stmt)
        for elt, item in zip(target.elts, items):
            self.assign(elt, item, stmt)

    def check_list_length(self, value, n, stmt):
        """A run-time check that a list unpacked into n names has n items."""
        length = self.call("builtins.len", [value], stmt)
        ok = self.call("operator.eq", [length, self.constant(n)], stmt)

        def fail():
            message = self.constant(f"list unpacking expected {n} values")
            self.emit("prim::RaiseException", [message], (),
                      {"exception": "ValueError"}, stmt)
            return "dead"
        self.emit_if_blocks(ok, lambda: None, fail, stmt)

    def tuple_item(self, value, index, node):
        producer = value.node
        if producer.callee == "prim.tuple":
            return producer.inputs[index]
        return self.call("operator.getitem", [value, self.constant(index)], node,
                         output_types=[value.type.elems[index]])

    def getitem(self, container, index, node):
        if isinstance(container.type, T.TupleType):
            self.error("tuple indices must be constant integers", node)
        if isinstance(container.type, (T.ListType, T.StrType)) and not isinstance(
                index.type, (T.IntType, T.AnyType)):
            self.error(f"{container.type} indices must be integers or slices, "
                       f"not {index.type}", node)
        if not isinstance(container.type, (T.TensorType, T.ListType, T.StrType)):
            self.error(f"a value of type {container.type} can't be indexed", node)
        return self.call("operator.getitem", [container, index], node)

    def setitem(self, container, index, value, node):
        if isinstance(container.type, T.ListType):
            if not isinstance(index.type, T.IntType):
                self.error(f"list indices must be integers, not {index.type}", node)
            if not value.type.is_subtype_of(container.type.elem):
                self.error(f"Expected a value of type '{container.type.elem}' to "
                           f"store in a {container.type} but instead found type "
                           f"'{value.type}'", node)
            self.call("prim.__setitem__", [container, index, value], node,
                      output_types=[T.NoneT])
            return
        if not isinstance(container.type, T.TensorType):
            self.error(f"item assignment is only supported on tensors and "
                       f"lists, not {container.type}", node)
        self.call("Tensor.__setitem__", [container, index, value], node)

    # -- expressions ---------------------------------------------------------------
    def emit_value(self, expr):
        """An expression that must be a graph Value."""
        value = self.emit_expr(expr)
        if isinstance(value, Sugared):
            self.error(f"{value.description} can't be used as a value", expr)
        return value

    def emit_expr(self, expr):
        if type(expr) in UNSUPPORTED:
            self.error(f"{UNSUPPORTED[type(expr)]} aren't supported", expr)
        method = getattr(self, "expr_" + type(expr).__name__, None)
        if method is None:
            self.error(f"{type(expr).__name__} expressions aren't supported", expr)
        return method(expr)

    def expr_Constant(self, expr):
        if isinstance(expr.value, (bytes, complex)) or expr.value is Ellipsis:
            self.error(f"constants of type {type(expr.value).__name__} "
                       "aren't supported", expr)
        return self.constant(expr.value, expr)

    def expr_Name(self, expr):
        return self.lookup(expr.id, expr)

    def lookup(self, name, node):
        if name in self.env:
            value = self.env[name]
            if isinstance(value, Undefined):
                self.error(value.message, node)
            return value
        if name in self.closure:
            return self.from_python(self.closure[name], name, node)
        if name in self.globals:
            return self.from_python(self.globals[name], name, node)
        if name in EXCEPTIONS:
            return ExceptionClass(name)
        if name in ops.BUILTIN_FUNCTIONS or name in ("range", "print"):
            return BuiltinFunction(name)
        if hasattr(builtins, name):
            self.error(f"Python builtin {name}() isn't supported in a script", node)
        self.error(f"undefined value {name}", node)

    def from_python(self, obj, name, node):
        """A global or closure value seen in a script."""
        import ember
        from ..nn import functional as F
        from .. import dtype as ember_dtype
        scalar = (bool, int, float, str, type(None), ember_dtype)
        if isinstance(obj, scalar) or (isinstance(obj, tuple) and obj
                                       and all(isinstance(v, scalar) for v in obj)):
            return self.constant(obj, node)  # immutable: safe to bake in
        if obj is ember:
            return PythonModule("ember", obj)
        if obj is F:
            return PythonModule("F", obj)
        if obj is math:
            return PythonModule("math", obj)
        if obj is ember.nn:
            return PythonModule("ember.nn", obj)
        if isinstance(obj, type) and issubclass(obj, BaseException) \
                and obj.__name__ in EXCEPTIONS and EXCEPTIONS[obj.__name__] is obj:
            return ExceptionClass(obj.__name__)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            self.error(f"only exceptions of the classes {', '.join(sorted(EXCEPTIONS))} "
                       f"can be raised, not {obj.__name__}", node)
        inner = _unwrap_script_function(obj)
        if inner is not None:
            return PythonFunction(inner)
        if inspect.isfunction(obj):
            callee = self.callee_name_of(obj)
            return Callee(callee) if callee else PythonFunction(obj)
        callee = self.callee_name_of(obj)
        if callee:
            return Callee(callee)
        self.error(f"'{name}' is a {type(obj).__name__}, which a script can't use", node)

    @staticmethod
    def callee_name_of(obj):
        """The allowlisted name of a library callable (ember.X, F.X), or None."""
        for name, fn in ops.callee_table().items():
            if fn is obj and name.partition(".")[0] in ("ember", "F", "math", "Tensor"):
                return name
        return None

    def expr_Attribute(self, expr):
        base = self.emit_expr(expr.value)
        attr = expr.attr
        if isinstance(base, PythonModule):
            return self.module_attribute(base, attr, expr)
        if isinstance(base, ModuleRef):
            return self.self_attribute(base, attr, expr)
        if isinstance(base, Sugared):
            self.error(f"unknown attribute '{attr}' of {base.description}", expr)
        t = base.type
        if isinstance(t, T.TensorType):
            if attr in ops.TENSOR_ATTRIBUTES:
                return self.call(f"attr.{attr}", [base], expr)
            if f"Tensor.{attr}" in ops.callee_table():
                return Callee(f"Tensor.{attr}", bound=base)
            self.error(f"unknown attribute or method '{attr}' of Tensor", expr)
        if isinstance(t, T.ListType) and attr == "append":
            return Callee("prim.list_append", bound=base)
        if isinstance(t, T.OptionalType):
            self.error(f"'{attr}' of a value of type {t}: check it is not None "
                       "first (if x is not None: ...)", expr)
        self.error(f"unknown attribute '{attr}' of a value of type {t}", expr)

    def module_attribute(self, base, attr, expr):
        import ember
        namespace = base.namespace
        obj = getattr(base.module, attr, None)
        if namespace == "math":
            if attr in ops.MATH_CONSTANTS:
                return self.constant(getattr(math, attr), expr)
            if attr in ops.MATH_FUNCTIONS:
                return Callee(f"math.{attr}")
        elif namespace == "ember.nn" and attr == "functional":
            return PythonModule("F", obj)
        elif namespace == "ember" and attr == "nn":
            return PythonModule("ember.nn", obj)
        elif namespace in ("ember", "F"):
            if isinstance(obj, ember.dtype):
                return self.constant(obj, expr)
            if f"{namespace}.{attr}" in ops.callee_table():
                return Callee(f"{namespace}.{attr}")
            same_function = self.callee_name_of(obj) if callable(obj) else None
            if same_function:  # F.tanh is ember.tanh re-exported
                return Callee(same_function)
        self.error(f"unknown attribute or function '{attr}' of "
                   f"{base.description}", expr)

    def self_attribute(self, ref, attr, expr):
        module = ref.module
        key = (id(module), attr)
        if key in self.param_inputs:
            return self.param_inputs[key]
        if attr in module._parameters or attr in module._buffers:
            value = module._parameters.get(attr, module._buffers.get(attr))
            if value is None:
                return self.constant(None, expr)
        if attr in module._modules:
            return ModuleRef(module._modules[attr], ref.prefix + attr + ".")
        if attr == "training":
            return self.constant(bool(module.training), expr)
        try:
            obj = getattr(module, attr)
        except AttributeError:
            self.error(f"module of type {type(module).__name__} has no "
                       f"attribute '{attr}'", expr)
        if isinstance(obj, (bool, int, float, str)) or obj is None:
            return self.constant(obj, expr)
        if inspect.ismethod(obj) and obj.__self__ is module:
            return PythonFunction(obj.__func__, self_module=ref)
        callee = self.callee_name_of(obj) if callable(obj) else None
        if callee:  # a library function held as an attribute (activation=F.relu)
            return Callee(callee)
        if inspect.isfunction(obj):  # a staticmethod or a function attribute
            return PythonFunction(obj)
        if isinstance(obj, tuple) and all(isinstance(v, (int, float, bool)) for v in obj):
            return self.constant(obj, expr)
        self.error(f"attribute '{attr}' of {type(module).__name__} is a "
                   f"{type(obj).__name__}, which a script can't use", expr)

    def expr_Tuple(self, expr):
        items = [self.emit_value(e) for e in expr.elts]
        return self.call("prim.tuple", items, expr)

    def expr_List(self, expr):
        items = [self.emit_value(e) for e in expr.elts]
        if items:
            elem = items[0].type
            for index, item in enumerate(items[1:], 1):
                merged = T.unify(elem, item.type)
                if merged is None:
                    self.error(f"Lists must contain only a single type, first "
                               f"element had type {items[0].type} and element "
                               f"{index} had type {item.type}", expr)
                elem = merged
        return self.call("prim.list", items, expr)

    def expr_JoinedStr(self, expr):
        fmt, args = [], []
        for part in expr.values:
            if isinstance(part, ast.Constant):
                fmt.append(str(part.value).replace("{", "{{").replace("}", "}}"))
                continue
            conversion = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[part.conversion]
            spec = ""
            if part.format_spec is not None:
                pieces = part.format_spec.values
                if not all(isinstance(p, ast.Constant) for p in pieces):
                    self.error("computed format specs aren't supported", part)
                spec = ":" + "".join(str(p.value) for p in pieces)
            fmt.append("{" + conversion + spec + "}")
            args.append(self.emit_value(part.value))
        fmt = "".join(fmt)
        try:
            ops.check_format_string(fmt)
        except ValueError as exc:
            self.error(f"unsupported f-string: {exc}", expr)
        return self.call("prim.format", [self.constant(fmt)] + args, expr)

    def expr_BinOp(self, expr):
        left = self.emit_value(expr.left)
        right = self.emit_value(expr.right)
        return self.binary(BINOPS[type(expr.op)], left, right, expr, expr.op)

    def binary(self, name, left, right, expr, op):
        a, b = left.type, right.type
        ok = ((T.is_number(a) or T.is_tensor(a)) and (T.is_number(b) or T.is_tensor(b))) \
            or (name in ("add", "iadd") and isinstance(a, (T.StrType, T.ListType, T.TupleType))
                and (a == b or isinstance(a, T.TupleType) and isinstance(b, T.TupleType)))
        if not ok:
            self.error(f"unsupported operand type(s) for {BINOP_SYMBOLS[type(op)]}"
                       f": '{a}' and '{b}'", expr)
        output_types = None
        if isinstance(a, T.StrType):
            output_types = [T.Str]
        elif isinstance(a, T.ListType):
            output_types = [a]
        elif isinstance(a, T.TupleType):
            output_types = [T.TupleType(a.elems + b.elems)]
        return self.call(f"operator.{name}", [left, right], expr,
                         output_types=output_types)

    def expr_UnaryOp(self, expr):
        operand = self.emit_value(expr.operand)
        if isinstance(expr.op, ast.Not):
            condition = self.as_bool(operand, expr.operand)
            if condition.node.kind == "prim::Constant":  # Note [Conditions decided at compile time]
                return self.constant(not condition.node.attrs["value"], expr)
            return self.call("operator.not_", [condition], expr)
        name = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}[type(expr.op)]
        if not (T.is_number(operand.type) or T.is_tensor(operand.type)):
            self.error(f"bad operand type for unary operator: '{operand.type}'", expr)
        return self.call(f"operator.{name}", [operand], expr)

    def expr_Compare(self, expr):
        """a < b < c: each operand evaluated once, short-circuiting like
        `and`; a single comparison keeps its type (a tensor for tensors)."""
        left = self.emit_value(expr.left)
        pairs = list(zip(expr.ops, expr.comparators))
        if len(pairs) == 1:
            return self.compare(left, pairs[0][0], self.emit_value(pairs[0][1]), expr)
        return self.compare_chain(left, pairs, expr)

    def compare_chain(self, left, pairs, expr):
        op, right_expr = pairs[0]
        right = self.emit_value(right_expr)
        first = self.as_bool(self.compare(left, op, right, expr), expr)
        if len(pairs) == 1:
            return first
        return self.emit_if_blocks(
            first, lambda: None, lambda: None, expr,
            values=(lambda: [self.compare_chain(right, pairs[1:], expr)],
                    lambda: [self.constant(False)]),
            value_types=[T.Bool])[0]

    def compare(self, left, op, right, expr):
        if isinstance(op, (ast.Is, ast.IsNot)):
            return self.identity(left, right, isinstance(op, ast.IsNot), expr)
        if isinstance(op, (ast.In, ast.NotIn)):
            result = self.call("operator.contains", [right, left], expr)
            if isinstance(op, ast.NotIn):
                result = self.call("operator.not_", [result], expr)
            return result
        decided = self.compile_time_comparison(left, op, right, expr)
        if decided is not None:
            return decided
        a, b = left.type, right.type
        comparable = ((T.is_number(a) or T.is_tensor(a)) and (T.is_number(b) or T.is_tensor(b))) \
            or a == b or isinstance(op, (ast.Eq, ast.NotEq))
        if not comparable:
            self.error(f"'{type(op).__name__}' not supported between values of "
                       f"type '{a}' and '{b}'", expr)
        return self.call(f"operator.{COMPARISONS[type(op)]}", [left, right], expr)

    # Note [Conditions decided at compile time]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # TorchScript's emitter compiles only the taken branch of an `if` whose
    # condition is a constant (`static_if` in ir_emitter.cpp: bool literals
    # and constants, `x is None` on a non-Optional x, hasattr/isinstance);
    # a module's `__constants__`/Final attributes and `self.training` are
    # such constants.  ember treats every module attribute of a scalar or
    # tuple type as a constant, and goes one step further: `==`, `!=`, `<`,
    # ... between two constants of scalar type (`self.padding_mode !=
    # "zeros"`, `self._spatial == 1`) are evaluated here, at compile time,
    # so `if` on them also compiles only the taken branch.  Without this the
    # branch not taken must still type-check, which nn layers written for
    # eager use (a `padding` rebound from a tuple to 0) do not.  The result
    # is the same program: the other branch could never run.
    _FOLDABLE = (bool, int, float, str, type(None), tuple)

    def compile_time_comparison(self, left, op, right, expr):
        """A constant bool for a comparison of two scalar constants, or None."""
        if type(op) not in COMPARISONS:
            return None
        values = []
        for value in (left, right):
            if value.node.kind != "prim::Constant":
                return None
            constant = value.node.attrs["value"]
            if not isinstance(constant, self._FOLDABLE):
                return None
            values.append(constant)
        if not isinstance(op, (ast.Eq, ast.NotEq)) and not all(
                isinstance(v, (bool, int, float)) for v in values):
            return None  # ordering of anything but numbers: left to run time
        import operator
        return self.constant(bool(getattr(operator, COMPARISONS[type(op)])(*values)), expr)

    def identity(self, left, right, negate, expr):
        """`x is None`: decided at compile time unless x is Optional."""
        types = [left.type, right.type]
        if isinstance(types[1], T.NoneType):
            types.reverse()
        if isinstance(types[0], T.NoneType):
            if isinstance(types[1], T.NoneType):
                return self.constant(not negate, expr)
            if not isinstance(types[1], T.OptionalType):
                return self.constant(negate, expr)
        return self.call("operator.is_not" if negate else "operator.is_",
                         [left, right], expr)

    def refinements(self, test):
        """({name: optional value} unwrapped in the true branch, same for
        the false branch) for `x is not None`, `x is None` and `and`."""
        then_refined, else_refined = {}, {}
        if isinstance(test, ast.Compare) and len(test.ops) == 1 \
                and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(test.left, ast.Name) \
                and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value is None:
            value = self.env.get(test.left.id)
            if isinstance(value, ir.Value) and isinstance(value.type, T.OptionalType):
                target = then_refined if isinstance(test.ops[0], ast.IsNot) else else_refined
                target[test.left.id] = value
        elif isinstance(test, ast.BoolOp):
            # `a and b` true: both true; `a or b` false: both false
            side = 0 if isinstance(test.op, ast.And) else 1
            target = then_refined if side == 0 else else_refined
            for operand in test.values:
                target.update(self.refinements(operand)[side])
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            else_refined, then_refined = self.refinements(test.operand)
        return then_refined, else_refined

    def expr_BoolOp(self, expr):
        """`a and b` / `a or b`, short-circuiting (bools only)."""
        is_and = isinstance(expr.op, ast.And)
        return self.bool_chain(expr.values, is_and, expr)

    def bool_chain(self, operands, is_and, expr):
        first = self.as_bool(self.emit_value(operands[0]), operands[0])
        if len(operands) == 1:
            return first
        if first.node.kind == "prim::Constant":
            # Note [Conditions decided at compile time]: a constant operand
            # either decides the chain or drops out of it
            if bool(first.node.attrs["value"]) != is_and:
                return first
            return self.bool_chain(operands[1:], is_and, expr)
        # the rest runs only if the first operand was true (and) / false (or)
        refined = self.refinements(operands[0])[0 if is_and else 1]

        def rest():
            saved = dict(self.env)
            for name, value in refined.items():
                self.env[name] = self.call("prim.unwrap_optional", [value], None)
            result = self.bool_chain(operands[1:], is_and, expr)
            self.env = saved
            return [result]

        short = lambda: [self.constant(not is_and)]  # noqa: E731
        return self.emit_if_blocks(
            first, lambda: None, lambda: None, expr,
            values=(rest, short) if is_and else (short, rest),
            value_types=[T.Bool])[0]

    def expr_IfExp(self, expr):
        cond = self.emit_condition(expr.test)
        if cond.node.kind == "prim::Constant":  # Note [Conditions decided at compile time]
            return self.emit_value(expr.body if cond.node.attrs["value"] else expr.orelse)
        then_refined, else_refined = self.refinements(expr.test)

        def branch(refined, body):
            def run():
                saved = dict(self.env)
                for name, value in refined.items():
                    self.env[name] = self.call("prim.unwrap_optional", [value], None)
                result = self.emit_value(body)
                self.env = saved
                return [result]
            return run
        return self.emit_if_blocks(
            cond, lambda: None, lambda: None, expr,
            values=(branch(then_refined, expr.body), branch(else_refined, expr.orelse)))[0]

    def emit_condition(self, expr):
        return self.as_bool(self.emit_value(expr), expr)

    def as_bool(self, value, expr):
        """A condition as a bool: tensors go through prim.bool (`if t:`)."""
        t = value.type
        if isinstance(t, T.BoolType):
            return value
        if isinstance(t, T.TensorType):
            return self.call("prim.bool", [value], expr)
        if isinstance(t, (T.IntType, T.FloatType, T.NumberType)):
            return self.call("builtins.bool", [value], expr)
        self.error(f"expected a bool, a number or a tensor for a condition, "
                   f"but got a value of type {t}", expr)

    # -- indexing ------------------------------------------------------------------
    def expr_Subscript(self, expr):
        container = self.emit_value(expr.value)
        if isinstance(container.type, T.TupleType):
            return self.tuple_subscript(container, expr)
        index = self.emit_index(expr.slice, container)
        return self.getitem(container, index, expr)

    def tuple_subscript(self, container, expr):
        n = len(container.type.elems)
        index = self.constant_int(expr.slice)
        if isinstance(index, int):
            if not -n <= index < n:
                self.error(f"tuple index {index} out of range for a tuple of "
                           f"{n} elements", expr)
            return self.tuple_item(container, index % n, expr)
        if isinstance(expr.slice, ast.Slice):
            bounds = [None if e is None else self.constant_int(e)
                      for e in (expr.slice.lower, expr.slice.upper, expr.slice.step)]
            if any(b is not None and not isinstance(b, int) for b in bounds):
                self.error("tuple slices must have constant bounds", expr)
            picked = range(n)[slice(*bounds)]
            return self.call("prim.tuple", [self.tuple_item(container, i, expr)
                                            for i in picked], expr)
        self.error("tuple indices must be constant integers", expr.slice)

    @staticmethod
    def constant_int(expr):
        if isinstance(expr, ast.Constant) and type(expr.value) is int:
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) \
                and isinstance(expr.operand, ast.Constant) \
                and type(expr.operand.value) is int:
            return -expr.operand.value
        return expr

    def emit_index(self, expr, container):
        """An index expression: slices via prim.slice, `...` and `None`
        kept as constants, tuples of those via prim.tuple."""
        if isinstance(expr, ast.Slice):
            parts = [self.constant(None) if e is None else self.emit_value(e)
                     for e in (expr.lower, expr.upper, expr.step)]
            for part, e in zip(parts, (expr.lower, expr.upper, expr.step)):
                if not isinstance(part.type, (T.IntType, T.NoneType, T.OptionalType)):
                    self.error(f"slice indices must be integers or None, not "
                               f"{part.type}", e)
            return self.call("prim.slice", parts, expr, output_types=[T.Any])
        if isinstance(expr, ast.Constant) and expr.value is Ellipsis:
            return self.call("prim.ellipsis", [], expr, output_types=[T.Any])
        if isinstance(expr, ast.Tuple):
            if not isinstance(container.type, T.TensorType):
                self.error("multi-dimensional indexing is only for tensors", expr)
            items = [self.emit_index(e, container) for e in expr.elts]
            return self.call("prim.tuple", items, expr)
        return self.emit_value(expr)

    # -- calls ---------------------------------------------------------------------
    def expr_Call(self, expr):
        func = self.emit_expr(expr.func)
        for arg in expr.args:
            if isinstance(arg, ast.Starred):
                self.error("starred arguments (*args) aren't supported", arg)
        for kw in expr.keywords:
            if kw.arg is None:
                self.error("keyword argument unpacking (**kwargs) isn't supported", kw)
        if isinstance(func, PythonFunction):
            return self.inline_call(func, expr)
        if isinstance(func, ModuleRef):
            forward = getattr(type(func.module), "forward", None)
            return self.inline_call(PythonFunction(forward, self_module=func), expr)
        args = [self.emit_value(a) for a in expr.args]
        kwargs = [(kw.arg, self.emit_value(kw.value)) for kw in expr.keywords]
        if isinstance(func, Callee):
            bound = [func.bound] if func.bound is not None else []
            self.check_arity(func.name, bound + args, kwargs, expr)
            if func.name == "prim.list_append":
                self.check_append(func.bound, args, expr)
            return self.call(func.name, bound + args, expr, kwargs)
        if isinstance(func, BuiltinFunction):
            return self.builtin_call(func.name, args, kwargs, expr)
        if isinstance(func, ExceptionClass):
            self.error("exceptions can only be raised", expr)
        if isinstance(func, Sugared):
            self.error(f"{func.description} isn't callable", expr)
        self.error(f"a value of type {func.type} isn't callable", expr)

    def check_append(self, lst, args, expr):
        elem = lst.type.elem
        if len(args) != 1:
            self.error(f"append() takes exactly one argument ({len(args)} given)", expr)
        if not args[0].type.is_subtype_of(elem):
            hint = " (an empty list is a List[Tensor] unless annotated, " \
                   "e.g. xs: List[int] = [])" if isinstance(elem, T.TensorType) else ""
            self.error(f"Expected a value of type '{elem}' for append to a "
                       f"{lst.type} but instead found type '{args[0].type}'{hint}",
                       expr)

    def check_arity(self, callee, args, kwargs, expr):
        """Argument count and keyword names against the callee's Python
        signature, where it has one (C builtins don't)."""
        try:
            signature = inspect.signature(ops.resolve(callee))
        except (ValueError, TypeError, KeyError):
            return
        try:
            signature.bind(*args, **dict(kwargs))
        except TypeError as exc:
            self.error(f"{ops.method_name(callee)}(): {exc}", expr)

    def builtin_call(self, name, args, kwargs, expr):
        if name == "range":
            self.error("range() is only supported as the iterable of a for loop", expr)
        if kwargs:
            self.error(f"{name}() takes no keyword arguments here", expr)
        if name == "print":
            return self.call("prim.print", args, expr, output_types=[T.NoneT])
        if name == "len":
            if len(args) != 1:
                self.error(f"len() takes exactly one argument ({len(args)} given)", expr)
            if not isinstance(args[0].type, (T.ListType, T.TensorType, T.StrType)):
                if isinstance(args[0].type, T.TupleType):
                    return self.constant(len(args[0].type.elems), expr)
                self.error(f"object of type {args[0].type} has no len()", expr)
        if name in ("int", "float", "bool") and len(args) == 1:
            t = args[0].type
            if not (T.is_number(t) or T.is_tensor(t) or (isinstance(t, T.StrType) and name != "bool")):
                self.error(f"{name}() argument must be a number, a tensor or a "
                           f"string, not {t}", expr)
            if name == "bool" and T.is_tensor(t):
                return self.call("prim.bool", args, expr)
            result_type = {"int": T.Int, "float": T.Float, "bool": T.Bool}[name]
            return self.call(f"builtins.{name}", args, expr, output_types=[result_type])
        return self.call(f"builtins.{name}", args, expr)

    def inline_call(self, func, expr):
        """Compiles a Python function's body into this graph (a call)."""
        fn = func.fn
        key = (fn, id(func.self_module.module) if func.self_module else None)
        if key in self.inline_stack:
            chain = " -> ".join(f.__name__ for f, _ in self.inline_stack + [key])
            self.error(f"recursive calls aren't supported ({chain})", expr)
        source = Source(fn)
        signature = signature_of(fn, source, skip_self=func.self_module is not None)
        positional = [self.emit_value(a) for a in expr.args]
        keywords = {}
        for kw in expr.keywords:
            keywords[kw.arg] = (self.emit_value(kw.value), kw)
        values = self.bind_arguments(signature, positional, keywords, expr)
        emitter = Emitter(self.graph, source, fn.__globals__, closure_of(fn),
                          self.inline_stack + [key], func.self_module, self.param_inputs)
        emitter.block = self.block
        if func.self_module is not None:
            emitter.env["self"] = func.self_module
        emitter.bind_parameters(signature, values)
        result = emitter.emit_body(source.tree, signature.return_type)
        self.block = emitter.block
        return result

    def bind_arguments(self, signature, positional, keywords, expr):
        """Values for each parameter of an inlined function, type-checked."""
        params = signature.params
        name = signature.name
        if len(positional) > len(params):
            self.error(f"{name}() takes {len(params)} positional arguments but "
                       f"{len(positional)} were given", expr)
        values = list(positional) + [None] * (len(params) - len(positional))
        for key, (value, kw) in keywords.items():
            names = [p.name for p in params]
            if key not in names:
                self.error(f"{name}() got an unexpected keyword argument '{key}'", kw)
            index = names.index(key)
            if values[index] is not None:
                self.error(f"{name}() got multiple values for argument '{key}'", kw)
            values[index] = value
        for index, param in enumerate(params):
            if values[index] is None:
                if not param.has_default:
                    self.error(f"{name}() missing required argument '{param.name}'", expr)
                values[index] = self.constant(param.default, expr)
            value = values[index]
            if not value.type.is_subtype_of(param.type):
                self.error(f"Expected a value of type '{param.type}' for argument "
                           f"'{param.name}' but instead found type '{value.type}'",
                           expr)
            values[index] = self.as_declared(value, param.type, expr)
        return values

    # -- helpers -----------------------------------------------------------------
    def annotation_type(self, expr):
        """A type annotation in the source (an expression) -> JitType."""
        try:
            obj = eval(compile(ast.Expression(expr), "<annotation>", "eval"),
                       dict(self.globals), dict(self.closure))
        except Exception as exc:  # an annotation naming an unknown type
            self.error(f"unknown type annotation: {exc}", expr)
        return type_from_annotation(obj, lambda message: self.error(message, expr))


# ---------------------------------------------------------------------------
# Entry points


def closure_of(fn):
    """{name: value} of a function's closure cells."""
    names = fn.__code__.co_freevars
    cells = fn.__closure__ or ()
    result = {}
    for name, cell in zip(names, cells):
        try:
            result[name] = cell.cell_contents
        except ValueError:
            pass
    return result


def signature_of(fn, source, skip_self=False):
    """The Signature of a function from its annotations and defaults."""
    fndef = source.tree
    if not isinstance(fndef, ast.FunctionDef):
        raise ir.ScriptError("only functions can be scripted", source.range(fndef))
    args = fndef.args
    for bad, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
        if bad is not None:
            raise ir.ScriptError(f"variadic arguments ({what}) aren't supported",
                                 source.range(bad))
    if args.kwonlyargs or args.posonlyargs:
        raise ir.ScriptError("keyword-only and positional-only parameters "
                             "aren't supported", source.range(fndef))
    python_signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = dict(getattr(fn, "__annotations__", {}))
    params = []
    arg_nodes = list(args.args)
    if skip_self:
        arg_nodes = arg_nodes[1:]
    for node in arg_nodes:
        name = node.arg

        def error(message, node=node):
            raise ir.ScriptError(message, source.range(node))
        default = python_signature.parameters[name].default
        if name in hints:
            type_ = type_from_annotation(hints[name], error)
        else:  # unannotated: a Tensor, or an Optional one if it defaults to None
            type_ = T.OptionalType(T.Tensor) if default is None else T.Tensor
        if default is not inspect.Parameter.empty:
            default_type = T.type_of_value(default)
            if default_type is None or not default_type.is_subtype_of(type_):
                error(f"default value {default!r} of '{name}' doesn't have type {type_}")
        params.append(Parameter(name, type_, default))
    return_type = None
    if "return" in hints:
        def return_error(message):
            raise ir.ScriptError(message, source.range(fndef.returns or fndef))
        return_type = type_from_annotation(hints["return"], return_error)
    return Signature(fn.__name__, params, return_type)


def _compile(fn, self_module=None, param_inputs=None, graph=None):
    source = Source(fn)
    signature = signature_of(fn, source, skip_self=self_module is not None)
    graph = graph or ir.Graph()
    graph.name = fn.__name__
    values = [graph.add_input(p.name, p.type) for p in signature.params]
    key = (fn, id(self_module.module) if self_module else None)
    emitter = Emitter(graph, source, fn.__globals__, closure_of(fn), [key],
                      self_module, param_inputs)
    if self_module is not None:
        emitter.env["self"] = self_module
    emitter.bind_parameters(signature, values)
    result = emitter.emit_body(source.tree, signature.return_type)
    graph.block.set_returns([result])
    if signature.return_type is None:
        signature.return_type = result.type
    return graph, signature


def compile_function(fn):
    """Python function (or scripted function) -> (ir.Graph, Signature)."""
    inner = _unwrap_script_function(fn)
    if inner is not None:
        fn = inner
    if not inspect.isfunction(fn):
        raise ir.ScriptError(f"can only script Python functions, not {fn!r}")
    return _compile(fn)


def compile_module_forward(module):
    """nn.Module -> (graph, signature, state_names): the forward of the
    module with its parameters and buffers (named_parameters() then
    named_buffers(), by their dotted names) as the leading graph inputs,
    submodule calls and methods inlined.  The signature lists every graph
    input, the state first (what ScriptModule passes)."""
    forward = getattr(type(module), "forward", None)
    if not inspect.isfunction(forward):
        raise ir.ScriptError(f"{type(module).__name__} has no Python forward")
    graph = ir.Graph()
    by_tensor, names = {}, []
    state = list(module.named_parameters()) + list(module.named_buffers())
    for key, tensor in state:
        by_tensor[id(tensor)] = graph.add_input(key.replace(".", "_"), T.Tensor)
        names.append(key)
    # every (module, attribute) holding a state tensor, shared ones included
    param_inputs = {}
    for _, sub in module.named_modules(remove_duplicate=False):
        for kind in ("_parameters", "_buffers"):
            for name, tensor in getattr(sub, kind).items():
                if tensor is not None and id(tensor) in by_tensor:
                    param_inputs[(id(sub), name)] = by_tensor[id(tensor)]
    graph, signature = _compile(forward, ModuleRef(module, ""), param_inputs, graph)
    signature.params[:0] = [Parameter(key, T.Tensor) for key in names]
    signature.name = f"{type(module).__name__}.forward"
    return graph, signature, names
