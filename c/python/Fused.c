/*
 * Fused.c -- ember._C.FusedKernel: a fused elementwise program (the core
 * is c/th/THFused.c; Note [Blocked interpretation] in THFused.h).
 *
 *     k = FusedKernel(2, [("const", 2, 2.0), ("mul", 3, 2, 0),
 *                         ("add", 4, 3, 1)], [4])
 *     (y,) = k(a, b)          # y = 2 * a + b, one pass over memory
 *
 * Calling a kernel is a vectorcall: kernel(*inputs) returns a tuple of new
 * tensors, or None when the guard fails (the caller then runs the unfused
 * code, which raises whatever error eager raises).  A C caller (the jit
 * VM) calls it with PyObject_Vectorcall(kernel, args, nargs, NULL).
 */
#include "THP.h"

#include "THFused.h"

typedef struct {
    PyObject_HEAD
    THFusedProgram *program; /* owned */
    PyObject *name;          /* owned str */
    vectorcallfunc vectorcall;
} THPFusedKernel;

static PyTypeObject THPFusedKernelType;

/* ---- parsing a program ------------------------------------------------------ */

/* A register number: a Python int in [0, TH_FUSED_MAX_REGISTERS) (the
 * core checks the range too; checking here also covers ints beyond C's). */
static int
parse_register(PyObject *obj, int index, const char *what, int *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: %s register must be an int, not %.100s",
                     index, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow != 0 || value < 0 || value >= TH_FUSED_MAX_REGISTERS) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: %s register %R is out of range "
                     "(0 to %d)",
                     index, what, obj, TH_FUSED_MAX_REGISTERS - 1);
        return -1;
    }
    *out = (int)value;
    return 0;
}

/* A Python bool, int or float (the values of constants and number inputs).
 * Returns 1 and sets *out, 0 when obj is none of them (or an int beyond
 * int64), -1 on error. */
static int
parse_number(PyObject *obj, THScalar *out)
{
    if (PyBool_Check(obj)) {
        *out = THScalar_fromBool(obj == Py_True);
        return 1;
    }
    if (PyLong_Check(obj)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (value == -1 && PyErr_Occurred()) {
            return -1;
        }
        *out = THScalar_fromInt(value);
        return overflow == 0;
    }
    if (PyFloat_Check(obj)) {
        *out = THScalar_fromDouble(PyFloat_AS_DOUBLE(obj));
        return 1;
    }
    return 0;
}

static int
parse_const(PyObject *const *items, Py_ssize_t n, int index,
            THFusedInstruction *ins)
{
    if (n != 3) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: const takes (\"const\", dst, value), "
                     "got %zd items",
                     index, n);
        return -1;
    }
    int status = parse_number(items[2], &ins->value);
    if (status == 0) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: a constant must be a Python int "
                     "(within int64), float or bool, not %R",
                     index, items[2]);
    }
    return status > 0 ? parse_register(items[1], index, "destination",
                                       &ins->dst)
                      : -1;
}

