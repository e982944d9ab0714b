/*
 * JitVM.c -- ember._C.Code: ember.jit's register bytecode and the virtual
 * machine that runs it (JIT_SPEC.md section B; python/ember/jit/bytecode.py
 * builds, lists, verifies and re-implements it in Python).
 *
 * Note [The register VM]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * A Code object is immutable and shared by every call.  Each call gets its
 * own array of `nregs` registers (PyObject *; NULL = empty), r[0..nargs)
 * holding the arguments, and runs from instruction 0 until RETURN.
 *
 * An instruction is four int32 words [op, a, b, c]; what each word means is
 * the opcode's row of THP_JIT_FORALL_OPCODES.  Register lists (call
 * arguments, UNPACK targets, FUSED inputs and outputs, RETURN values) live
 * in the separate `operands` array, addressed by an offset word and a count
 * (a word of the instruction, or the callsite's/kernel's arity).
 *
 * The constructor validates every word, so the loop indexes the constant,
 * callsite, kernel, register and operand tables without bounds checks.  The
 * checks left at run time are the ones only the data can decide: an empty
 * register, a condition that is not a bool, an unpack of the wrong length.
 * A sentinel END instruction after the last one turns falling off the end
 * (or jumping to ninstructions) into a RuntimeError without a pc check in
 * the loop.
 *
 * Ownership: every non-NULL register holds one strong reference.  A store
 * puts the new value in place before releasing the old one, since the new
 * value may be computed from the old (CALL r0 <- add(r0, r1)).  Call
 * arguments are borrowed straight from the registers: the callee cannot
 * reach this call's registers, so they stay alive during the call.
 */
#include "THP.h"

#include <limits.h>
#include <string.h>

/* ---- the instruction set ----------------------------------------------------
 *
 * THP_JIT_FORALL_OPCODES(_) is the one list of opcodes: _(NAME, a, b, c)
 * with the kind of each operand word (THP_JIT_FORALL_OPERAND_KINDS).  The
 * number of an opcode is its position; _C._jit_opcodes() publishes the
 * numbers and _C._jit_operand_kinds() the kinds, and bytecode.py reads both.
 */
#define THP_JIT_FORALL_OPCODES(_)                                        \
    _(LOAD_CONST, REG, CONST, UNUSED)          /* r[a] = constants[b] */ \
    _(MOVE, REG, REG, UNUSED)                  /* r[a] = r[b] */         \
    _(CALL, REG_OR_NONE, CALLSITE, OFFSET)     /* r[a] = site(*ops) */   \
    _(UNPACK, OFFSET, REG, COUNT)              /* ops[a:a+c] = *r[b] */  \
    _(JUMP, TARGET, UNUSED, UNUSED)            /* pc = a */              \
    _(JUMP_IF_FALSE, REG, TARGET, UNUSED)      /* if not r[a]: pc = b */ \
    _(JUMP_IF_TRUE, REG, TARGET, UNUSED)       /* if r[a]: pc = b */     \
    _(LOOP_TEST, REG, REG, TARGET)             /* r[a] >= r[b]: pc = c */\
    _(INC, REG, UNUSED, UNUSED)                /* r[a] += 1 */           \
    _(FUSED, FUSED_KERNEL, OFFSET, TARGET)     /* guard fails: pc = c */ \
    _(DROP, REG, UNUSED, UNUSED)               /* r[a] = empty */        \
    _(RETURN, OFFSET, COUNT, UNUSED)           /* return ops[a:a+b] */   \
    _(RAISE, RAISE_KIND, REG_OR_NONE, UNUSED)  /* raise kind(r[b]) */

/* What an operand word may hold (checked by the constructor). */
#define THP_JIT_FORALL_OPERAND_KINDS(_)                                   \
    _(UNUSED, "unused")             /* must be 0 */                       \
    _(REG, "reg")                   /* a register: [0, nregs) */          \
    _(REG_OR_NONE, "reg_or_none")   /* -1 or a register */                \
    _(CONST, "const")               /* [0, len(constants)) */             \
    _(CALLSITE, "callsite")         /* [0, len(callsites)) */             \
    _(FUSED_KERNEL, "fused")        /* [0, len(fused)) */                 \
    _(OFFSET, "offset")             /* start of a span of operands */     \
    _(COUNT, "count")               /* length of a span: >= 0 */          \
    _(TARGET, "target")             /* instruction index: [0, n] */       \
    _(RAISE_KIND, "raise_kind")     /* [0, number of raise kinds) */

/* The exception classes RAISE can raise, by kind number. */
#define THP_JIT_FORALL_RAISE_KINDS(_) \
    _(AssertionError)                 \
    _(RuntimeError)                   \
    _(ValueError)                     \
    _(TypeError)                      \
    _(IndexError)                     \
    _(KeyError)                       \
    _(NotImplementedError)            \
    _(ZeroDivisionError)              \
    _(Exception)

typedef enum {
#define THP_JIT_OPCODE_ENUM(name, a, b, c) THP_JIT_##name,
    THP_JIT_FORALL_OPCODES(THP_JIT_OPCODE_ENUM)
#undef THP_JIT_OPCODE_ENUM
    THP_JIT_NUM_OPCODES,
    /* Internal: the sentinel after the last instruction (never valid input). */
    THP_JIT_END = THP_JIT_NUM_OPCODES,
} THPJitOpcode;

typedef enum {
#define THP_JIT_KIND_ENUM(kind, pyname) THP_JIT_KIND_##kind,
    THP_JIT_FORALL_OPERAND_KINDS(THP_JIT_KIND_ENUM)
#undef THP_JIT_KIND_ENUM
} THPJitOperandKind;

static const char *const opcode_names[] = {
#define THP_JIT_OPCODE_NAME(name, a, b, c) #name,
    THP_JIT_FORALL_OPCODES(THP_JIT_OPCODE_NAME)
#undef THP_JIT_OPCODE_NAME
    "END",
};

