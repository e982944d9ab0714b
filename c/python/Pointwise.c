/*
 * Pointwise.c -- elementwise binary operators, comparisons, logical and
 * bitwise ops, where and clamp, and the tensor's number-protocol slots.
 * See Note [Function and method from one implementation] in THP.h.
 *
 * Every entry point turns its Python arguments into THPointwiseArgs (a
 * tensor, or a number that never becomes a tensor: Note [Wrapped numbers]
 * in THPointwise.h) and calls run_pointwise, which releases the GIL around
 * the kernels of large operations.  The operator slots (a + b, a += b,
 * a < b, ...) take the shortest path there: no keyword parsing, no Python
 * calls.
 */
#include "THP.h"

#include <string.h>

/* ---- operands ------------------------------------------------------------ */

/* NumPy scalars (numpy.float32, numpy.int64, numpy.bool) are numbers too;
 * recognised by their base class, numpy.generic, without importing NumPy. */
static bool
is_numpy_scalar(PyObject *obj)
{
    for (PyTypeObject *t = Py_TYPE(obj); t != NULL; t = t->tp_base) {
        if (strcmp(t->tp_name, "numpy.generic") == 0) {
            return true;
        }
    }
    return false;
}

/* Reads an operand: 1 when it is a tensor or a number, 0 when it is
 * neither (the operator slots then return NotImplemented), -1 on error. */
static int
parse_operand(PyObject *obj, THPointwiseArg *arg)
{
    if (THPVariable_Check(obj)) {
        arg->tensor = THPVariable_Unpack(obj);
        return 1;
    }
    arg->tensor = NULL;
    if (PyFloat_CheckExact(obj)) {
        arg->number = THScalar_fromDouble(PyFloat_AS_DOUBLE(obj));
        return 1;
    }
    if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj)) {
        return THPUtils_parseScalar(obj, &arg->number) < 0 ? -1 : 1;
    }
    if (is_numpy_scalar(obj)) {
        if (strcmp(Py_TYPE(obj)->tp_name, "numpy.bool") == 0
            || strcmp(Py_TYPE(obj)->tp_name, "numpy.bool_") == 0) {
            int truth = PyObject_IsTrue(obj);
            arg->number = THScalar_fromBool(truth == 1);
            return truth < 0 ? -1 : 1;
        }
        return THPUtils_parseScalar(obj, &arg->number) < 0 ? -1 : 1;
    }
    return 0;
}

/* parse_operand for a named argument: anything else is a TypeError. */
static int
parse_operand_arg(const char *fname, const char *what, int position,
                  PyObject *obj, THPointwiseArg *arg)
{
    int status = parse_operand(obj, arg);
    if (status == 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' (position %d) must be Tensor or "
                     "Number, not %.100s",
                     fname, what, position, Py_TYPE(obj)->tp_name);
    }
    return status > 0 ? 0 : -1;
}

/* ---- running ----------------------------------------------------------------- */

/* Runs `op` and returns the result: `returned` (a new reference to it) when
 * the result was written into that object's tensor (self for in-place
 * ops, out= otherwise), else a new tensor. */
static PyObject *
run_pointwise(THPointwiseOp op, const THPointwiseArg *args, THTensor *out,
              bool inplace, THScalar alpha, PyObject *returned)
{
    THPointwiseOptions options = {
        .out = out,
        .inplace = inplace,
        .alpha = alpha,
        .default_float = THPDtype_defaultFloat(),
    };
    THPointwisePlan plan;
    if (THPointwise_prepare(&plan, op, args, &options) < 0) {
        return THPUtils_setErrorFromTH();
    }
    THP_RUN_WITHOUT_GIL_IF(plan.numel >= TH_PARALLEL_GRAIN,
                           THPointwise_execute(&plan));
    THTensor *result = THPointwise_finish(&plan);
    if (result == NULL || returned == NULL) {
        return THPVariable_Wrap(result);
    }
    THTensor_release(result); /* `returned` holds it */
    Py_INCREF(returned);      /* the caller's new reference */
    return returned;
}

static const THScalar alpha_one = {.dtype = TH_Int64, .value.i = 1};

/* ---- operator slots ----------------------------------------------------------- */

/* `name` is the slot's dunder name, autograd's handler key (NULL: an
 * operator without a derivative). */