/* One instruction tuple: (opname, dst, src...) or ("const", dst, value). */
static int
parse_instruction(PyObject *obj, int index, THFusedInstruction *ins)
{
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) < 2
        || !PyUnicode_Check(PyTuple_GET_ITEM(obj, 0))) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d must be a tuple (opname, dst, ...), "
                     "not %R",
                     index, obj);
        return -1;
    }
    PyObject *const *items = &PyTuple_GET_ITEM(obj, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    const char *name = PyUnicode_AsUTF8(items[0]);
    if (name == NULL) {
        return -1;
    }
    int op = THFused_opFromName(name);
    if (op < 0) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: unknown op '%s' (FusedKernel.ops "
                     "lists the ops)",
                     index, name);
        return -1;
    }
    ins->op = (THFusedOp)op;
    if (op == TH_FUSED_CONST) {
        return parse_const(items, n, index, ins);
    }
    int arity = THFused_arity(ins->op);
    if (n != 2 + arity) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %d: %s takes %d operand%s, got %zd", index,
                     name, arity, arity == 1 ? "" : "s", n - 2);
        return -1;
    }
    if (parse_register(items[1], index, "destination", &ins->dst) < 0) {
        return -1;
    }
    for (int s = 0; s < arity; s++) {
        if (parse_register(items[2 + s], index, "source", &ins->src[s]) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
parse_outputs(PyObject *obj, int *outputs, int *noutputs)
{
    PyObject *seq = PySequence_Fast(obj, "outputs must be a list of registers");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int status = 0;
    if (n < 1 || n > TH_FUSED_MAX_OUTPUTS) {
        PyErr_Format(PyExc_ValueError,
                     "a fused kernel has 1 to %d outputs, not %zd",
                     TH_FUSED_MAX_OUTPUTS, n);
        status = -1;
    }
    for (Py_ssize_t k = 0; status == 0 && k < n; k++) {
        status = parse_register(PySequence_Fast_GET_ITEM(seq, k), (int)k,
                                "output", &outputs[k]);
    }
    *noutputs = (int)n;
    Py_DECREF(seq);
    return status;
}

/* The program from the constructor's arguments; NULL with ValueError. */
static THFusedProgram *
parse_program(int ninputs, PyObject *instructions, PyObject *outputs_obj)
{
    PyObject *seq = PySequence_Fast(instructions,
                                    "instructions must be a list of tuples");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    THFusedInstruction *code = NULL;
    THFusedProgram *program = NULL;
    int outputs[TH_FUSED_MAX_OUTPUTS], noutputs = 0;
    if (n > TH_FUSED_MAX_REGISTERS) {
        PyErr_Format(PyExc_ValueError,
                     "a fused kernel has at most %d instructions, not %zd",
                     TH_FUSED_MAX_REGISTERS, n);
        goto done;
    }
    code = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(*code));
    if (code == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_instruction(PySequence_Fast_GET_ITEM(seq, i), (int)i,
                              &code[i])
            < 0) {
            goto done;
        }
    }
    if (parse_outputs(outputs_obj, outputs, &noutputs) < 0) {
        goto done;
    }
    program = THFusedProgram_new(ninputs, (int)n, code, noutputs, outputs);
    if (program == NULL) {
        THPUtils_setErrorFromTH();
    }
done:
    PyMem_Free(code);
    Py_DECREF(seq);
    return program;
}

/* ---- calling ------------------------------------------------------------------ */

/* Reads the call's arguments.  1: all are tensors or numbers; 0: the
 * guard fails (another type, a number beyond int64, or a tensor that
 * requires grad under grad mode); -1: error.  Runs no Python code (exact
 * checks, no __index__ or __float__), so the tensors it reads are still
 * the arguments' when it returns; the caller retains them (release_inputs
 * undoes that). */
static int
parse_inputs(PyObject *const *args, int ninputs, THPointwiseArg *out)
{
    for (int i = 0; i < ninputs; i++) {
        PyObject *obj = args[i];
        if (THPVariable_Check(obj)) {
            if (THPAutograd_gradEnabled
                && ((THPVariable *)obj)->requires_grad) {
                return 0;
            }
            out[i].tensor = THPVariable_Unpack(obj);
            continue;
        }
        out[i].tensor = NULL;
        int status = parse_number(obj, &out[i].number);
        if (status <= 0) {
            return status;
        }
    }
    return 1;
}

/* Note [A fused kernel owns its inputs]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A large kernel runs without the GIL, and another thread may then run
 * `a.data = ...` on an input, which releases the THTensor the plan reads
 * (and with it the storage).  So the call retains each input tensor
 * before it prepares the plan and releases it after the outputs are
 * wrapped: the memory the plan points into lives as long as the call. */
static void
retain_inputs(THPointwiseArg *inputs, int n)
{
    for (int i = 0; i < n; i++) {
        if (inputs[i].tensor != NULL) {
            THTensor_retain(inputs[i].tensor);
        }
    }
}

static void
release_inputs(THPointwiseArg *inputs, int n)
{
    for (int i = 0; i < n; i++) {
        THTensor_release(inputs[i].tensor); /* NULL: a number, a no-op */
    }
}

/* A tuple of the tensors, wrapped; steals every reference in outputs. */
static PyObject *
wrap_outputs(THTensor **outputs, int n)
{
    PyObject *tuple = PyTuple_New(n);
    for (int k = 0; k < n; k++) {
        if (tuple == NULL) {
            THTensor_release(outputs[k]);
            continue;
        }
        PyObject *wrapped = THPVariable_Wrap(outputs[k]); /* steals */
        if (wrapped == NULL) {
            Py_CLEAR(tuple); /* and release the rest above */
            continue;
        }
        PyTuple_SET_ITEM(tuple, k, wrapped);
    }
    return tuple;
}

/* Prepares, runs and wraps one call over owned inputs (Note [A fused
 * kernel owns its inputs]); None when the guard fails. */
