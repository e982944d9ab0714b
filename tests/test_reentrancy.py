"""Re-entrancy proof for every C entry point (issue 11).

A borrowed pointer dies at any call that can run Python.  This suite calls
every entry point that tests/entry_points.py enumerates from the extension's
own tables (operator functions and methods, the C factories, the tensor type's
C methods) plus the type slots (number slots, comparisons, @, indexing) with
one argument replaced by an evil object: its __index__ / __float__ / __len__ /
__getitem__ runs Python that

    swap            replaces every tensor argument's memory
                    (`x.data = ember.zeros(1)`), freeing the old one;
    clear           clears the list it came from (a size list, or the list of
                    tensors of cat/stack/index_put_), dropping its items;
    alloc_install   installs a Python allocator (PoisoningAllocator);
    alloc_uninstall uninstalls the Python allocator the call began under
                    (its last reference goes with it);

and then returns the original value.  A Python allocator whose malloc does
`swap` or `alloc_uninstall` is probed the same way (position 'malloc').

Accepted outcomes: a clean exception (any Exception but SystemError, and no
exception left pending), or a result equal to the plain call's on fresh copies
of the inputs; after `swap`, also the plain call's with any subset of the
tensor arguments replaced by ember.zeros(1) (the swap may land before or after
the entry point takes each tensor), and for an in-place call, `self` itself.

The sweep runs in a child process per group (a crash must not take pytest
down); the child logs each case before running it, so the test names the case
that crashed and resumes after it (EMBER_REENTRY_MAX_CRASHES, default 3).
Run this file as a script to sweep one group by hand:

    PYTHONPATH=python python tests/test_reentrancy.py --group methods --log /tmp/log
"""

import argparse
import itertools
import json
import operator
import os
import sys
import tempfile

import numpy as np
import pytest

import ember
import entry_points as ep
from entry_points import IDX, MASK, Call, Float, Int, Sizes, T

C_ALLOCATOR = ember.memory.get_allocator("cpu")

# ---- evil objects --------------------------------------------------------------


class EvilIndex:
    def __init__(self, value, action):
        self.value, self.action = value, action

    def __index__(self):
        self.action()
        return self.value

    def __repr__(self):
        return f"EvilIndex({self.value})"


class EvilFloat:
    def __init__(self, value, action):
        self.value, self.action = value, action

    def __float__(self):
        self.action()
        return float(self.value)

    def __repr__(self):
        return f"EvilFloat({self.value})"


class EvilNumpyInt(np.int64):
    """A NumPy integer (the scalar parsers' fast path) whose __index__ runs Python."""

    action = staticmethod(lambda: None)

    def __index__(self):
        type(self).action()
        return int(np.int64(self))


class EvilSequence:
    """A sequence (not a list) whose __len__ and __getitem__ run Python."""

    def __init__(self, items, action):
        self.items, self.action = list(items), action

    def __len__(self):
        self.action()
        return len(self.items)

    def __getitem__(self, index):
        self.action()
        return self.items[index]

    def __repr__(self):
        return f"EvilSequence({self.items})"


# ---- actions ---------------------------------------------------------------------


def swap_action(call):
    def act():
        for tensor in call.tensors:
            tensor.data = ember.zeros(1)
    return act


def clear_action(call, holder):
    lists = [holder] if holder is not None else list(call.tensor_lists)

    def act():
        for items in lists:
            items.clear()
    return act


def alloc_install_action():
    def act():
        ember.memory.set_allocator(ember.memory.PoisoningAllocator(base=C_ALLOCATOR))
    return act


def alloc_uninstall_action():
    def act():
        ember.memory.set_allocator(C_ALLOCATOR)
    return act


ACTIONS = ("swap", "clear", "alloc_install", "alloc_uninstall")


def make_action(name, call, holder):
    if name == "swap":
        return swap_action(call)
    if name == "clear":
        return clear_action(call, holder)
    if name == "alloc_install":
        return alloc_install_action()
    return alloc_uninstall_action()