static const THPJitOperandKind opcode_operand_kinds[][3] = {
#define THP_JIT_OPCODE_KINDS(name, a, b, c) \
    {THP_JIT_KIND_##a, THP_JIT_KIND_##b, THP_JIT_KIND_##c},
    THP_JIT_FORALL_OPCODES(THP_JIT_OPCODE_KINDS)
#undef THP_JIT_OPCODE_KINDS
};

static const char *const operand_kind_names[] = {
#define THP_JIT_KIND_NAME(kind, pyname) pyname,
    THP_JIT_FORALL_OPERAND_KINDS(THP_JIT_KIND_NAME)
#undef THP_JIT_KIND_NAME
};

static PyObject **
raise_kind_type(int kind)
{
    static PyObject **const types[] = {
#define THP_JIT_RAISE_TYPE(exc) &PyExc_##exc,
        THP_JIT_FORALL_RAISE_KINDS(THP_JIT_RAISE_TYPE)
#undef THP_JIT_RAISE_TYPE
    };
    return types[kind];
}

#define THP_JIT_RAISE_COUNT(exc) +1
enum { THP_JIT_NUM_RAISE_KINDS = 0 THP_JIT_FORALL_RAISE_KINDS(THP_JIT_RAISE_COUNT) };
#undef THP_JIT_RAISE_COUNT

/* Limits: registers per call, and the size of the arrays kept on the C
 * stack (larger register files and argument lists go to the heap). */
#define THP_JIT_MAX_REGS 65536
#define THP_JIT_SMALL_REGS 32
#define THP_JIT_SMALL_ARGS 12

/* ---- the Code object ------------------------------------------------------- */

typedef struct {
    int32_t op, a, b, c;
} THPJitInstruction;

/* A parsed callsite; the references are borrowed from Code.callsites. */
typedef struct {
    PyObject *callable;
    Py_ssize_t nargs;       /* positional + keyword */
    Py_ssize_t npositional;
    PyObject *kwnames;      /* tuple of str, or NULL */
} THPJitCallsite;

/* A parsed FUSED kernel; the reference is borrowed from Code.fused. */
typedef struct {
    PyObject *kernel;
    Py_ssize_t ninputs;
    Py_ssize_t noutputs;
} THPJitKernel;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    THPJitInstruction *instructions; /* ninstructions + 1 (the END) */
    Py_ssize_t ninstructions;
    int32_t *operands;
    Py_ssize_t noperands;
    int32_t *lines;                  /* ninstructions + 1 (0 = unknown) */
    int has_lines;                   /* whether `lines` was given */
    int nregs;
    int nargs;
    PyObject *constants;             /* tuple; NULL once cleared by the GC */
    PyObject *callsites;             /* tuple of (callable, nargs, kwnames) */
    PyObject *fused;                 /* tuple of kernels */
    PyObject *name;                  /* str */
    THPJitCallsite *sites;
    THPJitKernel *kernels;
} THPJitCode;

/* ---- construction: parse and validate ---------------------------------------
 *
 * Every message starts with "Code 'name': "; bytecode.verify() produces the
 * same text for the same fault, so the two can be compared in tests. */

static PyObject *
code_error(THPJitCode *self, PyObject *type, const char *format, ...)
{
    va_list vargs;
    va_start(vargs, format);
    PyObject *detail = PyUnicode_FromFormatV(format, vargs);
    va_end(vargs);
    if (detail != NULL) {
        PyErr_Format(type, "Code '%U': %U", self->name, detail);
        Py_DECREF(detail);
    }
    return NULL;
}

/* Copies a bytes object of native int32 words into a new array with room
 * for `extra` zeroed words after them (`words` int32 words are copied). */
static int32_t *
copy_words(PyObject *bytes, Py_ssize_t words, Py_ssize_t extra)
{
    int32_t *array = PyMem_Calloc((size_t)(words + extra), sizeof(int32_t));
    if (array == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (words > 0) {
        memcpy(array, PyBytes_AS_STRING(bytes), (size_t)words * sizeof(int32_t));
    }
    return array;
}

/* Reads a non-negative int that fits an int32: an arity in the tables,
 * named `what` in messages ("callsite 2: nargs ..."). */
static int
read_arity(THPJitCode *self, PyObject *obj, const char *table,
           Py_ssize_t index, const char *what, Py_ssize_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        code_error(self, PyExc_TypeError, "%s %zd: %s must be an int, got '%s'",
                   table, index, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0 || value < 0 || value > INT32_MAX) {
        code_error(self, PyExc_ValueError,
                   "%s %zd: %s %R out of range [0, 2**31)", table, index,
                   what, obj);
        return -1;
    }
    *out = (Py_ssize_t)value;
    return 0;
}

static int
parse_kwnames(THPJitCode *self, Py_ssize_t index, PyObject *kwnames,
              THPJitCallsite *site)
{
    if (kwnames == Py_None) {
        site->kwnames = NULL;
        site->npositional = site->nargs;
        return 0;
    }
    if (!PyTuple_CheckExact(kwnames)) {
        code_error(self, PyExc_TypeError,
                   "callsite %zd: kwnames must be None or a tuple of str, "
                   "got '%s'", index, Py_TYPE(kwnames)->tp_name);
        return -1;
    }
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *kwname = PyTuple_GET_ITEM(kwnames, i);
        if (!PyUnicode_CheckExact(kwname)) {
            code_error(self, PyExc_TypeError,
                       "callsite %zd: kwnames must be None or a tuple of str, "
                       "got an item of type '%s'", index,
                       Py_TYPE(kwname)->tp_name);
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            int same = PyUnicode_Compare(kwname, PyTuple_GET_ITEM(kwnames, j));
            if (same == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (same == 0) {
                code_error(self, PyExc_ValueError,
                           "callsite %zd: duplicate keyword name %R", index,
                           kwname);
                return -1;
            }
        }
    }
    if (nkw > site->nargs) {
        code_error(self, PyExc_ValueError,
                   "callsite %zd: %zd keyword names for %zd arguments", index,
                   nkw, site->nargs);
        return -1;
    }
    /* An empty tuple is passed as NULL: vectorcall's "no keywords". */
    site->kwnames = nkw == 0 ? NULL : kwnames;
    site->npositional = site->nargs - nkw;
    return 0;
}

/* callsites: a tuple of (callable, nargs, kwnames or None). */
static int
parse_callsites(THPJitCode *self)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->callsites);
    self->sites = PyMem_Calloc((size_t)n + 1, sizeof(THPJitCallsite));
    if (self->sites == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyTuple_GET_ITEM(self->callsites, i);
        THPJitCallsite *site = &self->sites[i];
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            code_error(self, PyExc_TypeError,
                       "callsite %zd must be a tuple (callable, nargs, "
                       "kwnames or None), got '%s'", i,
                       Py_TYPE(entry)->tp_name);
            return -1;
        }
        site->callable = PyTuple_GET_ITEM(entry, 0);
        if (!PyCallable_Check(site->callable)) {
            code_error(self, PyExc_TypeError,
                       "callsite %zd: '%s' object is not callable", i,
                       Py_TYPE(site->callable)->tp_name);
            return -1;
        }
        if (read_arity(self, PyTuple_GET_ITEM(entry, 1), "callsite", i,
                       "nargs", &site->nargs) < 0
            || parse_kwnames(self, i, PyTuple_GET_ITEM(entry, 2), site) < 0) {
            return -1;
        }
    }
    return 0;
}