static PyObject *
binary_operator_pinned(const char *name, THPointwiseOp op, PyObject *a,
                       PyObject *b, bool inplace)
{
    THPointwiseArg args[2];
    int status_a = parse_operand(a, &args[0]);
    if (status_a <= 0) {
        return status_a < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    int status_b = parse_operand(b, &args[1]);
    if (status_b == 0 && inplace && op == TH_OP_ADD
        && (Py_TYPE(b)->tp_as_number == NULL
            || Py_TYPE(b)->tp_as_number->nb_add == NULL)) {
        /* CPython fills a heap subclass's sq_inplace_concat with the
         * nb_inplace_add it inherits (both are __iadd__), and calls it
         * again once every + has declined: a NotImplemented from here
         * would become the value of t += b.  When b cannot add either,
         * raise the error CPython would. */
        PyErr_Format(PyExc_TypeError,
                     "unsupported operand type(s) for +=: '%.100s' and "
                     "'%.100s'",
                     Py_TYPE(a)->tp_name, Py_TYPE(b)->tp_name);
        return NULL;
    }
    if (status_b <= 0) {
        return status_b < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    if (args[0].tensor == NULL && args[1].tensor == NULL) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* Autograd only once both operands are ours: an unknown one gets
     * NotImplemented above, so Python tries its reflected method. */
    PyObject *operands[2] = {a, b}, *routed;
    if (name != NULL
        && THPAutograd_maybeDispatch(name, operands, 2, &routed)) {
        return routed;
    }
    return run_pointwise(op, args, NULL, inplace, alpha_one,
                         inplace ? a : NULL);
}

/* The slots run inside a pin frame (Note [Pinned arguments] in THP.h): b's
 * __index__ may rebind a.data while a's THTensor is in use. */
static PyObject *
binary_operator(const char *name, THPointwiseOp op, PyObject *a, PyObject *b,
                bool inplace)
{
    PyObject *operands[2] = {a, b};
    THPPinFrame frame;
    THPPin_enter(&frame);
    PyObject *result = NULL;
    PyObject *routed;
    switch (THPPin_objects(&frame, operands, 2)) {
    case 0: result = binary_operator_pinned(name, op, a, b, inplace); break;
    case 1: /* another device: autograd first, as on the CPU */
        result = THPAutograd_maybeDispatch(name, operands, 2, &routed)
                     ? routed
                     : THPDevice_launchSlot(name, operands, 2);
        break;
    default: break;
    }
    THPPin_exit(&frame);
    return result;
}

#define THP_BINARY_SLOTS(slot, OP, dunder)                                  \
    static PyObject *THPVariable_##slot(PyObject *a, PyObject *b)          \
    {                                                                       \
        return binary_operator("__" dunder "__", TH_OP_##OP, a, b, false);  \
    }                                                                       \
    static PyObject *THPVariable_inplace_##slot(PyObject *a, PyObject *b)  \
    {                                                                       \
        return binary_operator("__i" dunder "__", TH_OP_##OP, a, b, true);  \
    }
THP_BINARY_SLOTS(add, ADD, "add")
THP_BINARY_SLOTS(subtract, SUB, "sub")
THP_BINARY_SLOTS(multiply, MUL, "mul")
THP_BINARY_SLOTS(true_divide, DIV, "truediv")
THP_BINARY_SLOTS(floor_divide, DIV_FLOOR, "floordiv")
THP_BINARY_SLOTS(remainder, REMAINDER, "mod")
THP_BINARY_SLOTS(and, BITWISE_AND, "and")
THP_BINARY_SLOTS(or, BITWISE_OR, "or")
THP_BINARY_SLOTS(xor, BITWISE_XOR, "xor")
THP_BINARY_SLOTS(lshift, LSHIFT, "lshift")
THP_BINARY_SLOTS(rshift, RSHIFT, "rshift")
#undef THP_BINARY_SLOTS

/* a ** b and pow(a, b); three-argument pow(a, b, m) is not supported. */
static PyObject *
THPVariable_power(PyObject *a, PyObject *b, PyObject *modulo)
{
    if (modulo != Py_None) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return binary_operator("__pow__", TH_OP_POW, a, b, false);
}

static PyObject *
THPVariable_inplace_power(PyObject *a, PyObject *b, PyObject *modulo)
{
    if (modulo != Py_None) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return binary_operator("__ipow__", TH_OP_POW, a, b, true);
}

static PyObject *
unary_operator(const char *name, THPointwiseOp op, PyObject *self)
{
    PyObject *routed;
    if (THPAutograd_maybeDispatch(name, &self, 1, &routed)) {
        return routed;
    }
    THPPinFrame frame;
    THPPin_enter(&frame);
    PyObject *result = NULL;
    int placement = THPPin_objects(&frame, &self, 1);
    if (placement == 0) {
        THPointwiseArg arg = THPointwiseArg_tensor(THPVariable_Unpack(self));
        result = run_pointwise(op, &arg, NULL, false, alpha_one, NULL);
    }
    else if (placement == 1) {
        result = THPDevice_launchSlot(name, &self, 1);
    }
    THPPin_exit(&frame);
    return result;
}

static PyObject *
THPVariable_negative(PyObject *self)
{
    return unary_operator("__neg__", TH_OP_NEG, self);
}

static PyObject *
THPVariable_absolute(PyObject *self)
{
    return unary_operator("__abs__", TH_OP_ABS, self);
}

static PyObject *
THPVariable_invert(PyObject *self)
{
    if (THDtype_isFloating(THPVariable_Unpack(self)->dtype)) {
        PyErr_SetString(PyExc_TypeError,
                        "~ (operator.invert) is only implemented on integer "
                        "and Boolean-type tensors");
        return NULL;
    }
    return unary_operator("__invert__", TH_OP_BITWISE_NOT, self);
}

/* +t is t itself, as torch.positive; PyTorch refuses it on bool. */
static PyObject *
positive(PyObject *self)
{
    if (THPVariable_Unpack(self)->dtype == TH_Bool) {
        PyErr_SetString(PyExc_RuntimeError,
                        "The `+` operator, on a bool tensor is not "
                        "supported.");
        return NULL;
    }
    return Py_NewRef(self);
}

static PyObject *
THPVariable_richcompare(PyObject *self, PyObject *other, int cmp)
{
    static const THPointwiseOp ops[] = {
        [Py_LT] = TH_OP_LT, [Py_LE] = TH_OP_LE, [Py_EQ] = TH_OP_EQ,
        [Py_NE] = TH_OP_NE, [Py_GT] = TH_OP_GT, [Py_GE] = TH_OP_GE,
    };
    static const char *const names[] = {
        [Py_LT] = "__lt__", [Py_LE] = "__le__", [Py_EQ] = "__eq__",
        [Py_NE] = "__ne__", [Py_GT] = "__gt__", [Py_GE] = "__ge__",
    };
    /* Comparisons have no derivative (their autograd entries are None);
     * the names are for the tracer. */
    return binary_operator(names[cmp], ops[cmp], self, other, false);
}

/* ---- functions and methods -------------------------------------------------- */

/* EXTRA_TENSOR_OTHER: no extra argument, and `other` must be a tensor
 * (PyTorch has no Scalar overload of atan2, hypot, maximum, ...). */
enum { EXTRA_NONE, EXTRA_ALPHA, EXTRA_ROUNDING_MODE, EXTRA_TENSOR_OTHER };

typedef struct {
    const char *name;
    THPointwiseOp op;
    int extra;
    bool inplace;
} BinarySpec;

/* The op for rounding_mode=None/'trunc'/'floor'. */
static int
parse_rounding_mode(PyObject *obj, THPointwiseOp *op)
{
    if (obj == NULL || obj == Py_None) {
        *op = TH_OP_DIV;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        if (PyUnicode_CompareWithASCIIString(obj, "trunc") == 0) {
            *op = TH_OP_DIV_TRUNC;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(obj, "floor") == 0) {
            *op = TH_OP_DIV_FLOOR;
            return 0;
        }
        PyErr_Format(PyExc_RuntimeError,
                     "div expected rounding_mode to be one of None, 'trunc', "
                     "or 'floor' but found '%U'",
                     obj);
        return -1;
    }
    PyErr_Format(PyExc_TypeError,
                 "div(): argument 'rounding_mode' must be str or None, not "
                 "%.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* The op with alpha: plain add/sub when alpha is the integer 1. */
static int
parse_alpha(PyObject *obj, THPointwiseOp *op, THScalar *alpha)
{
    *alpha = alpha_one;
    if (obj == NULL) {
        return 0;
    }
    if (THPUtils_parseScalar(obj, alpha) < 0) {
        return -1;
    }
    if (alpha->dtype != TH_Int64 || alpha->value.i != 1) {
        *op = *op == TH_OP_ADD ? TH_OP_ADD_ALPHA : TH_OP_SUB_ALPHA;
    }
    return 0;
}

static PyObject *
binary_impl(const BinarySpec *spec, PyObject *input, PyObject *const *args,
            Py_ssize_t nargs, PyObject *kwnames)
{
    const char *extra_name = spec->extra == EXTRA_ALPHA ? "alpha"
                             : spec->extra == EXTRA_ROUNDING_MODE
                                 ? "rounding_mode"
                                 : NULL;
    const char *names[3] = {"other", extra_name ? extra_name : "out", "out"};
    int nnames = 1 + (extra_name != NULL) + !spec->inplace;
    PyObject *objs[3] = {NULL, NULL, NULL};
    if (THPUtils_parseArgs(spec->name, args, nargs, kwnames, names, nnames, 1,
                           objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() missing required argument 'other' (pos 2)",
                     spec->name);
        return NULL;
    }
    if (spec->extra == EXTRA_TENSOR_OTHER && !THPVariable_Check(objs[0])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'other' (position 2) must be Tensor, "
                     "not %s",
                     spec->name, Py_TYPE(objs[0])->tp_name);
        return NULL;
    }
    THPointwiseArg operands[2] = {THPointwiseArg_tensor(
        THPVariable_Unpack(input))};
    if (parse_operand_arg(spec->name, "other", 2, objs[0], &operands[1])
        < 0) {
        return NULL;
    }
    THPointwiseOp op = spec->op;
    THScalar alpha = alpha_one;
    if ((spec->extra == EXTRA_ALPHA && parse_alpha(objs[1], &op, &alpha) < 0)
        || (spec->extra == EXTRA_ROUNDING_MODE
            && parse_rounding_mode(objs[1], &op) < 0)) {
        return NULL;
    }
    PyObject *out_obj = spec->inplace ? NULL : objs[nnames - 1];
    THTensor *out;
    if (THPUtils_parseOut(spec->name, out_obj, &out) < 0) {
        return NULL;
    }
    PyObject *returned = spec->inplace ? input : out != NULL ? out_obj : NULL;
    return run_pointwise(op, operands, out, spec->inplace, alpha, returned);
}

static PyObject *
unary_impl(const char *name, THPointwiseOp op, bool inplace, PyObject *input,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"out"};
    PyObject *out_obj = NULL;
    if (THPUtils_parseArgs(name, args, nargs, kwnames, names,
                           inplace ? 0 : 1, 0, &out_obj)
        < 0) {
        return NULL;
    }
    THTensor *out;
    if (THPUtils_parseOut(name, out_obj, &out) < 0) {
        return NULL;
    }
    THPointwiseArg arg = THPointwiseArg_tensor(THPVariable_Unpack(input));
    PyObject *returned = inplace ? input : out != NULL ? out_obj : NULL;
    return run_pointwise(op, &arg, out, inplace, alpha_one, returned);
}

/* A function + method from one binary spec, or a method only (in-place). */
#define THP_BINARY_OP(name, OP, extra)                                       \
    static const BinarySpec name##_spec = {#name, TH_OP_##OP, extra, false}; \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,     \
                                 Py_ssize_t nargs, PyObject *kwnames)        \
    {                                                                        \
        return binary_impl(&name##_spec, input, args, nargs, kwnames);       \
    }                                                                        \
    THP_DEFINE_OP(name)
#define THP_BINARY_INPLACE(name, OP, extra)                                  \
    static const BinarySpec name##_spec = {#name, TH_OP_##OP, extra, true};  \
    static PyObject *THPMethod_##name(PyObject *self, PyObject *const *args, \
                                      Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                        \
        return binary_impl(&name##_spec, self, args, nargs, kwnames);        \
    }
#define THP_UNARY_OP(name, OP)                                               \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,     \
                                 Py_ssize_t nargs, PyObject *kwnames)        \
    {                                                                        \
        return unary_impl(#name, TH_OP_##OP, false, input, args, nargs,      \
                          kwnames);                                          \
    }                                                                        \
    THP_DEFINE_OP(name)
#define THP_UNARY_INPLACE(name, OP)                                          \
    static PyObject *THPMethod_##name(PyObject *self, PyObject *const *args, \
                                      Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                        \
        return unary_impl(#name, TH_OP_##OP, true, self, args, nargs,        \
                          kwnames);                                          \
    }

/* (name, op, extra argument): each has a function, a method and an
 * in-place method name_. */
#define THP_FORALL_BINARY(_)                          \
    _(add, ADD, EXTRA_ALPHA)                          \
    _(sub, SUB, EXTRA_ALPHA)                          \
    _(subtract, SUB, EXTRA_ALPHA)                     \
    _(mul, MUL, EXTRA_NONE)                           \
    _(multiply, MUL, EXTRA_NONE)                      \
    _(div, DIV, EXTRA_ROUNDING_MODE)                  \
    _(divide, DIV, EXTRA_ROUNDING_MODE)               \
    _(true_divide, DIV, EXTRA_NONE)                   \
    _(floor_divide, DIV_FLOOR, EXTRA_NONE)            \
    _(remainder, REMAINDER, EXTRA_NONE)               \
    _(fmod, FMOD, EXTRA_NONE)                         \
    _(pow, POW, EXTRA_NONE)                           \
    _(atan2, ATAN2, EXTRA_TENSOR_OTHER)               \
    _(arctan2, ATAN2, EXTRA_TENSOR_OTHER)             \
    _(hypot, HYPOT, EXTRA_TENSOR_OTHER)               \
    _(copysign, COPYSIGN, EXTRA_NONE)                 \
    _(xlogy, XLOGY, EXTRA_NONE)                       \
    _(eq, EQ, EXTRA_NONE)                             \
    _(ne, NE, EXTRA_NONE)                             \
    _(not_equal, NE, EXTRA_NONE)                      \
    _(lt, LT, EXTRA_NONE)                             \
    _(less, LT, EXTRA_NONE)                           \
    _(le, LE, EXTRA_NONE)                             \
    _(less_equal, LE, EXTRA_NONE)                     \
    _(gt, GT, EXTRA_NONE)                             \
    _(greater, GT, EXTRA_NONE)                        \
    _(ge, GE, EXTRA_NONE)                             \
    _(greater_equal, GE, EXTRA_NONE)                  \
    _(logical_and, LOGICAL_AND, EXTRA_NONE)           \
    _(logical_or, LOGICAL_OR, EXTRA_NONE)             \
    _(logical_xor, LOGICAL_XOR, EXTRA_NONE)           \
    _(bitwise_and, BITWISE_AND, EXTRA_NONE)           \
    _(bitwise_or, BITWISE_OR, EXTRA_NONE)             \
    _(bitwise_xor, BITWISE_XOR, EXTRA_NONE)           \
    _(bitwise_left_shift, LSHIFT, EXTRA_NONE)         \
    _(bitwise_right_shift, RSHIFT, EXTRA_NONE)
/* Binary ops with a function and method but no in-place form. */
#define THP_FORALL_BINARY_NO_INPLACE(_)               \
    _(maximum, MAXIMUM, EXTRA_TENSOR_OTHER)           \
    _(minimum, MINIMUM, EXTRA_TENSOR_OTHER)           \
    _(logaddexp, LOGADDEXP, EXTRA_TENSOR_OTHER)       \
    _(logaddexp2, LOGADDEXP2, EXTRA_TENSOR_OTHER)
#define THP_FORALL_UNARY(_)                           \
    _(neg, NEG)                                       \
    _(negative, NEG)                                  \
    _(abs, ABS)                                       \
    _(absolute, ABS)                                  \
    _(sign, SIGN)                                     \
    _(bitwise_not, BITWISE_NOT)                       \
    _(logical_not, LOGICAL_NOT)

#define THP_DEFINE_BINARY_PAIR(name, OP, extra) \
    THP_BINARY_OP(name, OP, extra)              \
    THP_BINARY_INPLACE(name##_, OP, extra)
THP_FORALL_BINARY(THP_DEFINE_BINARY_PAIR)
THP_FORALL_BINARY_NO_INPLACE(THP_BINARY_OP)
#define THP_DEFINE_UNARY_PAIR(name, OP) \
    THP_UNARY_OP(name, OP)              \
    THP_UNARY_INPLACE(name##_, OP)
THP_FORALL_UNARY(THP_DEFINE_UNARY_PAIR)

static PyObject *
positive_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    if (THPUtils_parseArgs("positive", args, nargs, kwnames, NULL, 0, 0,
                           NULL)
        < 0) {
        return NULL;
    }
    return positive(input);
}
THP_DEFINE_OP(positive)

/* ---- where and clamp --------------------------------------------------------- */

static PyObject *
where(PyObject *condition, PyObject *input, PyObject *other,
      PyObject *out_obj)
{
    THPointwiseArg args[3];
    THTensor *out;
    if (parse_operand_arg("where", "condition", 1, condition, &args[0]) < 0
        || parse_operand_arg("where", "input", 2, input, &args[1]) < 0
        || parse_operand_arg("where", "other", 3, other, &args[2]) < 0
        || THPUtils_parseOut("where", out_obj, &out) < 0) {
        return NULL;
    }
    return run_pointwise(TH_OP_WHERE, args, out, false, alpha_one,
                         out != NULL ? out_obj : NULL);
}

/* where(condition) is condition.nonzero(as_tuple=True), as in PyTorch. */
static PyObject *
where_positions(PyObject *condition)
{
    if (!THPVariable_Check(condition)) {
        PyErr_Format(PyExc_TypeError,
                     "where(): argument 'condition' (position 1) must be "
                     "Tensor, not %.100s",
                     Py_TYPE(condition)->tp_name);
        return NULL;
    }
    PyObject *method = PyObject_GetAttrString(condition, "nonzero");
    PyObject *kwargs = method == NULL
                           ? NULL
                           : Py_BuildValue("{s:O}", "as_tuple", Py_True);
    PyObject *empty = kwargs == NULL ? NULL : PyTuple_New(0);
    PyObject *result = empty == NULL ? NULL
                                     : PyObject_Call(method, empty, kwargs);
    Py_XDECREF(empty);
    Py_XDECREF(kwargs);
    Py_XDECREF(method);
    return result;
}

/* ember.where(condition, input, other, *, out=None), or where(condition) */
static PyObject *
THPFunction_where(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"condition", "input", "other",
                                        "out"};
    PyObject *objs[4];
    (void)module;
    if (THPUtils_parseArgs("where", args, nargs, kwnames, names, 4, 3, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] != NULL && objs[1] == NULL && objs[2] == NULL
        && objs[3] == NULL) {
        return where_positions(objs[0]);
    }
    for (int i = 0; i < 3; i++) {
        if (objs[i] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "where() missing required argument '%s' (pos %d)",
                         names[i], i + 1);
            return NULL;
        }
    }
    return where(objs[0], objs[1], objs[2], objs[3]);
}

/* tensor.where(condition, other) is where(condition, tensor, other). */
static PyObject *
THPMethod_where(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const char *const names[] = {"condition", "other"};
    PyObject *objs[2];
    if (THPUtils_parseArgs("where", args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL || objs[1] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "where() missing required arguments 'condition' and "
                        "'other'");
        return NULL;
    }
    return where(objs[0], self, objs[1], NULL);
}

static PyObject *
clamp_common(const char *name, bool inplace, PyObject *input,
             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"min", "max", "out"};
    PyObject *objs[3];
    if (THPUtils_parseArgs(name, args, nargs, kwnames, names,
                           inplace ? 2 : 3, 2, objs)
        < 0) {
        return NULL;
    }
    bool has_min = objs[0] != NULL && objs[0] != Py_None;
    bool has_max = objs[1] != NULL && objs[1] != Py_None;
    if (!has_min && !has_max) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch.%s: At least one of 'min' or 'max' must not be "
                     "None",
                     name);
        return NULL;
    }
    /* clamp(x, min) is maximum(x, min), clamp(x, max=m) minimum(x, m). */
    THPointwiseArg operands[3] = {THPointwiseArg_tensor(
        THPVariable_Unpack(input))};
    int n = 1;
    if ((has_min
         && parse_operand_arg(name, "min", 2, objs[0], &operands[n++]) < 0)
        || (has_max
            && parse_operand_arg(name, "max", 3, objs[1], &operands[n++])
                   < 0)) {
        return NULL;
    }
    THPointwiseOp op = has_min && has_max ? TH_OP_CLAMP
                       : has_min          ? TH_OP_MAXIMUM
                                          : TH_OP_MINIMUM;
    THTensor *out;
    PyObject *out_obj = inplace ? NULL : objs[2];
    if (THPUtils_parseOut(name, out_obj, &out) < 0) {
        return NULL;
    }
    PyObject *returned = inplace ? input : out != NULL ? out_obj : NULL;
    return run_pointwise(op, operands, out, inplace, alpha_one, returned);
}