static PyObject *
run_kernel(const THFusedProgram *program, THPointwiseArg *inputs)
{
    THFusedPlan plan;
    int status = THFused_prepare(&plan, program, inputs);
    if (status != 0) {
        return status < 0 ? THPUtils_setErrorFromTH() : Py_NewRef(Py_None);
    }
    THP_RUN_WITHOUT_GIL_IF(plan.numel >= TH_PARALLEL_GRAIN,
                           THFused_execute(&plan));
    THTensor *outputs[TH_FUSED_MAX_OUTPUTS];
    THFused_finish(&plan, outputs);
    return wrap_outputs(outputs, program->noutputs);
}

static PyObject *
fused_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                 PyObject *kwnames)
{
    THPFusedKernel *kernel = (THPFusedKernel *)self;
    const THFusedProgram *program = kernel->program;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "%U() takes no keyword arguments",
                     kernel->name);
        return NULL;
    }
    if (nargs != program->ninputs) {
        PyErr_Format(PyExc_TypeError, "%U() takes %d arguments (%zd given)",
                     kernel->name, program->ninputs, nargs);
        return NULL;
    }
    /* A pin frame, as for every entry point (Note [Pinned arguments] in
     * THP.h): parsing a number input can run Python. */
    THPPinFrame frame;
    THPPin_enter(&frame);
    PyObject *result = NULL;
    THPointwiseArg inputs[TH_FUSED_MAX_INPUTS];
    int placement = THPPin_objects(&frame, args, nargs);
    if (placement == 1) {
        /* A fused group on device tensors: the device's launcher gets the
         * kernel object itself (its program is its recipe). */
        PyObject *result = THPDevice_launch(kernel->name, (PyObject *)kernel,
                                            args, nargs, NULL);
        THPPin_exit(&frame);
        return result;
    }
    int status = placement < 0 ? -1
                               : parse_inputs(args, program->ninputs, inputs);
    if (status > 0) {
        retain_inputs(inputs, program->ninputs);
        result = run_kernel(program, inputs);
        release_inputs(inputs, program->ninputs);
    }
    else if (status == 0) {
        result = Py_NewRef(Py_None);
    }
    THPPin_exit(&frame);
    return result;
}

/* ---- the type ------------------------------------------------------------------ */