def evil_factory(action_name, form):
    def build(value, placeholder, holder, call):
        action = make_action(action_name, call, holder)
        if isinstance(placeholder, Sizes) and holder is None:
            return EvilSequence(value, action)
        if isinstance(placeholder, Float):
            return EvilFloat(value, action)
        if form == "numpy":
            EvilNumpyInt.action = staticmethod(action)
            return EvilNumpyInt(value)
        return EvilIndex(value, action)
    return build


class EvilAllocator(ember.memory.CountingAllocator):
    """A Python allocator whose first malloc runs an action."""

    def __init__(self, action):
        super().__init__(base=C_ALLOCATOR)
        self.action = action

    def malloc(self, nbytes):
        action, self.action = self.action, None
        if action is not None:
            action()
        return super().malloc(nbytes)


# ---- the slots and exports ------------------------------------------------------------


def _binary(op, reflected=False):
    return (lambda a, b: op(b, a)) if reflected else op


def _setitem(key_builder):
    def run(t, *parts):
        *key, value = parts
        t[key_builder(*key)] = value
        return t
    return run


SLOTS = {}
for _name in ("add sub mul truediv floordiv mod pow lt le eq ne gt ge").split():
    _op = getattr(operator, _name)
    SLOTS[f"a {_name} s"] = (_op, [Call(T(3, 4), Float(2.5)), Call(T(3, 4), T(3, 4))])
    SLOTS[f"s {_name} a"] = (_binary(_op, True), [Call(T(3, 4), Float(2.5))])
    if _name not in ("lt", "le", "eq", "ne", "gt", "ge"):
        SLOTS[f"a i{_name} s"] = (getattr(operator, "i" + _name), [Call(T(3, 4), Float(2.5))])
for _name in ("and_ or_ xor lshift rshift add mul").split():
    _op = getattr(operator, _name)
    SLOTS[f"int a {_name} s"] = (_op, [Call(T(3, 4, dtype="int64"), Int(2))])
    SLOTS[f"int s {_name} a"] = (_binary(_op, True), [Call(T(3, 4, dtype="int64"), Int(2))])
SLOTS["a @ b"] = (operator.matmul, [Call(T(3, 4), T(4, 5))])
SLOTS["a @= b"] = (operator.imatmul, [Call(T(4, 4), T(4, 4))])
SLOTS["t[i]"] = (lambda t, i: t[i], [Call(T(3, 4), Int(1))])
SLOTS["t[i, j]"] = (lambda t, i, j: t[i, j], [Call(T(3, 4), Int(1), Int(2))])
SLOTS["t[i, ...]"] = (lambda t, i: t[i, ...], [Call(T(3, 4), Int(1))])
SLOTS["t[i:j:k]"] = (lambda t, i, j, k: t[i:j:k], [Call(T(5, 4), Int(0), Int(4), Int(2))])
SLOTS["t[list]"] = (lambda t, key: t[key], [Call(T(3, 4), Sizes([0, 2]))])
SLOTS["t[list, i]"] = (lambda t, key, i: t[key, i], [Call(T(3, 4), Sizes([0, 2]), Int(1))])
SLOTS["t[idx, mask]"] = (lambda t, i, m: t[i, m], [Call(T(3, 4), IDX(2, high=3), MASK(4))])
SLOTS["t[i] = s"] = (_setitem(lambda i: i), [Call(T(3, 4), Int(1), Float(2.5))])
SLOTS["t[i:j] = u"] = (_setitem(lambda i, j: slice(i, j)),
                       [Call(T(3, 4), Int(0), Int(2), T(4))])
SLOTS["t[list] = s"] = (_setitem(lambda key: key), [Call(T(3, 4), Sizes([0, 2]), Float(2.5))])
SLOTS["t[mask] = s"] = (_setitem(lambda m: m), [Call(T(3, 4), MASK(3, 4), Float(2.5))])
SLOTS["int(t)"] = (int, [Call(T(1))])
SLOTS["float(t)"] = (float, [Call(T(1))])
SLOTS["bool(t)"] = (bool, [Call(T(1))])
SLOTS["operator.index(t)"] = (operator.index, [Call(T(1, dtype="int64"))])
SLOTS["len(t)"] = (len, [Call(T(3, 4))])
SLOTS["list(iter(t))"] = (lambda t: list(iter(t)), [Call(T(3, 4))])
SLOTS["t.__dlpack__()"] = (lambda t, v: t.__dlpack__(max_version=v),
                           [Call(T(3, 4), Sizes([1, 0], container=tuple))])