/* One fused entry: a (callable, ninputs, noutputs) tuple, or a callable
 * with int attributes `ninputs` and `noutputs` (a FusedKernel). */
static int
parse_kernel(THPJitCode *self, Py_ssize_t index, PyObject *entry,
             THPJitKernel *kernel)
{
    PyObject *ninputs, *noutputs;
    if (PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 3) {
        kernel->kernel = PyTuple_GET_ITEM(entry, 0);
        ninputs = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
        noutputs = Py_NewRef(PyTuple_GET_ITEM(entry, 2));
    } else {
        kernel->kernel = entry;
        ninputs = PyObject_GetAttrString(entry, "ninputs");
        noutputs = ninputs == NULL
                       ? NULL : PyObject_GetAttrString(entry, "noutputs");
        if (noutputs == NULL) {
            Py_XDECREF(ninputs);
            PyErr_Clear();
            code_error(self, PyExc_TypeError,
                       "fused %zd must be a (callable, ninputs, noutputs) "
                       "tuple or have int attributes ninputs and noutputs, "
                       "got '%s'", index, Py_TYPE(entry)->tp_name);
            return -1;
        }
    }
    int rc = -1;
    if (!PyCallable_Check(kernel->kernel)) {
        code_error(self, PyExc_TypeError,
                   "fused %zd: '%s' object is not callable", index,
                   Py_TYPE(kernel->kernel)->tp_name);
    } else if (read_arity(self, ninputs, "fused", index, "ninputs",
                          &kernel->ninputs) == 0
               && read_arity(self, noutputs, "fused", index, "noutputs",
                             &kernel->noutputs) == 0) {
        rc = 0;
    }
    Py_DECREF(ninputs);
    Py_DECREF(noutputs);
    return rc;
}

