"""The jit's fusion groups as CUDA kernels: one launch, one pass over memory.

A prim::FusionGroup lowers to an ember._C.FusedKernel whose program is a
list of register instructions, ("const", dst, value) and (op, dst, srcs...)
(ember/jit/passes/fusion.py:kernel_program).  On the CPU the C core
interprets it a block at a time (c/th/THFused.c); on CUDA tensors the C
core hands the kernel object to the launcher, and this module writes the
program out as one CUDA kernel: each register a local variable, each op the
formula the CPU's operator expands (THPointwiseFormulas.h's EXPR_<OP> for
arithmetic, comparisons and clamp, THFloatFormulas.h's expression for the
floating-point unary ops), each output one store.

    source = cuda_source(kernel.program_spec, "float32", (True, True))

Only the dense case is fused here: every tensor input of the call's dtype,
contiguous and of one shape (numbers pass by value).  Anything else
(broadcasting, strides, mixed dtypes, autograd) makes the launcher return
None, and the jit runs the group's unfused fallback, one kernel per op.
"""

import functools
import hashlib

from . import _kernels, _pointwise

__all__ = ["kernel_name", "cuda_source", "kernel_parameters", "headers"]


def _digest(program, dtype, is_tensor):
    return hashlib.sha256(repr((program, dtype, is_tensor)).encode()).hexdigest()[:16]


def kernel_name(program, dtype, is_tensor):
    return f"ember_fused_{dtype}_{_digest(program, dtype, is_tensor)}"


def _formula_namespaces(ops, ctype, name_tag):
    """One namespace per op the program uses, with its formula function."""
    parts = []
    for op in sorted(ops):
        if op in _pointwise.ops():
            arity = _pointwise.ops()[op].arity
            params = ", ".join(f"scalar_t a{k}" for k in range(arity))
            args = ", ".join([f"a{k}" for k in range(arity)] + ([] if arity == 1 else ["P"]))
            body = f"EXPR_{op.upper()}({name_tag}, {ctype}, {args})"
            signature = f"formula({params}, scalar_t P)"
        else:
            body = _kernels.float_formulas()[op]
            signature = "formula(scalar_t x, const THUnaryParams *p)"
        parts.append(f"namespace fused_{op} {{\n"
                     f"typedef {ctype} scalar_t;\n"
                     f"TH_FORMULA_FN scalar_t\n"
                     f"{signature}\n"
                     f"{{\n"
                     f"    return (scalar_t)({body});\n"
                     f"}}\n"
                     f"}}\n")
    return "\n".join(parts)


def _statement(instruction, ctype):
    op, dst, *sources = instruction
    if op == "const":
        return f"const {ctype} r{dst} = ({ctype})({float(sources[0])!r});"
    registers = ", ".join(f"r{s}" for s in sources)
    if op in _pointwise.ops():
        return f"const {ctype} r{dst} = fused_{op}::formula({registers}, ({ctype})1);"
    return f"const {ctype} r{dst} = fused_{op}::formula({registers}, &params);"


@functools.cache
def cuda_source(program, dtype, is_tensor):
    """The kernel of a FusedKernel program (ninputs, instructions, outputs)
    for inputs of `dtype`; is_tensor[k]: input k is a tensor (else a number
    passed by value)."""
    ninputs, instructions, outputs = program
    ctype = _pointwise.DTYPES[dtype][1]
    name_tag = _pointwise.DTYPES[dtype][0]
    name = kernel_name(program, dtype, is_tensor)
    ops = {op for op, *_ in instructions if op != "const"}
    unknown = ops - set(_pointwise.ops()) - set(_kernels.float_formulas())
    if unknown:
        raise ValueError(f"no CUDA formula for {sorted(unknown)}")
    params = "".join(f", {ctype} *out{k}" for k in range(len(outputs)))
    params += "".join(f", EmberInput<{ctype}> in{k}" for k in range(ninputs))
    loads = "\n".join(f"        const {ctype} r{k} = in{k}.at(i);" for k in range(ninputs))
    body = "\n".join(f"        {_statement(i, ctype)}" for i in instructions)
    stores = "\n".join(f"        out{k}[i] = r{r};" for k, r in enumerate(outputs))
    return (f'#include "{_pointwise.PRELUDE_NAME}"\n\n'
            f"{_formula_namespaces(ops, ctype, name_tag)}\n"
            f'extern "C" __global__ void\n'
            f"{name}({params[2:]}, int64_t n)\n"
            f"{{\n"
            f"    const THUnaryParams params = {{}};\n"
            f"    (void)params;\n"
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"{loads}\n{body}\n{stores}\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(program, dtype, is_tensor):
    ninputs, _, outputs = program
    ctype = _pointwise.DTYPES[dtype][1]
    return ([(f"{ctype} *", f"out{k}") for k in range(len(outputs))]
            + [(f"EmberInput<{ctype}>", f"in{k}") for k in range(ninputs)]
            + [("int64_t", "n")])


def headers():
    return _pointwise.headers()