NONDETERMINISTIC = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
                    "randperm", "multinomial", "bernoulli", "poisson", "uniform_", "normal_",
                    "random_", "exponential_", "bernoulli_", "empty", "empty_like",
                    "data_ptr", "untyped_storage", "__dlpack__", "t.__dlpack__()"}


def slot_invoke(name, args, kwargs):
    return SLOTS[name][0](*args, **kwargs)


def invoke(kind, name, args, kwargs):
    if kind == "slot":
        return slot_invoke(name, args, kwargs)
    return ep.invoke(kind, name, args, kwargs)


def is_inplace(kind, name):
    if kind == "slot":
        return " i" in name or "] =" in name
    return name.endswith("_") and not name.endswith("__")


# ---- running one case ---------------------------------------------------------------


class Case:
    def __init__(self, kind, name, template, position, action, form):
        self.kind, self.name, self.template = kind, name, template
        self.position, self.action, self.form = position, action, form

    def __str__(self):
        return (f"{self.kind} {self.name}{self.template!r} at {self.position} "
                f"{self.action}/{self.form}")


def reference(kind, name, template, swapped=()):
    """The plain call's snapshot, with the tensors numbered in `swapped`
    replaced by ember.zeros(1) first; None when that call raises."""
    args, kwargs, call = ep.materialize(template)
    for index in swapped:
        call.tensors[index].data = ember.zeros(1)
    try:
        return ep.snapshot(invoke(kind, name, args, kwargs))
    except Exception:  # noqa: BLE001 - that combination is simply not a valid outcome
        return None


def accepted(case, result, args, kwargs, call_tensor_count):
    got = ep.snapshot(result)
    if case.name in NONDETERMINISTIC:
        return True
    plain = reference(case.kind, case.name, case.template)
    if plain is not None and ep.same(got, plain):
        return True
    if (case.kind == "slot" and case.position != "malloc"
            and case.name.split()[-2] in ("eq", "ne") and isinstance(result, bool)):
        # An evil placeholder is an object with __float__/__index__ only, not
        # a number: == and != fall back to identity, as PyTorch's do.
        return True
    if case.action != "swap":
        return False
    if is_inplace(case.kind, case.name) and args and result is args[0]:
        return True
    if isinstance(result, ember.Tensor) and result is kwargs.get("out"):
        return True  # out= was returned; the evil code replaced its .data
    count = min(call_tensor_count, 4)
    for size in range(1, count + 1):
        for swapped in itertools.combinations(range(count), size):
            ref = reference(case.kind, case.name, case.template, swapped)
            if ref is not None and ep.same(got, ref):
                return True
    return False


def run_case(case):
    """None when the outcome is accepted, else a description of what went wrong."""
    with ep.allocator_restored():
        if case.position == "malloc":
            args, kwargs, call = ep.materialize(case.template)
            action = (swap_action(call) if case.action == "swap"
                      else alloc_uninstall_action())
            ember.memory.set_allocator(EvilAllocator(action))
        else:
            if case.action == "alloc_uninstall":
                ember.memory.set_allocator(ember.memory.CountingAllocator(base=C_ALLOCATOR))
            args, kwargs, call = ep.materialize(case.template, case.position,
                                                evil_factory(case.action, case.form))
        tensor_count = len(call.tensors)
        if case.action == "clear":
            call.tensors = []  # the cleared list must hold the last references
        try:
            result = invoke(case.kind, case.name, args, kwargs)
        except SystemError as error:
            return f"SystemError: {error}"
        except Exception:  # noqa: BLE001 - a clean exception is an accepted outcome
            result = _RAISED
    # A clean exception must not leave another one pending.
    try:
        (ember.ones(2) + 1).sum().item()
    except Exception as error:  # noqa: BLE001
        return f"an exception was left pending: {type(error).__name__}: {error}"
    if result is _RAISED:
        return None
    if not accepted(case, result, args, kwargs, tensor_count):
        return f"wrong result: {ep.snapshot(result)!r:.300}"
    return None


_RAISED = object()