static int
parse_kernels(THPJitCode *self)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->fused);
    self->kernels = PyMem_Calloc((size_t)n + 1, sizeof(THPJitKernel));
    if (self->kernels == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_kernel(self, i, PyTuple_GET_ITEM(self->fused, i),
                         &self->kernels[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Checks one operand word against its kind. */
static int
check_operand(THPJitCode *self, Py_ssize_t pc, char which, int32_t value,
              THPJitOperandKind kind)
{
    const char *op = opcode_names[self->instructions[pc].op];
    Py_ssize_t limit;
    const char *what;
    switch (kind) {
    case THP_JIT_KIND_UNUSED:
        if (value == 0) {
            return 0;
        }
        code_error(self, PyExc_ValueError,
                   "instruction %zd (%s): unused operand %c must be 0, got %d",
                   pc, op, which, value);
        return -1;
    case THP_JIT_KIND_REG_OR_NONE:
        if (value == -1) {
            return 0;
        }
        limit = self->nregs, what = "register (or -1)";
        break;
    case THP_JIT_KIND_REG:
        limit = self->nregs, what = "register";
        break;
    case THP_JIT_KIND_CONST:
        limit = PyTuple_GET_SIZE(self->constants), what = "constant index";
        break;
    case THP_JIT_KIND_CALLSITE:
        limit = PyTuple_GET_SIZE(self->callsites), what = "callsite index";
        break;
    case THP_JIT_KIND_FUSED_KERNEL:
        limit = PyTuple_GET_SIZE(self->fused), what = "fused index";
        break;
    case THP_JIT_KIND_OFFSET:
        limit = self->noperands + 1, what = "operand offset";
        break;
    case THP_JIT_KIND_COUNT:
        limit = INT32_MAX, what = "count";
        break;
    case THP_JIT_KIND_TARGET:
        limit = self->ninstructions + 1, what = "jump target";
        break;
    case THP_JIT_KIND_RAISE_KIND:
        limit = THP_JIT_NUM_RAISE_KINDS, what = "raise kind";
        break;
    default:
        limit = 0, what = "operand";
        break;
    }
    if (value >= 0 && value < limit) {
        return 0;
    }
    code_error(self, PyExc_ValueError,
               "instruction %zd (%s): %s %d in operand %c out of range "
               "[0, %zd)", pc, op, what, value, which, limit);
    return -1;
}

/* The register list of an instruction: operands[offset : offset + count]
 * must lie inside the operands array. */
static int
check_span(THPJitCode *self, Py_ssize_t pc, int32_t offset, Py_ssize_t count)
{
    if ((int64_t)offset + (int64_t)count <= (int64_t)self->noperands) {
        return 0;
    }
    code_error(self, PyExc_ValueError,
               "instruction %zd (%s): operands [%d, %lld) run past the end "
               "of operands (%zd words)", pc,
               opcode_names[self->instructions[pc].op], offset,
               (long long)offset + (long long)count, self->noperands);
    return -1;
}

static int
check_instruction(THPJitCode *self, Py_ssize_t pc)
{
    const THPJitInstruction *ins = &self->instructions[pc];
    if (ins->op < 0 || ins->op >= THP_JIT_NUM_OPCODES) {
        code_error(self, PyExc_ValueError, "instruction %zd: unknown opcode %d",
                   pc, ins->op);
        return -1;
    }
    const THPJitOperandKind *kinds = opcode_operand_kinds[ins->op];
    if (check_operand(self, pc, 'a', ins->a, kinds[0]) < 0
        || check_operand(self, pc, 'b', ins->b, kinds[1]) < 0
        || check_operand(self, pc, 'c', ins->c, kinds[2]) < 0) {
        return -1;
    }
    switch (ins->op) {
    case THP_JIT_CALL:
        return check_span(self, pc, ins->c, self->sites[ins->b].nargs);
    case THP_JIT_UNPACK:
        return check_span(self, pc, ins->a, ins->c);
    case THP_JIT_FUSED:
        return check_span(self, pc, ins->b,
                          self->kernels[ins->a].ninputs
                              + self->kernels[ins->a].noutputs);
    case THP_JIT_RETURN:
        return check_span(self, pc, ins->a, ins->b);
    default:
        return 0;
    }
}

static int
check_code(THPJitCode *self)
{
    for (Py_ssize_t i = 0; i < self->noperands; i++) {
        if (self->operands[i] < 0 || self->operands[i] >= self->nregs) {
            code_error(self, PyExc_ValueError,
                       "operand %zd is register %d, out of range [0, %d)", i,
                       self->operands[i], self->nregs);
            return -1;
        }
    }
    for (Py_ssize_t pc = 0; pc < self->ninstructions; pc++) {
        if (check_instruction(self, pc) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Sizes and the three int32 arrays. */
static int
load_arrays(THPJitCode *self, PyObject *code, PyObject *operands,
            PyObject *lines)
{
    if (self->nregs < 0 || self->nregs > THP_JIT_MAX_REGS) {
        code_error(self, PyExc_ValueError,
                   "nregs must be between 0 and %d, got %d", THP_JIT_MAX_REGS,
                   self->nregs);
        return -1;
    }
    if (self->nargs < 0 || self->nargs > self->nregs) {
        code_error(self, PyExc_ValueError,
                   "nargs must be between 0 and nregs (%d), got %d",
                   self->nregs, self->nargs);
        return -1;
    }
    Py_ssize_t code_bytes = PyBytes_GET_SIZE(code);
    if (code_bytes % (Py_ssize_t)sizeof(THPJitInstruction) != 0) {
        code_error(self, PyExc_ValueError,
                   "code has %zd bytes, not a whole number of 16-byte "
                   "instructions", code_bytes);
        return -1;
    }
    Py_ssize_t operand_bytes = PyBytes_GET_SIZE(operands);
    if (operand_bytes % (Py_ssize_t)sizeof(int32_t) != 0) {
        code_error(self, PyExc_ValueError,
                   "operands has %zd bytes, not a whole number of int32 "
                   "words", operand_bytes);
        return -1;
    }
    self->ninstructions = code_bytes / (Py_ssize_t)sizeof(THPJitInstruction);
    self->noperands = operand_bytes / (Py_ssize_t)sizeof(int32_t);
    if (lines != Py_None) {
        if (!PyBytes_Check(lines)) {
            code_error(self, PyExc_TypeError,
                       "lines must be bytes or None, got '%s'",
                       Py_TYPE(lines)->tp_name);
            return -1;
        }
        if (PyBytes_GET_SIZE(lines)
            != self->ninstructions * (Py_ssize_t)sizeof(int32_t)) {
            code_error(self, PyExc_ValueError,
                       "lines has %zd bytes, expected %zd (one int32 per "
                       "instruction)", PyBytes_GET_SIZE(lines),
                       self->ninstructions * (Py_ssize_t)sizeof(int32_t));
            return -1;
        }
        self->has_lines = 1;
    }
    /* The END sentinel: the zeroed words after the last instruction are
     * [0, 0, 0, 0]; its opcode is set below. */
    self->instructions = (THPJitInstruction *)copy_words(
        code, self->ninstructions * 4, 4);
    self->operands = copy_words(operands, self->noperands, 1);
    self->lines = copy_words(lines, self->has_lines ? self->ninstructions : 0,
                             self->has_lines ? 1 : self->ninstructions + 1);
    if (self->instructions == NULL || self->operands == NULL
        || self->lines == NULL) {
        return -1;
    }
    self->instructions[self->ninstructions].op = THP_JIT_END;
    return 0;
}

static PyObject *THPJitCode_vectorcall(PyObject *callable,
                                       PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames);

static PyObject *
THPJitCode_pynew(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"code", "operands", "nregs", "nargs",
                             "constants", "callsites", "fused", "lines",
                             "name", NULL};
    PyObject *code, *operands, *constants, *callsites, *fused, *lines, *name;
    int nregs, nargs;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "SSiiO!O!O!OU:Code", kwlist,
                                     &code, &operands, &nregs, &nargs,
                                     &PyTuple_Type, &constants, &PyTuple_Type,
                                     &callsites, &PyTuple_Type, &fused, &lines,
                                     &name)) {
        return NULL;
    }
    THPJitCode *self = (THPJitCode *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = THPJitCode_vectorcall;
    self->nregs = nregs;
    self->nargs = nargs;
    self->name = Py_NewRef(name);
    self->constants = Py_NewRef(constants);
    self->callsites = Py_NewRef(callsites);
    self->fused = Py_NewRef(fused);
    if (load_arrays(self, code, operands, lines) < 0
        || parse_callsites(self) < 0 || parse_kernels(self) < 0
        || check_code(self) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
THPJitCode_traverse(THPJitCode *self, visitproc visit, void *arg)
{
    Py_VISIT(self->constants);
    Py_VISIT(self->callsites);
    Py_VISIT(self->fused);
    return 0;
}

/* Breaks reference cycles (a callsite whose callable holds this Code).  A
 * cleared Code refuses to run: its tables are gone. */
static int
THPJitCode_clear(THPJitCode *self)
{
    Py_CLEAR(self->constants);
    Py_CLEAR(self->callsites);
    Py_CLEAR(self->fused);
    return 0;
}

static void
THPJitCode_dealloc(THPJitCode *self)
{
    PyObject_GC_UnTrack(self);
    THPJitCode_clear(self);
    Py_CLEAR(self->name);
    PyMem_Free(self->instructions);
    PyMem_Free(self->operands);
    PyMem_Free(self->lines);
    PyMem_Free(self->sites);
    PyMem_Free(self->kernels);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- running ------------------------------------------------------------------ */

/* Puts `value` (a new reference) into register `reg`, then releases what
 * the register held (see Note [The register VM] for the order). */
static inline void
store(PyObject **regs, int32_t reg, PyObject *value)
{
    PyObject *old = regs[reg];
    regs[reg] = value;
    Py_XDECREF(old);
}

static void
empty_register_error(int32_t reg)
{
    PyErr_Format(PyExc_RuntimeError,
                 "register r%d is empty (read before it was written, or "
                 "after DROP)", reg);
}

/* Sets a TypeError "<what>, got 'typename'" (the type's __name__). */
static void
type_error_got(const char *what, PyObject *obj)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(obj));
    if (type_name != NULL) {
        PyErr_Format(PyExc_TypeError, "%s, got '%U'", what, type_name);
        Py_DECREF(type_name);
    }
}

/* Borrows registers operands[0..n) into argv[0..n).  -1 on an empty one. */
static inline int
gather(PyObject *const *regs, const int32_t *operands, Py_ssize_t n,
       PyObject **argv)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        argv[i] = regs[operands[i]];
        if (argv[i] == NULL) {
            empty_register_error(operands[i]);
            return -1;
        }
    }
    return 0;
}

/* Calls `callable` with the registers operands[0..n) as arguments (the last
 * ones named by kwnames).  The argument array has one free slot in front,
 * so callees may use PY_VECTORCALL_ARGUMENTS_OFFSET. */
static PyObject *
call_with_registers(PyObject *callable, PyObject *const *regs,
                    const int32_t *operands, Py_ssize_t n,
                    Py_ssize_t npositional, PyObject *kwnames)
{
    PyObject *small[1 + THP_JIT_SMALL_ARGS];
    PyObject **argv = small;
    if (n > THP_JIT_SMALL_ARGS) {
        argv = PyMem_Malloc(((size_t)n + 1) * sizeof(PyObject *));
        if (argv == NULL) {
            return PyErr_NoMemory();
        }
    }
    PyObject *result = NULL;
    if (gather(regs, operands, n, argv + 1) == 0) {
        result = PyObject_Vectorcall(
            callable, argv + 1,
            (size_t)npositional | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    }
    if (argv != small) {
        PyMem_Free(argv);
    }
    return result;
}

/* LOOP_TEST: 1 when counter >= trip (the loop is done), 0 when not, -1 on
 * error.  Machine-word ints are compared directly. */
static int
loop_done(PyObject *counter, PyObject *trip)
{
    if (PyLong_CheckExact(counter) && PyLong_CheckExact(trip)) {
        int counter_overflow, trip_overflow;
        long c = PyLong_AsLongAndOverflow(counter, &counter_overflow);
        long t = PyLong_AsLongAndOverflow(trip, &trip_overflow);
        if (counter_overflow == 0 && trip_overflow == 0) {
            return c >= t;
        }
    }
    if (!PyLong_Check(counter) || !PyLong_Check(trip)) {
        PyObject *names[2] = {PyType_GetName(Py_TYPE(counter)),
                              PyType_GetName(Py_TYPE(trip))};
        if (names[0] != NULL && names[1] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "LOOP_TEST: counter and trip count must be ints, "
                         "got '%U' and '%U'", names[0], names[1]);
        }
        Py_XDECREF(names[0]);
        Py_XDECREF(names[1]);
        return -1;
    }
    return PyObject_RichCompareBool(counter, trip, Py_GE);
}

/* INC: value + 1, a new reference.  Machine-word ints skip the number
 * protocol (and small results come from CPython's small-int cache). */
static PyObject *
increment(PyObject *value)
{
    if (PyLong_CheckExact(value)) {
        int overflow;
        long v = PyLong_AsLongAndOverflow(value, &overflow);
        if (overflow == 0 && v < LONG_MAX) {
            return PyLong_FromLong(v + 1);
        }
    }
    if (!PyLong_Check(value)) {
        type_error_got("INC: the register must hold an int", value);
        return NULL;
    }
    PyObject *one = PyLong_FromLong(1);
    if (one == NULL) {
        return NULL;
    }
    PyObject *result = PyNumber_Add(value, one);
    Py_DECREF(one);
    return result;
}

/* UNPACK: stores the `count` items of `src` (a tuple or list) into the
 * registers targets[0..count).  The items are read from a tuple that this
 * function owns, so releasing a register's old value (which may run any
 * code) cannot change or free them. */
static int
unpack(PyObject **regs, PyObject *src, const int32_t *targets,
       Py_ssize_t count)
{
    PyObject *items;
    if (PyTuple_Check(src)) {
        items = Py_NewRef(src);
    } else if (PyList_Check(src)) {
        items = PyList_AsTuple(src);
        if (items == NULL) {
            return -1;
        }
    } else {
        type_error_got("UNPACK: expected a tuple or list", src);
        return -1;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(items);
    if (size != count) {
        if (size > count) {
            PyErr_Format(PyExc_ValueError,
                         "too many values to unpack (expected %zd)", count);
        } else {
            PyErr_Format(PyExc_ValueError,
                         "not enough values to unpack (expected %zd, got %zd)",
                         count, size);
        }
        Py_DECREF(items);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        store(regs, targets[i], Py_NewRef(PyTuple_GET_ITEM(items, i)));
    }
    Py_DECREF(items);
    return 0;
}

/* FUSED: 1 after storing the kernel's outputs, 0 when its guard failed (it
 * returned None), -1 on error. */
static int
run_fused(PyObject **regs, const THPJitKernel *kernel, Py_ssize_t index,
          const int32_t *operands)
{
    PyObject *result = call_with_registers(kernel->kernel, regs, operands,
                                           kernel->ninputs, kernel->ninputs,
                                           NULL);
    if (result == NULL) {
        return -1;
    }
    if (result == Py_None) {
        Py_DECREF(result);
        return 0;
    }
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != kernel->noutputs) {
        PyObject *got = PyTuple_Check(result)
                            ? PyUnicode_FromFormat("a tuple of %zd",
                                                   PyTuple_GET_SIZE(result))
                            : PyType_GetName(Py_TYPE(result));
        if (got != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "FUSED: kernel %zd must return a tuple of %zd "
                         "outputs or None, got %U", index, kernel->noutputs,
                         got);
            Py_DECREF(got);
        }
        Py_DECREF(result);
        return -1;
    }
    const int32_t *outputs = operands + kernel->ninputs;
    for (Py_ssize_t i = 0; i < kernel->noutputs; i++) {
        store(regs, outputs[i], Py_NewRef(PyTuple_GET_ITEM(result, i)));
    }
    Py_DECREF(result);
    return 1;
}

/* RETURN: the register operands[0] when count == 1, else a tuple. */
static PyObject *
return_value(PyObject *const *regs, const int32_t *operands, Py_ssize_t count)
{
    if (count == 1) {
        PyObject *value = regs[operands[0]];
        if (value == NULL) {
            empty_register_error(operands[0]);
            return NULL;
        }
        return Py_NewRef(value);
    }
    PyObject *tuple = PyTuple_New(count);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = regs[operands[i]];
        if (value == NULL) {
            empty_register_error(operands[i]);
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(value)); /* steals */
    }
    return tuple;
}

/* RAISE: sets kind(message) (or kind() when msg_reg is -1).  Always -1. */
static int
raise_kind(PyObject *const *regs, int32_t kind, int32_t msg_reg)
{
    PyObject *type = *raise_kind_type(kind);
    if (msg_reg < 0) {
        PyErr_SetNone(type);
        return -1;
    }
    PyObject *message = regs[msg_reg];
    if (message == NULL) {
        empty_register_error(msg_reg);
        return -1;
    }
    PyObject *exc = PyObject_CallOneArg(type, message);
    if (exc != NULL) {
        PyErr_SetObject(type, exc);
        Py_DECREF(exc);
    }
    return -1;
}

/* Adds the PEP 678 note naming the function, the source line and the
 * instruction to the pending exception.  Should adding the note itself
 * fail, the original exception is kept without it. */
static void
add_error_note(THPJitCode *self, Py_ssize_t pc)
{
    PyObject *value = PyErr_GetRaisedException(); /* Note [One exception object] */
    if (value == NULL) {
        return;
    }
    const char *op = opcode_names[self->instructions[pc].op];
    int line = self->lines[pc];
    PyObject *note =
        line > 0
            ? PyUnicode_FromFormat("ember.jit: in scripted function '%U', "
                                   "line %d (instruction %zd, %s)",
                                   self->name, line, pc, op)
            : PyUnicode_FromFormat("ember.jit: in scripted function '%U', "
                                   "line unknown (instruction %zd, %s)",
                                   self->name, pc, op);
    PyObject *result =
        note == NULL ? NULL
                     : PyObject_CallMethod(value, "add_note", "O", note);
    Py_XDECREF(note);
    if (result == NULL) {
        PyErr_Clear();
    }
    Py_XDECREF(result);
    PyErr_SetRaisedException(value);
}

/* Reads register `reg` (borrowed) into `var`, or fails on an empty one. */
#define READ_REG(var, reg)                   \
    do {                                     \
        (var) = regs[(reg)];                 \
        if ((var) == NULL) {                 \
            empty_register_error((reg));     \
            goto error;                      \
        }                                    \
    } while (0)

/* A jump; backward ones (loops) also let Ctrl-C interrupt the code. */
#define JUMP_TO(target)                                            \
    do {                                                           \
        Py_ssize_t target_ = (target);                             \
        if (target_ <= pc && PyErr_CheckSignals() < 0) {           \
            goto error;                                            \
        }                                                          \
        pc = target_;                                              \
    } while (0)

/* The dispatch loop: runs from pc 0 until RETURN (a new reference) or an
 * error (NULL, with the note added).  The caller owns and releases regs. */
static PyObject *
run(THPJitCode *self, PyObject **regs)
{
    const THPJitInstruction *code = self->instructions;
    const int32_t *operands = self->operands;
    Py_ssize_t pc = 0;
    PyObject *value, *other, *result;
    for (;;) {
        const THPJitInstruction *ins = &code[pc];
        switch ((THPJitOpcode)ins->op) {
        case THP_JIT_LOAD_CONST:
            store(regs, ins->a,
                  Py_NewRef(PyTuple_GET_ITEM(self->constants, ins->b)));
            pc++;
            break;
        case THP_JIT_MOVE:
            READ_REG(value, ins->b);
            store(regs, ins->a, Py_NewRef(value));
            pc++;
            break;
        case THP_JIT_CALL: {
            const THPJitCallsite *site = &self->sites[ins->b];
            result = call_with_registers(site->callable, regs,
                                         operands + ins->c, site->nargs,
                                         site->npositional, site->kwnames);
            if (result == NULL) {
                goto error;
            }
            if (ins->a < 0) {
                Py_DECREF(result); /* a discarded result */
            } else {
                store(regs, ins->a, result);
            }
            pc++;
            break;
        }
        case THP_JIT_UNPACK:
            READ_REG(value, ins->b);
            if (unpack(regs, value, operands + ins->a, ins->c) < 0) {
                goto error;
            }
            pc++;
            break;
        case THP_JIT_JUMP:
            JUMP_TO(ins->a);
            break;
        case THP_JIT_JUMP_IF_FALSE:
        case THP_JIT_JUMP_IF_TRUE:
            READ_REG(value, ins->a);
            if (!PyBool_Check(value)) {
                type_error_got(ins->op == THP_JIT_JUMP_IF_FALSE
                                   ? "JUMP_IF_FALSE: the condition must be a "
                                     "bool"
                                   : "JUMP_IF_TRUE: the condition must be a "
                                     "bool",
                               value);
                goto error;
            }
            if ((value == Py_True) == (ins->op == THP_JIT_JUMP_IF_TRUE)) {
                JUMP_TO(ins->b);
            } else {
                pc++;
            }
            break;
        case THP_JIT_LOOP_TEST: {
            READ_REG(value, ins->a);
            READ_REG(other, ins->b);
            int done = loop_done(value, other);
            if (done < 0) {
                goto error;
            }
            pc = done ? ins->c : pc + 1;
            break;
        }
        case THP_JIT_INC:
            READ_REG(value, ins->a);
            result = increment(value);
            if (result == NULL) {
                goto error;
            }
            store(regs, ins->a, result);
            pc++;
            break;
        case THP_JIT_FUSED: {
            int ran = run_fused(regs, &self->kernels[ins->a], ins->a,
                                operands + ins->b);
            if (ran < 0) {
                goto error;
            }
            if (ran) {
                pc++;
            } else {
                JUMP_TO(ins->c); /* the guard failed: the unfused code */
            }
            break;
        }
        case THP_JIT_DROP:
            store(regs, ins->a, NULL);
            pc++;
            break;
        case THP_JIT_RETURN:
            result = return_value(regs, operands + ins->a, ins->b);
            if (result == NULL) {
                goto error;
            }
            return result;
        case THP_JIT_RAISE:
            raise_kind(regs, ins->a, ins->b);
            goto error;
        case THP_JIT_END:
        default:
            PyErr_SetString(PyExc_RuntimeError,
                            "reached the end of the code without RETURN");
            goto error;
        }
    }
error:
    add_error_note(self, pc);
    return NULL;
}

#undef READ_REG
#undef JUMP_TO

static PyObject *
THPJitCode_vectorcall(PyObject *callable, PyObject *const *args,
                      size_t nargsf, PyObject *kwnames)
{
    THPJitCode *self = (THPJitCode *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "%U() takes no keyword arguments",
                     self->name);
        return NULL;
    }
    if (nargs != self->nargs) {
        PyErr_Format(PyExc_TypeError,
                     "%U() takes %d positional argument%s but %zd %s given",
                     self->name, self->nargs, self->nargs == 1 ? "" : "s",
                     nargs, nargs == 1 ? "was" : "were");
        return NULL;
    }
    if (self->constants == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "Code '%U' was cleared by the garbage collector",
                     self->name);
        return NULL;
    }
    PyObject *small[THP_JIT_SMALL_REGS];
    PyObject **regs = small;
    if (self->nregs > THP_JIT_SMALL_REGS) {
        regs = PyMem_Calloc((size_t)self->nregs, sizeof(PyObject *));
        if (regs == NULL) {
            return PyErr_NoMemory();
        }
    } else {
        memset(small, 0, sizeof(small));
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        regs[i] = Py_NewRef(args[i]);
    }
    PyObject *result = NULL;
    /* Code calling Code (recursion) must not overflow the C stack. */
    if (Py_EnterRecursiveCall(" while running a scripted function") == 0) {
        result = run(self, regs);
        Py_LeaveRecursiveCall();
    }
    for (int i = 0; i < self->nregs; i++) {
        Py_CLEAR(regs[i]);
    }
    if (regs != small) {
        PyMem_Free(regs);
    }
    return result;
}