#define THP_CLAMP_OPS(name)                                                  \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,     \
                                 Py_ssize_t nargs, PyObject *kwnames)        \
    {                                                                        \
        return clamp_common(#name, false, input, args, nargs, kwnames);      \
    }                                                                        \
    THP_DEFINE_OP(name)                                                      \
    static PyObject *THPMethod_##name##_(PyObject *self,                     \
                                         PyObject *const *args,              \
                                         Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                        \
        return clamp_common(#name, true, self, args, nargs, kwnames);        \
    }
THP_CLAMP_OPS(clamp)
THP_CLAMP_OPS(clip)

/* ---- lerp, addcmul, addcdiv ---------------------------------------------------- */

/* lerp(input, end, weight, *, out=None) and addcmul/addcdiv(input,
 * tensor1, tensor2, *, value=1, out=None); in place without out.  Only
 * lerp's weight may be a number. */
typedef struct {
    const char *name;
    THPointwiseOp op;
    const char *operands[2]; /* the names after input */
    bool has_value;
} TernarySpec;

static int
parse_tensor_operand(const char *fname, const char *what, int position,
                     PyObject *obj, THPointwiseArg *arg)
{
    if (!THPVariable_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' (position %d) must be Tensor, not "
                     "%.100s",
                     fname, what, position, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *arg = THPointwiseArg_tensor(THPVariable_Unpack(obj));
    return 0;
}

static PyObject *
ternary_impl(const TernarySpec *spec, bool inplace, PyObject *input,
             PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const char *names[4] = {spec->operands[0], spec->operands[1],
                            spec->has_value ? "value" : "out", "out"};
    int nnames = 2 + spec->has_value + !inplace;
    PyObject *objs[4] = {NULL, NULL, NULL, NULL};
    if (THPUtils_parseArgs(spec->name, args, nargs, kwnames, names, nnames, 2,
                           objs)
        < 0) {
        return NULL;
    }
    THPointwiseArg operands[3] = {THPointwiseArg_tensor(
        THPVariable_Unpack(input))};
    for (int k = 0; k < 2; k++) {
        if (objs[k] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument '%s' (pos %d)",
                         spec->name, names[k], k + 2);
            return NULL;
        }
        bool number_allowed = spec->op == TH_OP_LERP && k == 1;
        if ((number_allowed ? parse_operand_arg(spec->name, names[k], k + 2,
                                                objs[k], &operands[k + 1])
                            : parse_tensor_operand(spec->name, names[k], k + 2,
                                                   objs[k], &operands[k + 1]))
            < 0) {
            return NULL;
        }
    }
    THScalar value = alpha_one;
    PyObject *value_obj = spec->has_value ? objs[2] : NULL;
    if (value_obj != NULL && THPUtils_parseScalar(value_obj, &value) < 0) {
        return NULL;
    }
    THTensor *out;
    PyObject *out_obj = inplace ? NULL : objs[nnames - 1];
    if (THPUtils_parseOut(spec->name, out_obj, &out) < 0) {
        return NULL;
    }
    PyObject *returned = inplace ? input : out != NULL ? out_obj : NULL;
    return run_pointwise(spec->op, operands, out, inplace, value, returned);
}

/* name, a function and a method, and the in-place method name_. */
#define THP_TERNARY_OPS(name, OP, first, second, has_value)                  \
    static const TernarySpec name##_spec = {#name, TH_OP_##OP,               \
                                            {first, second}, has_value};     \
    static PyObject *name##_impl(PyObject *input, PyObject *const *args,     \
                                 Py_ssize_t nargs, PyObject *kwnames)        \
    {                                                                        \
        return ternary_impl(&name##_spec, false, input, args, nargs,         \
                            kwnames);                                        \
    }                                                                        \
    THP_DEFINE_OP(name)                                                      \
    static PyObject *THPMethod_##name##_(PyObject *self,                     \
                                         PyObject *const *args,              \
                                         Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                        \
        return ternary_impl(&name##_spec, true, self, args, nargs, kwnames); \
    }