static PyObject *
fused_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"ninputs", "instructions", "outputs", "name",
                               NULL};
    int ninputs;
    PyObject *instructions, *outputs, *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|U:FusedKernel",
                                     keywords, &ninputs, &instructions,
                                     &outputs, &name)) {
        return NULL;
    }
    THFusedProgram *program = parse_program(ninputs, instructions, outputs);
    if (program == NULL) {
        return NULL;
    }
    THPFusedKernel *self = (THPFusedKernel *)type->tp_alloc(type, 0);
    if (self == NULL) {
        THFusedProgram_free(program);
        return NULL;
    }
    self->program = program;
    self->name = name != NULL ? Py_NewRef(name)
                              : PyUnicode_InternFromString("fused");
    self->vectorcall = fused_vectorcall;
    if (self->name == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void
fused_dealloc(PyObject *obj)
{
    THPFusedKernel *self = (THPFusedKernel *)obj;
    THFusedProgram_free(self->program);
    Py_XDECREF(self->name);
    Py_TYPE(obj)->tp_free(obj);
}

/* "2.0", "3", "True": a constant as Python writes it. */
static PyObject *
format_value(THScalar value)
{
    if (value.dtype == TH_Bool) {
        return PyUnicode_FromString(value.value.b ? "True" : "False");
    }
    if (value.dtype == TH_Int64) {
        return PyUnicode_FromFormat("%lld", (long long)value.value.i);
    }
    char *text = PyOS_double_to_string(value.value.d, 'r', 0,
                                       Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        return NULL;
    }
    PyObject *result = PyUnicode_FromString(text);
    PyMem_Free(text);
    return result;
}

/* "r3 = mul r2, r0" */
static PyObject *
format_instruction(const THFusedInstruction *ins)
{
    if (ins->op == TH_FUSED_CONST) {
        PyObject *value = format_value(ins->value);
        PyObject *line = value == NULL ? NULL
                                       : PyUnicode_FromFormat("  r%d = const %U",
                                                              ins->dst, value);
        Py_XDECREF(value);
        return line;
    }
    const char *name = THFused_opName(ins->op);
    switch (THFused_arity(ins->op)) {
    case 1:
        return PyUnicode_FromFormat("  r%d = %s r%d", ins->dst, name,
                                    ins->src[0]);
    case 2:
        return PyUnicode_FromFormat("  r%d = %s r%d, r%d", ins->dst, name,
                                    ins->src[0], ins->src[1]);
    default:
        return PyUnicode_FromFormat("  r%d = %s r%d, r%d, r%d", ins->dst,
                                    name, ins->src[0], ins->src[1],
                                    ins->src[2]);
    }
}

/* "r0, r1" for registers [0, n) or the given list. */
static PyObject *
format_registers(int n, const int *regs)
{
    PyObject *parts = PyList_New(0);
    for (int k = 0; parts != NULL && k < n; k++) {
        PyObject *part = PyUnicode_FromFormat("r%d", regs ? regs[k] : k);
        if (part == NULL || PyList_Append(parts, part) < 0) {
            Py_CLEAR(parts);
        }
        Py_XDECREF(part);
    }
    if (parts == NULL) {
        return NULL;
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *joined = sep == NULL ? NULL : PyUnicode_Join(sep, parts);
    Py_XDECREF(sep);
    Py_DECREF(parts);
    return joined;
}

/* Appends `line` (stolen; NULL after a failed format) to `lines`. */
static int
append_line(PyObject *lines, PyObject *line)
{
    if (line == NULL) {
        return -1;
    }
    int status = PyList_Append(lines, line);
    Py_DECREF(line);
    return status;
}

/* "name(r0, r1) -> (r7)" */
static PyObject *
format_header(const THPFusedKernel *self)
{
    const THFusedProgram *p = self->program;
    PyObject *ins = format_registers(p->ninputs, NULL);
    PyObject *outs = format_registers(p->noutputs, p->outputs);
    PyObject *header = ins == NULL || outs == NULL
                           ? NULL
                           : PyUnicode_FromFormat("%U(%U) -> (%U)",
                                                  self->name, ins, outs);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    return header;
}

/* The listing: the header, then one line per instruction. */
static PyObject *
fused_get_program(PyObject *obj, void *closure)
{
    (void)closure;
    THPFusedKernel *self = (THPFusedKernel *)obj;
    const THFusedProgram *p = self->program;
    PyObject *lines = PyList_New(0);
    if (lines == NULL || append_line(lines, format_header(self)) < 0) {
        Py_XDECREF(lines);
        return NULL;
    }
    for (int i = 0; i < p->ninstructions; i++) {
        if (append_line(lines, format_instruction(&p->code[i])) < 0) {
            Py_DECREF(lines);
            return NULL;
        }
    }
    PyObject *sep = PyUnicode_FromString("\n");
    PyObject *text = sep == NULL ? NULL : PyUnicode_Join(sep, lines);
    Py_XDECREF(sep);
    Py_DECREF(lines);
    return text;
}

/* The constructor's data back: (ninputs, instructions, outputs), each
 * instruction ("const", dst, value) or (op, dst, src...): what a device's
 * launcher compiles (ember/cuda/_fused.py). */
static PyObject *
instruction_tuple(const THFusedInstruction *ins)
{
    if (ins->op == TH_FUSED_CONST) {
        PyObject *value = ins->value.dtype == TH_Bool
                              ? PyBool_FromLong(ins->value.value.b)
                          : ins->value.dtype == TH_Int64
                              ? PyLong_FromLongLong(ins->value.value.i)
                              : PyFloat_FromDouble(ins->value.value.d);
        return value == NULL ? NULL : Py_BuildValue("(siN)", "const", ins->dst, value);
    }
    const char *name = THFused_opName(ins->op);
    switch (THFused_arity(ins->op)) {
    case 1: return Py_BuildValue("(sii)", name, ins->dst, ins->src[0]);
    case 2:
        return Py_BuildValue("(siii)", name, ins->dst, ins->src[0], ins->src[1]);
    default:
        return Py_BuildValue("(siiii)", name, ins->dst, ins->src[0], ins->src[1],
                             ins->src[2]);
    }
}

static PyObject *
fused_get_spec(PyObject *obj, void *closure)
{
    (void)closure;
    const THFusedProgram *p = ((THPFusedKernel *)obj)->program;
    PyObject *instructions = PyTuple_New(p->ninstructions);
    PyObject *outputs = PyTuple_New(p->noutputs);
    if (instructions == NULL || outputs == NULL) {
        Py_XDECREF(instructions);
        Py_XDECREF(outputs);
        return NULL;
    }
    for (int k = 0; k < p->noutputs; k++) {
        PyObject *reg = PyLong_FromLong(p->outputs[k]);
        if (reg == NULL) {
            Py_DECREF(instructions);
            Py_DECREF(outputs);
            return NULL;
        }
        PyTuple_SET_ITEM(outputs, k, reg);
    }
    for (int i = 0; i < p->ninstructions; i++) {
        PyObject *ins = instruction_tuple(&p->code[i]);
        if (ins == NULL) {
            Py_DECREF(instructions);
            Py_DECREF(outputs);
            return NULL;
        }
        PyTuple_SET_ITEM(instructions, i, ins);
    }
    return Py_BuildValue("(iNN)", p->ninputs, instructions, outputs);
}

static PyObject *
fused_repr(PyObject *obj)
{
    return fused_get_program(obj, NULL);
}

static PyObject *
fused_get_ninputs(PyObject *obj, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((THPFusedKernel *)obj)->program->ninputs);
}

static PyObject *
fused_get_noutputs(PyObject *obj, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((THPFusedKernel *)obj)->program->noutputs);
}