def cases_for(kind, name, templates):
    for template in templates:
        has_lists = any(isinstance(a, ep.Tensors) for a in
                        list(template.args) + list(template.kwargs.values()))
        for position in template.probe_positions():
            sized_item = position[2] is not None
            for action in ACTIONS:
                if action == "clear" and not (sized_item or has_lists):
                    continue
                forms = ["plain"]
                placeholder = (template.args[position[1]] if position[0] == "arg"
                               else template.kwargs[position[1]])
                if isinstance(placeholder, Int) and action == "swap":
                    forms.append("numpy")
                for form in forms:
                    yield Case(kind, name, template, position, action, form)
        for action in ("swap", "alloc_uninstall"):
            yield Case(kind, name, template, "malloc", action, "allocator")


def skipped_probes():
    """EMBER_REENTRY_SKIP: comma-separated 'position:action' pairs to leave
    out while triaging (e.g. 'malloc:alloc_uninstall', one root cause that
    crashes every allocating entry point and hides the others)."""
    pairs = os.environ.get("EMBER_REENTRY_SKIP", "")
    return {tuple(p.split(":", 1)) for p in pairs.split(",") if ":" in p}


def group_cases(group):
    if group == "slots":
        entries = [("slot", name, templates) for name, (_, templates) in SLOTS.items()]
    else:
        kind = {"functions": "function", "methods": "method"}[group]
        entries = [(k, n, ep.templates_for(k, n)[0]) for k, n in ep.entry_points()
                   if k == kind]
    skip = skipped_probes()
    cases = []
    for kind, name, templates in entries:
        cases.extend(case for case in cases_for(kind, name, templates)
                     if (str(case.position), case.action) not in skip
                     and ("any", case.action) not in skip)
    return cases


GROUPS = ("functions", "methods", "slots", "exports")


# ---- exports: memory handed out must outlive the tensor's .data ---------------------


def export_cases():
    def numpy_export():
        t = ember.arange(6.0)
        array = t.numpy()
        t.data = ember.zeros(1)
        ember.zeros(6)  # reuses the freed block if the export did not hold it
        return array.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def buffer_export():
        t = ember.arange(6.0)
        try:
            view = memoryview(t)
        except TypeError:  # no buffer protocol: nothing exported
            return True
        t.data = ember.zeros(1)
        ember.zeros(6)
        return view.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def dlpack_export():
        t = ember.arange(6.0)

        class Producer:
            capsule = t.__dlpack__()

            def __dlpack__(self, **kwargs):
                return self.capsule

            def __dlpack_device__(self):
                return t.__dlpack_device__()

        producer = Producer()
        t.data = ember.zeros(1)
        ember.zeros(6)
        return ember.from_dlpack(producer).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def iterator_after_rank_change():
        t = ember.arange(6.0).reshape(3, 2)
        iterator = iter(t)
        next(iterator)
        t.data = ember.tensor(1.0)  # 0-d now
        try:
            list(iterator)
        except Exception:  # noqa: BLE001 - a clean error is fine
            pass
        return True

    def data_swap_inside_free():
        # The old tensor's memory is released by a Python allocator's free,
        # which swaps .data again: `t.data = x` must install x first.
        holder = {}

        class SwappingFree(ember.memory.CountingAllocator):
            def free(self, address):
                super().free(address)
                if "t" in holder:
                    holder.pop("t").data = ember.ones(2)

        with ep.allocator_restored():
            ember.memory.set_allocator(SwappingFree(base=C_ALLOCATOR))
            t = ember.arange(4.0)
            ember.memory.set_allocator(C_ALLOCATOR)
        holder["t"] = t
        t.data = ember.zeros(3)
        return t.shape in ((3,), (2,))

    return [("numpy() after t.data =", numpy_export),
            ("memoryview(t) after t.data =", buffer_export),
            ("__dlpack__ after t.data =", dlpack_export),
            ("iter(t) after t became 0-d", iterator_after_rank_change),
            ("t.data = x while free() re-enters", data_swap_inside_free)]