/* (name, op, operand names, whether it takes value=) */
#define THP_FORALL_TERNARY(_)                              \
    _(lerp, LERP, "end", "weight", 0)                      \
    _(addcmul, ADDCMUL, "tensor1", "tensor2", 1)           \
    _(addcdiv, ADDCDIV, "tensor1", "tensor2", 1)
THP_FORALL_TERNARY(THP_TERNARY_OPS)

/* ---- promotion queries --------------------------------------------------------- */

/* ember.result_type(tensor, other): each a tensor or a number. */
static PyObject *
THPFunction_result_type(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"tensor", "other"};
    PyObject *objs[2];
    THPointwiseArg operands[2];
    (void)module;
    if (THPUtils_parseArgs("result_type", args, nargs, kwnames, names, 2, 2,
                           objs)
        < 0) {
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (objs[i] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "result_type() missing required argument '%s'",
                         names[i]);
            return NULL;
        }
        if (parse_operand_arg("result_type", names[i], i + 1, objs[i],
                              &operands[i])
            < 0) {
            return NULL;
        }
    }
    THDtype dtype =
        THPointwise_resultType(2, operands, THPDtype_defaultFloat());
    return Py_NewRef(THPDtype_Get(dtype));
}

static int
parse_two_dtypes(const char *fname, const char *const *names,
                 PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 THDtype *dtypes)
{
    PyObject *objs[2];
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, 2, 2, objs)
        < 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (objs[i] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument '%s'", fname,
                         names[i]);
            return -1;
        }
        if (THPDtype_Parse(objs[i], &dtypes[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
THPFunction_promote_types(PyObject *module, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"type1", "type2"};
    THDtype dtypes[2];
    (void)module;
    if (parse_two_dtypes("promote_types", names, args, nargs, kwnames,
                         dtypes)
        < 0) {
        return NULL;
    }
    return Py_NewRef(THPDtype_Get(THDtype_promote(dtypes[0], dtypes[1])));
}

static PyObject *
THPFunction_can_cast(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"from_", "to"};
    THDtype dtypes[2];
    (void)module;
    if (parse_two_dtypes("can_cast", names, args, nargs, kwnames, dtypes)
        < 0) {
        return NULL;
    }
    return PyBool_FromLong(THPointwise_canCast(dtypes[0], dtypes[1]));
}

/* ---- tables ------------------------------------------------------------------------ */

/* Docstrings: the signature, built from the argument kind. */
#define THP_DOC_EXTRA_NONE ""
#define THP_DOC_EXTRA_TENSOR_OTHER ""
#define THP_DOC_EXTRA_ALPHA ", alpha=1"
#define THP_DOC_EXTRA_ROUNDING_MODE ", rounding_mode=None"
#define THP_DOC_EXTRA(extra) THP_DOC_##extra
#define THP_DOC_KW_EXTRA_NONE ""
#define THP_DOC_KW_EXTRA_TENSOR_OTHER ""
#define THP_DOC_KW_EXTRA_ALPHA ", *, alpha=1"
#define THP_DOC_KW_EXTRA_ROUNDING_MODE ", *, rounding_mode=None"
#define THP_DOC_KW(extra) THP_DOC_KW_##extra
#define THP_FN_ENTRY(name, OP, extra)                                        \
    THP_FUNCTION_ENTRY(#name, name,                                          \
                       #name "(input, other, *" THP_DOC_EXTRA(extra)         \
                             ", out=None) -> Tensor"),
#define THP_METHOD_ENTRIES(name, OP, extra)                                  \
    THP_METHOD_ENTRY(#name, name,                                            \
                     #name "(other" THP_DOC_KW(extra) ") -> Tensor"),        \
    THP_METHOD_ENTRY(#name "_", name##_,                                     \
                     #name "_(other" THP_DOC_KW(extra)                       \
                           ") -> Tensor: in place"),
#define THP_PLAIN_METHOD_ENTRY(name, OP, extra)                              \
    THP_METHOD_ENTRY(#name, name, #name "(other) -> Tensor"),
#define THP_UNARY_FN_ENTRY(name, OP) \
    THP_FUNCTION_ENTRY(#name, name, #name "(input, *, out=None) -> Tensor"),
#define THP_UNARY_METHOD_ENTRIES(name, OP)                   \
    THP_METHOD_ENTRY(#name, name, #name "() -> Tensor"),     \
    THP_METHOD_ENTRY(#name "_", name##_, #name "_() -> Tensor: in place"),
#define THP_CLAMP_DOC(name) #name "(input, min=None, max=None, *, out=None) -> Tensor"
#define THP_TERNARY_DOC_VALUE_0 ""
#define THP_TERNARY_DOC_VALUE_1 ", value=1"
#define THP_TERNARY_DOC_VALUE(has_value) THP_TERNARY_DOC_VALUE_##has_value
#define THP_TERNARY_FN_ENTRIES(name, OP, first, second, has_value)           \
    THP_FUNCTION_ENTRY(#name, name,                                          \
                       #name "(input, " first ", " second ", *"             \
                       THP_TERNARY_DOC_VALUE(has_value) ", out=None) -> Tensor"),
#define THP_TERNARY_METHOD_ENTRIES(name, OP, first, second, has_value)       \
    THP_METHOD_ENTRY(#name, name, #name "(" first ", " second ") -> Tensor"), \
    THP_METHOD_ENTRY(#name "_", name##_,                                     \
                     #name "_(" first ", " second ") -> Tensor: in place"),

/* _stream_threshold([nbytes]): the smallest result, in bytes, written with
 * streaming stores (Note [Streaming stores] in c/th/THStream.h); with
 * nbytes, sets it first (0: the default).  Tests use a small one. */
static PyObject *
THPPointwise_stream_threshold(PyObject *module, PyObject *args)
{
    (void)module;
    Py_ssize_t nbytes = -1;
    if (!PyArg_ParseTuple(args, "|n:_stream_threshold", &nbytes)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) > 0) {
        if (nbytes < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "_stream_threshold: nbytes must be >= 0");
            return NULL;
        }
        THStream_setThreshold((size_t)nbytes);
    }
    return PyLong_FromSize_t(THStream_threshold());
}

/* _streamed_runs(): how many pointwise executions so far wrote their
 * result with streaming stores, the copy family of the block path, and how
 * many threads' ranges took a fused streaming loop instead. */
static PyObject *
THPPointwise_streamed_runs(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return Py_BuildValue("(LsL)", (long long)THPointwise_streamedRuns(),
                         THStream_kernelName(),
                         (long long)THPointwise_fusedStreamingRanges());
}

PyMethodDef THPPointwise_functions[] = {
    THP_FORALL_BINARY(THP_FN_ENTRY)
    THP_FORALL_BINARY_NO_INPLACE(THP_FN_ENTRY)
    THP_FORALL_UNARY(THP_UNARY_FN_ENTRY)
    THP_FUNCTION_ENTRY("positive", positive,
                       "positive(input) -> Tensor: input itself"),
    THP_FUNCTION_ENTRY("clamp", clamp, THP_CLAMP_DOC(clamp)),
    THP_FUNCTION_ENTRY("clip", clip, THP_CLAMP_DOC(clip)),
    THP_FORALL_TERNARY(THP_TERNARY_FN_ENTRIES)
    {"where", THP_FASTCALL_KW(THPFunction_where),
     METH_FASTCALL | METH_KEYWORDS,
     "where(condition, input, other, *, out=None)"},
    {"result_type", THP_FASTCALL_KW(THPFunction_result_type),
     METH_FASTCALL | METH_KEYWORDS,
     "The dtype an operation on tensor and other computes in."},
    {"promote_types", THP_FASTCALL_KW(THPFunction_promote_types),
     METH_FASTCALL | METH_KEYWORDS,
     "The smallest dtype both type1 and type2 convert to."},
    {"can_cast", THP_FASTCALL_KW(THPFunction_can_cast),
     METH_FASTCALL | METH_KEYWORDS,
     "Whether PyTorch's casting rules allow from_ -> to."},
    {"_stream_threshold", THPPointwise_stream_threshold, METH_VARARGS,
     "_stream_threshold([nbytes]) -> int: the smallest result written with "
     "streaming stores"},
    {"_streamed_runs", THPPointwise_streamed_runs, METH_NOARGS,
     "_streamed_runs() -> (int, str): results written with streaming "
     "stores so far, and the store family"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_pointwise_methods[] = {
    THP_FORALL_BINARY(THP_METHOD_ENTRIES)
    THP_FORALL_BINARY_NO_INPLACE(THP_PLAIN_METHOD_ENTRY)
    THP_FORALL_UNARY(THP_UNARY_METHOD_ENTRIES)
    THP_METHOD_ENTRY("positive", positive, "positive() -> Tensor: self"),
    THP_METHOD_ENTRY("clamp", clamp, "clamp(min=None, max=None) -> Tensor"),
    THP_METHOD_ENTRY("clamp_", clamp_, "clamp_(min=None, max=None): in place"),
    THP_METHOD_ENTRY("clip", clip, "clip(min=None, max=None) -> Tensor"),
    THP_METHOD_ENTRY("clip_", clip_, "clip_(min=None, max=None): in place"),
    THP_FORALL_TERNARY(THP_TERNARY_METHOD_ENTRIES)
    {"where", THP_FASTCALL_KW(THPMethod_where), METH_FASTCALL | METH_KEYWORDS,
     "where(condition, other)"},
    {NULL, NULL, 0, NULL},
};

void
THPPointwise_initTypeSlots(PyTypeObject *type, PyNumberMethods *number)
{
    number->nb_add = THPVariable_add;
    number->nb_subtract = THPVariable_subtract;
    number->nb_multiply = THPVariable_multiply;
    number->nb_true_divide = THPVariable_true_divide;
    number->nb_floor_divide = THPVariable_floor_divide;
    number->nb_remainder = THPVariable_remainder;
    number->nb_power = THPVariable_power;
    number->nb_and = THPVariable_and;
    number->nb_or = THPVariable_or;
    number->nb_xor = THPVariable_xor;
    number->nb_lshift = THPVariable_lshift;
    number->nb_rshift = THPVariable_rshift;
    number->nb_inplace_add = THPVariable_inplace_add;
    number->nb_inplace_subtract = THPVariable_inplace_subtract;
    number->nb_inplace_multiply = THPVariable_inplace_multiply;
    number->nb_inplace_true_divide = THPVariable_inplace_true_divide;
    number->nb_inplace_floor_divide = THPVariable_inplace_floor_divide;
    number->nb_inplace_remainder = THPVariable_inplace_remainder;
    number->nb_inplace_power = THPVariable_inplace_power;
    number->nb_inplace_and = THPVariable_inplace_and;
    number->nb_inplace_or = THPVariable_inplace_or;
    number->nb_inplace_xor = THPVariable_inplace_xor;
    number->nb_inplace_lshift = THPVariable_inplace_lshift;
    number->nb_inplace_rshift = THPVariable_inplace_rshift;
    number->nb_negative = THPVariable_negative;
    number->nb_positive = positive;
    number->nb_absolute = THPVariable_absolute;
    number->nb_invert = THPVariable_invert;
    /* Elementwise ==, so tensors hash by identity (tp_hash, set by
     * Variable.c, must stay: a type defining tp_richcompare without it is
     * unhashable). */
    type->tp_richcompare = THPVariable_richcompare;
    if (type->tp_hash == NULL) {
        type->tp_hash = PyBaseObject_Type.tp_hash;
    }
}