static PyObject *
fused_get_name(PyObject *obj, void *closure)
{
    (void)closure;
    return Py_NewRef(((THPFusedKernel *)obj)->name);
}

static PyGetSetDef fused_getset[] = {
    {"program", fused_get_program, NULL, "The program, one line per "
                                         "instruction.", NULL},
    {"spec", fused_get_spec, NULL, "(ninputs, instructions, outputs): the "
                                   "constructor's arguments, as tuples.", NULL},
    {"ninputs", fused_get_ninputs, NULL, "How many inputs a call takes.",
     NULL},
    {"noutputs", fused_get_noutputs, NULL, "How many tensors a call "
                                           "returns.", NULL},
    {"name", fused_get_name, NULL, "The kernel's name.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject THPFusedKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C.FusedKernel",
    .tp_basicsize = sizeof(THPFusedKernel),
    .tp_dealloc = fused_dealloc,
    .tp_vectorcall_offset = offsetof(THPFusedKernel, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = fused_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "FusedKernel(ninputs, instructions, outputs, name='fused')\n"
              "\n"
              "A fused elementwise program; calling it with the inputs "
              "returns a tuple of new tensors, or None when the inputs do "
              "not fit (mixed or non-float dtypes, requires_grad, shapes).",
    .tp_getset = fused_getset,
    .tp_new = fused_new,
};

/* ---- module functions ------------------------------------------------------------ */

/* {opname: arity} of the ops a program may use. */
static PyObject *
fused_ops_dict(void)
{
    PyObject *ops = PyDict_New();
    for (int op = 0; ops != NULL && op < TH_NUM_FUSED_OPS; op++) {
        PyObject *arity = PyLong_FromLong(THFused_arity((THFusedOp)op));
        if (arity == NULL
            || PyDict_SetItemString(ops, THFused_opName((THFusedOp)op), arity)
                   < 0) {
            Py_CLEAR(ops);
        }
        Py_XDECREF(arity);
    }
    return ops;
}

static PyObject *
THPFused_ops(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return fused_ops_dict();
}

/* _fused_isa() -> "avx2" or "baseline"; _fused_isa(name) switches (tests). */
static PyObject *
THPFused_isa(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs > 1 || (nargs == 1 && !PyUnicode_Check(args[0]))) {
        PyErr_SetString(PyExc_TypeError, "_fused_isa([name: str])");
        return NULL;
    }
    const char *previous = THFused_isa();
    if (nargs == 1) {
        const char *name = PyUnicode_AsUTF8(args[0]);
        if (name == NULL) {
            return NULL;
        }
        if (THFused_setIsa(name) < 0) {
            return THPUtils_setErrorFromTH();
        }
    }
    return PyUnicode_FromString(previous);
}

static PyMethodDef fused_methods[] = {
    {"_fused_ops", THPFused_ops, METH_NOARGS,
     "{opname: arity} of the ops a FusedKernel program may use."},
    {"_fused_isa", (PyCFunction)(void (*)(void))THPFused_isa, METH_FASTCALL,
     "The fused loops in use ('avx2' or 'baseline'); with a name, switches "
     "to it and returns the previous one."},
    {NULL, NULL, 0, NULL},
};

int
THPFused_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPFusedKernelType) < 0) {
        return -1;
    }
    PyObject *ops = fused_ops_dict();
    if (ops == NULL) {
        return -1;
    }
    /* FusedKernel.ops: a class attribute (set after PyType_Ready). */
    int status = PyDict_SetItemString(THPFusedKernelType.tp_dict, "ops", ops);
    Py_DECREF(ops);
    if (status < 0) {
        return -1;
    }
    PyType_Modified(&THPFusedKernelType);
    if (PyModule_AddObjectRef(module, "FusedKernel",
                              (PyObject *)&THPFusedKernelType)
        < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, fused_methods);
}