# ---- the child process ------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--group", choices=GROUPS, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--log")
    options = parser.parse_args(argv)
    log = ep.CaseLog(options.log)
    failures, count = [], 0
    if options.group == "exports":
        work = [(name, lambda run=run: None if run() else "wrong value")
                for name, run in export_cases()]
    else:
        work = [(str(case), lambda case=case: run_case(case))
                for case in group_cases(options.group)]
    for index, (description, run) in enumerate(work):
        if index < options.start:
            continue
        log.write(f"{index} {description}")
        try:
            problem = run()
        except Exception as error:  # noqa: BLE001 - the harness itself must go on
            problem = f"harness error {type(error).__name__}: {error}"
        count += 1
        if problem is not None:
            failures.append(f"{index} {description}: {problem}")
            log.write(f"FAIL {failures[-1]}")
    print("REPORT " + json.dumps({"cases": count, "total": len(work), "failures": failures}))
    return 0


# ---- the tests --------------------------------------------------------------------------


@pytest.mark.noleakcheck
def test_every_entry_point_has_a_working_call():
    """Coverage of the generated suites: each entry point found in the tables
    has a call the plain arguments accept; few rely on the generic probes."""
    generic, broken, total = [], [], 0
    for kind, name in ep.entry_points():
        total += 1
        templates, is_generic = ep.templates_for(kind, name)
        if not templates:
            broken.append(f"{kind} {name}")
        elif is_generic:
            generic.append(f"{kind} {name}")
    assert not broken, f"entry points with no working call (add a template): {broken}"
    assert len(generic) <= 0.05 * total, (
        f"{len(generic)} of {total} entry points have no argument template, only "
        f"generic probes; add templates to tests/entry_points.py for: {generic}")


@pytest.mark.noleakcheck
def test_declared_templates_all_work():
    """A template the plain call rejects tests nothing: it must be fixed."""
    rotten = []
    for kind, name in ep.entry_points():
        for template in ep.declared_templates(kind, name):
            error = ep.plain_call_error(kind, name, template)
            if error is not None:
                rotten.append(f"{kind} {name}{template!r}: {type(error).__name__}: {error}")
    for name, (function, templates) in SLOTS.items():
        for template in templates:
            try:
                args, kwargs, _ = ep.materialize(template)
                function(*args, **kwargs)
            except Exception as error:  # noqa: BLE001
                rotten.append(f"slot {name}{template!r}: {type(error).__name__}: {error}")
    assert not rotten, "\n".join(rotten)


def entry_of(description):
    return " ".join(description.split(" ", 3)[1:3]).split("(")[0]


def sweep(group, max_crashes):
    """Runs a group in child processes; after a crash, resumes at the next
    entry point (one crash per entry point is enough to name it)."""
    descriptions = ([name for name, _ in export_cases()] if group == "exports"
                    else [str(case) for case in group_cases(group)])
    crashes, failures, cases, start = [], [], 0, 0
    with tempfile.TemporaryDirectory() as directory:
        log_path = os.path.join(directory, "cases.log")
        while start < len(descriptions):
            returncode, output, last = ep.run_child(
                os.path.abspath(__file__), ["--group", group, "--start", str(start)],
                log_path, timeout=900, failures=failures)
            if last is not None:
                cases += int(last.split(" ", 1)[0]) + 1 - start
            report = ep.child_report(output)
            if returncode == 0 and report is not None:
                break
            crashes.append(f"{last} -> exit {returncode}\n{output[-1500:]}")
            if last is None or len(crashes) >= max_crashes:
                break
            crashed = int(last.split(" ", 1)[0])
            entry = entry_of(descriptions[crashed])
            start = crashed + 1
            while start < len(descriptions) and entry_of(descriptions[start]) == entry:
                start += 1
    return cases, crashes, failures


@pytest.mark.noleakcheck
@pytest.mark.parametrize("group", GROUPS)
def test_reentry_sweep(group):
    max_crashes = int(os.environ.get("EMBER_REENTRY_MAX_CRASHES", "3"))
    cases, crashes, failures = sweep(group, max_crashes)
    message = []
    if crashes:
        message.append(f"{len(crashes)} crash(es) (the case logged last before each):")
        message += crashes
    if failures:
        message.append(f"{len(failures)} misbehaving case(s):")
        message += failures
    assert not message, "\n".join(message)
    assert cases > 0


if __name__ == "__main__":
    sys.exit(main())