/* ---- introspection --------------------------------------------------------- */

static PyObject *
int32_tuple(const int32_t *words, Py_ssize_t n)
{
    PyObject *tuple = PyTuple_New(n);
    for (Py_ssize_t i = 0; tuple != NULL && i < n; i++) {
        PyObject *word = PyLong_FromLong(words[i]);
        if (word == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, i, word); /* steals */
    }
    return tuple;
}

static PyObject *
THPJitCode_getInstructions(THPJitCode *self, void *unused)
{
    (void)unused;
    PyObject *list = PyList_New(self->ninstructions);
    for (Py_ssize_t pc = 0; list != NULL && pc < self->ninstructions; pc++) {
        PyObject *ins = int32_tuple(&self->instructions[pc].op, 4);
        if (ins == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, pc, ins); /* steals */
    }
    return list;
}

static PyObject *
THPJitCode_getOperands(THPJitCode *self, void *unused)
{
    (void)unused;
    return int32_tuple(self->operands, self->noperands);
}

static PyObject *
THPJitCode_getLines(THPJitCode *self, void *unused)
{
    (void)unused;
    if (!self->has_lines) {
        Py_RETURN_NONE;
    }
    return int32_tuple(self->lines, self->ninstructions);
}

/* A table (constants, callsites, fused); () once cleared by the GC. */
static PyObject *
table_or_empty(PyObject *table)
{
    return table != NULL ? Py_NewRef(table) : PyTuple_New(0);
}

static PyObject *
THPJitCode_getConstants(THPJitCode *self, void *unused)
{
    (void)unused;
    return table_or_empty(self->constants);
}

static PyObject *
THPJitCode_getCallsites(THPJitCode *self, void *unused)
{
    (void)unused;
    return table_or_empty(self->callsites);
}

static PyObject *
THPJitCode_getFused(THPJitCode *self, void *unused)
{
    (void)unused;
    return table_or_empty(self->fused);
}

static PyObject *
THPJitCode_getName(THPJitCode *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->name);
}

static PyObject *
THPJitCode_getNregs(THPJitCode *self, void *unused)
{
    (void)unused;
    return PyLong_FromLong(self->nregs);
}

static PyObject *
THPJitCode_getNargs(THPJitCode *self, void *unused)
{
    (void)unused;
    return PyLong_FromLong(self->nargs);
}

static PyGetSetDef THPJitCode_getset[] = {
    {"instructions", (getter)THPJitCode_getInstructions, NULL,
     "The instructions, as a list of (op, a, b, c) tuples.", NULL},
    {"operands", (getter)THPJitCode_getOperands, NULL,
     "The register lists, as a tuple of ints.", NULL},
    {"lines", (getter)THPJitCode_getLines, NULL,
     "The source line of each instruction (0 = unknown), or None.", NULL},
    {"constants", (getter)THPJitCode_getConstants, NULL,
     "The constants LOAD_CONST reads.", NULL},
    {"callsites", (getter)THPJitCode_getCallsites, NULL,
     "The (callable, nargs, kwnames) triples CALL uses.", NULL},
    {"fused", (getter)THPJitCode_getFused, NULL,
     "The kernels FUSED runs.", NULL},
    {"name", (getter)THPJitCode_getName, NULL,
     "The function's name (used in error notes).", NULL},
    {"nregs", (getter)THPJitCode_getNregs, NULL,
     "The number of registers.", NULL},
    {"nargs", (getter)THPJitCode_getNargs, NULL,
     "The number of arguments (registers 0..nargs-1).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *
THPJitCode_repr(THPJitCode *self)
{
    return PyUnicode_FromFormat(
        "<ember._C.Code '%U': %zd instructions, %d registers, %d arguments>",
        self->name, self->ninstructions, self->nregs, self->nargs);
}

PyTypeObject THPJitCodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C.Code",
    .tp_basicsize = sizeof(THPJitCode),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
                | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Code(code, operands, nregs, nargs, constants, callsites, "
              "fused, lines, name)\n\n"
              "ember.jit's register bytecode, validated, callable as "
              "code(*args).\nSee JIT_SPEC.md section B and "
              "ember.jit.bytecode.",
    .tp_vectorcall_offset = offsetof(THPJitCode, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)THPJitCode_repr,
    .tp_traverse = (traverseproc)THPJitCode_traverse,
    .tp_clear = (inquiry)THPJitCode_clear,
    .tp_dealloc = (destructor)THPJitCode_dealloc,
    .tp_getset = THPJitCode_getset,
    .tp_new = THPJitCode_pynew,
};

/* ---- module functions --------------------------------------------------------- */

static PyObject *
THPJit_opcodes(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *opcodes = PyDict_New();
    for (int op = 0; opcodes != NULL && op < THP_JIT_NUM_OPCODES; op++) {
        PyObject *number = PyLong_FromLong(op);
        if (number == NULL
            || PyDict_SetItemString(opcodes, opcode_names[op], number) < 0) {
            Py_CLEAR(opcodes);
        }
        Py_XDECREF(number);
    }
    return opcodes;
}

static PyObject *
THPJit_operandKinds(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *kinds = PyDict_New();
    for (int op = 0; kinds != NULL && op < THP_JIT_NUM_OPCODES; op++) {
        const THPJitOperandKind *k = opcode_operand_kinds[op];
        PyObject *triple = Py_BuildValue("(sss)", operand_kind_names[k[0]],
                                         operand_kind_names[k[1]],
                                         operand_kind_names[k[2]]);
        if (triple == NULL
            || PyDict_SetItemString(kinds, opcode_names[op], triple) < 0) {
            Py_CLEAR(kinds);
        }
        Py_XDECREF(triple);
    }
    return kinds;
}

static PyObject *
THPJit_raiseKinds(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *kinds = PyTuple_New(THP_JIT_NUM_RAISE_KINDS);
    for (int k = 0; kinds != NULL && k < THP_JIT_NUM_RAISE_KINDS; k++) {
        PyTuple_SET_ITEM(kinds, k, Py_NewRef(*raise_kind_type(k)));
    }
    return kinds;
}

static PyMethodDef THPJit_methods[] = {
    {"_jit_opcodes", THPJit_opcodes, METH_NOARGS,
     "{name: number} for the opcodes of ember._C.Code."},
    {"_jit_operand_kinds", THPJit_operandKinds, METH_NOARGS,
     "{name: (kind of a, kind of b, kind of c)} for each opcode."},
    {"_jit_raise_kinds", THPJit_raiseKinds, METH_NOARGS,
     "The exception classes RAISE raises, indexed by kind."},
    {NULL, NULL, 0, NULL},
};

int
THPJitVM_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPJitCodeType) < 0
        || PyModule_AddFunctions(module, THPJit_methods) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "Code", (PyObject *)&THPJitCodeType);
}
