/*
 * Device.c -- devices: parsing them, and the one point where an operator
 * call picks the CPU kernels or a device's launcher.
 *
 * Note [One dispatch point]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * PyTorch's dispatcher picks a kernel by the dispatch keys of a call's
 * tensors (CPU, CUDA, Autograd, ...), computed from every tensor argument.
 * ember has one such point too, and it is the pin frame (Note [Pinned
 * arguments] in THP.h): every C entry point that takes tensors pins them
 * first, so pinning notes each tensor's device (frame->devices) and then
 * THPDevice_placement says where the call runs:
 *   - 0, the CPU: no tensor, or all on the CPU.  The C implementation runs
 *     as it always has; the check costs one OR per tensor and one test;
 *   - 1, CUDA: the caller never runs its C implementation, whose kernels
 *     would read device memory as host memory.  It hands the call, as it
 *     was made, to the launcher registered for the device
 *     (ember._C._register_device_backend), which returns the result;
 *   - -1: tensors on several devices, PyTorch's error.  A 0-dim CPU tensor
 *     goes with tensors of any device (PyTorch's TensorIterator treats it
 *     as a scalar), and entry points that move data between devices
 *     (copy_, indexing with CPU indices) accept any mix: their launcher
 *     decides.
 * A few entry points run their C implementation on any device
 * (THP_DEVICE_ANY, THPDevice_ruleOf): they read metadata only (size(),
 * views) or handle the device themselves (numpy() raises, to() moves).
 * The Python number protocol (float(t), bool(t)) reads data outside any
 * frame: it sends device tensors to the launcher itself.
 *
 * Memory for device tensors comes from the allocator registered for the
 * device (c/th/THAllocator.h), so a CUDA allocator written in Python can
 * make CUDA tensors on a machine without a GPU: their addresses are never
 * dereferenced on the host, which is what tests/test_cuda_host.py checks.
 *
 * The first CUDA use that finds no allocator or no launcher calls the
 * device's initializer (ember.cuda._lazy_init, as PyTorch's
 * torch.cuda._lazy_init), which installs CuPy's allocator and launcher, or
 * raises the error naming what is missing (CuPy, the driver, a GPU).
 */
#include "THP.h"

#include <stdlib.h>
#include <string.h>

PyObject *THPDevice_cuda = NULL;

/* Module-lifetime strong references, or NULL: per device, the launcher
 * that runs operators on its tensors and the initializer run on first use. */
static PyObject *launchers[TH_NUM_DEVICE_TYPES];
static PyObject *initializers[TH_NUM_DEVICE_TYPES];

static const char *
device_type_name(THDeviceType device)
{
    return device == TH_DEVICE_CUDA ? "cuda" : "cpu";
}

/* How PyTorch's messages name a device: "cpu", "cuda:0". */
static const char *
device_display_name(THDeviceType device)
{
    return device == TH_DEVICE_CUDA ? "cuda:0" : "cpu";
}

PyObject *
THPDevice_Get(THDeviceType device)
{
    PyObject *obj = device == TH_DEVICE_CUDA ? THPDevice_cuda : THPDevice_cpu;
    if (obj == NULL) { /* before the Python package registered them */
        return PyUnicode_FromString(device_display_name(device));
    }
    return Py_NewRef(obj);
}

/* ---- parsing ------------------------------------------------------------- */

/* The core has one CUDA device: cuda:0 (no index means the current one,
 * which is it).  0, or -1 with PyTorch's error for another index. */
static int
check_index(THDeviceType device, long long index, PyObject *obj)
{
    if (index < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "Device index must not be negative, got %R", obj);
        return -1;
    }
    if (index > 0 && device == TH_DEVICE_CUDA) {
        PyErr_Format(PyExc_RuntimeError,
                     "CUDA error: invalid device ordinal (ember runs CUDA "
                     "tensors on cuda:0 only; got %R)",
                     obj);
        return -1;
    }
    return 0;
}

/* The type and index of "cpu", "cuda", "cuda:1". */
static int
parse_device_string(PyObject *obj, THDeviceType *out, long long *index)
{
    const char *text = PyUnicode_AsUTF8(obj);
    if (text == NULL) {
        return -1;
    }
    const char *colon = strchr(text, ':');
    size_t type_length = colon != NULL ? (size_t)(colon - text) : strlen(text);
    if (type_length == 3 && strncmp(text, "cpu", 3) == 0) {
        *out = TH_DEVICE_CPU;
    }
    else if (type_length == 4 && strncmp(text, "cuda", 4) == 0) {
        *out = TH_DEVICE_CUDA;
    }
    else {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected one of cpu, cuda device type at start of "
                     "device string: %s",
                     text);
        return -1;
    }
    *index = 0;
    if (colon != NULL) {
        char *end;
        *index = strtoll(colon + 1, &end, 10);
        if (colon[1] == '\0' || colon[1] == '-' || *end != '\0') {
            PyErr_Format(PyExc_RuntimeError, "Invalid device string: '%s'",
                         text);
            return -1;
        }
    }
    return 0;
}

/* The type and index of an ember.device (or anything with .type and
 * .index). */
static int
parse_device_object(PyObject *obj, THDeviceType *out, long long *index)
{
    PyObject *type_name = PyObject_GetAttrString(obj, "type");
    if (type_name == NULL || !PyUnicode_Check(type_name)) {
        Py_XDECREF(type_name);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "expected a device (e.g. 'cpu' or 'cuda'), got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int status = parse_device_string(type_name, out, index);
    Py_DECREF(type_name);
    if (status < 0) {
        return -1;
    }
    PyObject *index_obj = PyObject_GetAttrString(obj, "index");
    if (index_obj == NULL) {
        PyErr_Clear(); /* no index: the current device */
        return 0;
    }
    if (index_obj != Py_None) {
        *index = PyLong_AsLongLong(index_obj);
    }
    Py_DECREF(index_obj);
    return *index == -1 && PyErr_Occurred() ? -1 : 0;
}

int
THPDevice_Parse(PyObject *obj, THDeviceType *out)
{
    long long index = 0;
    int status;
    if (obj == NULL || obj == Py_None) {
        *out = TH_DEVICE_CPU;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        status = parse_device_string(obj, out, &index);
    }
    else if (PyLong_CheckExact(obj)) {
        /* PyTorch reads a bare int as a CUDA device's index. */
        *out = TH_DEVICE_CUDA;
        index = PyLong_AsLongLong(obj);
        status = index == -1 && PyErr_Occurred() ? -1 : 0;
    }
    else {
        status = parse_device_object(obj, out, &index);
    }
    return status < 0 ? -1 : check_index(*out, index, obj);
}

/* ---- first use: the initializer ------------------------------------------ */

/* Runs the device's initializer: 0 when it returned (it installed what it
 * could), -1 with its exception when it raised. */
static int
run_initializer(THDeviceType device)
{
    PyObject *initializer = initializers[device];
    if (initializer == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "ember has no %s support: nothing registered an "
                     "initializer for it",
                     device_type_name(device));
        return -1;
    }
    Py_INCREF(initializer); /* ours for the call: it may re-register */
    PyObject *result = PyObject_CallNoArgs(initializer);
    Py_DECREF(initializer);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

int
THPDevice_ensureAllocator(THDeviceType device)
{
    if (device == TH_DEVICE_CPU || THAllocator_get(device) != NULL) {
        return 0;
    }
    if (run_initializer(device) < 0) {
        return -1;
    }
    if (THAllocator_get(device) == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "no allocator is installed for device '%s' (see "
                     "ember.memory.set_allocator)",
                     device_type_name(device));
        return -1;
    }
    return 0;
}

/* ---- placement: where a call runs ---------------------------------------- */

/* PyTorch's error, naming the first two devices in argument order. */
static int
mixed_devices_error(THPPinFrame *frame)
{
    bool has_device = false;
    THDeviceType first = TH_DEVICE_CPU, second = TH_DEVICE_CPU;
    for (Py_ssize_t i = 0; i < frame->pinned_count; i++) {
        THTensor *tensor = frame->kept[i];
        THDeviceType device = tensor->storage->device;
        if (device == TH_DEVICE_CPU && tensor->ndim == 0) {
            continue; /* a CPU scalar goes with any device */
        }
        if (!has_device) {
            first = device;
            has_device = true;
        }
        else if (device != first) {
            second = device;
            break;
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found "
                 "at least two devices, %s and %s!",
                 device_display_name(first), device_display_name(second));
    return -1;
}

int
THPDevice_placement(THPPinFrame *frame)
{
    const unsigned cpu = 1u << TH_DEVICE_CPU;
    if ((frame->devices & ~cpu) == 0) {
        return 0;
    }
    if ((frame->devices & cpu) != 0 && !frame->allows_mixed_devices) {
        return mixed_devices_error(frame);
    }
    return 1; /* CUDA: the only device besides the CPU */
}

/* ---- launching ----------------------------------------------------------- */

static bool
name_in(const char *name, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(name, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* The CUDA launcher as a new reference (it may unregister itself while it
 * runs), or NULL with the error that says why there is none. */
static PyObject *
cuda_launcher(PyObject *name)
{
    if (launchers[TH_DEVICE_CUDA] == NULL
        && run_initializer(TH_DEVICE_CUDA) < 0) {
        return NULL;
    }
    if (launchers[TH_DEVICE_CUDA] == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "%U: no CUDA backend is registered to run operators "
                     "on CUDA tensors (ember has CUDA memory but no CUDA "
                     "kernels yet; ember._C._register_device_backend('cuda', "
                     "launcher) installs a launcher)",
                     name);
        return NULL;
    }
    return Py_NewRef(launchers[TH_DEVICE_CUDA]);
}

/* The positional arguments as a tuple, self first when given. */
static PyObject *
positional_tuple(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t offset = self != NULL ? 1 : 0;
    PyObject *tuple = PyTuple_New(nargs + offset);
    if (tuple == NULL) {
        return NULL;
    }
    if (self != NULL) {
        PyTuple_SET_ITEM(tuple, 0, Py_NewRef(self));
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyTuple_SET_ITEM(tuple, i + offset, Py_NewRef(args[i]));
    }
    return tuple;
}

/* The keyword arguments (after the positionals in a vectorcall array) as
 * a new dict. */
static PyObject *
keyword_dict(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *kwargs = PyDict_New();
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; kwargs != NULL && i < nkw; i++) {
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i),
                           args[nargs + i])
            < 0) {
            Py_CLEAR(kwargs);
        }
    }
    return kwargs;
}

/* Note [Versions of tensors written on a device]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * On the CPU the core's in-place writes bump the written tensor's version
 * counter (autograd's check that a saved tensor was not changed since).
 * A launcher writes device memory with kernels and cudaMemcpy, which know
 * nothing of versions, so the dispatch bumps them when the call returns,
 * by PyTorch's naming rule for what a call writes: the first argument of
 * an in-place operator (a name ending in one underscore: mul_, copy_, or
 * Tensor.uniform_), of an in-place number slot (__iadd__, ...) and of
 * __setitem__, and every tensor passed as out=.  copy_ from the device
 * into a CPU tensor bumps the CPU tensor, as its CPU copy_ would.
 *
 * Once, even when the launcher wrote through a CPU operator that bumps by
 * itself: copy_ into a strided CPU tensor, or one of another dtype, ends
 * in the CPU's copy_ from a host temporary.  So the first argument is
 * bumped only if its version is still the one read before the launch.
 * (out= tensors are always device tensors, written by kernels: a CPU out=
 * with device inputs is refused before any write.) */
static bool
writes_first_argument(PyObject *name)
{
    static const char *const inplace_slots[] = {
        "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
        "__imod__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
        "__irshift__", "__ipow__", "__imatmul__", "__setitem__"};
    Py_ssize_t length;
    const char *text = PyUnicode_AsUTF8AndSize(name, &length);
    if (text == NULL) {
        PyErr_Clear(); /* a name that is not text names no in-place op */
        return false;
    }
    if (name_in(text, inplace_slots,
                sizeof(inplace_slots) / sizeof(inplace_slots[0]))) {
        return true;
    }
    /* mul_, not __add__ */
    return length >= 2 && text[length - 1] == '_' && text[length - 2] != '_';
}

static void
bump_if_tensor(PyObject *obj)
{
    if (THPVariable_Check(obj)) {
        THTensor_bumpVersion(THPVariable_Unpack(obj));
    }
}

/* The version of the tensor the call writes in place, read before the
 * launch, or -1 when it writes no first argument (Note [Versions of
 * tensors written on a device]). */
static int64_t
first_argument_version(PyObject *name, PyObject *positional)
{
    if (PyTuple_GET_SIZE(positional) == 0 || !writes_first_argument(name)) {
        return -1;
    }
    PyObject *first = PyTuple_GET_ITEM(positional, 0); /* borrowed */
    if (!THPVariable_Check(first)) {
        return -1;
    }
    return THPVariable_Unpack(first)->version_counter->version;
}

/* After a successful launch: Note [Versions of tensors written on a
 * device]; first_version as first_argument_version read it.  Runs no
 * Python code. */
static void
bump_written_versions(PyObject *positional, int64_t first_version,
                      PyObject *keywords)
{
    if (first_version >= 0) {
        THTensor *first = THPVariable_Unpack(PyTuple_GET_ITEM(positional, 0));
        if (first->version_counter->version == first_version) {
            THTensor_bumpVersion(first); /* not bumped by a CPU write */
        }
    }
    PyObject *out = PyDict_GetItemString(keywords, "out"); /* borrowed */
    if (out == NULL) {
        return;
    }
    if (PyTuple_Check(out) || PyList_Check(out)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(out); i++) {
            bump_if_tensor(PySequence_Fast_GET_ITEM(out, i));
        }
        return;
    }
    bump_if_tensor(out);
}

PyObject *
THPDevice_launch(PyObject *name, PyObject *self, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *launcher = cuda_launcher(name);
    if (launcher == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *positional = positional_tuple(self, args, nargs);
    PyObject *keywords =
        positional == NULL ? NULL : keyword_dict(args, nargs, kwnames);
    if (keywords != NULL) {
        int64_t first_version = first_argument_version(name, positional);
        result = PyObject_CallFunctionObjArgs(launcher, name, positional,
                                              keywords, NULL);
        if (result != NULL) {
            bump_written_versions(positional, first_version, keywords);
        }
    }
    Py_XDECREF(keywords);
    Py_XDECREF(positional);
    Py_DECREF(launcher);
    return result;
}

PyObject *
THPDevice_launchNamed(const char *fname, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *name = PyUnicode_InternFromString(fname);
    if (name == NULL) {
        return NULL;
    }
    PyObject *result = THPDevice_launch(name, NULL, args, nargs, kwnames);
    Py_DECREF(name);
    return result;
}

PyObject *
THPDevice_launchSlot(const char *dunder, PyObject *const *operands,
                     Py_ssize_t n)
{
    return THPDevice_launchNamed(dunder, operands, n, NULL);
}

/* ---- which entry points run on any device -------------------------------- */

/* Metadata only (sizes, strides, views), or the device handled inside. */
static const char *const runs_on_any_device[] = {
    "size", "stride", "storage_offset", "dim", "ndimension", "numel",
    "nelement", "is_contiguous", "is_floating_point", "data_ptr",
    "element_size", "requires_grad_", "detach", "detach_", "view",
    "view_as", "transpose", "t", "permute", "squeeze", "unsqueeze",
    "expand", "expand_as", "select", "as_strided", "unfold", "narrow",
    "split", "chunk", "tensor_split", "unbind",
    "result_type", /* dtypes only, any mix of devices as PyTorch's */
    /* these check the device themselves: */
    "numpy", "__array__", "__dlpack_device__", "__dlpack__", "from_dlpack",
    "to", "empty_like",
    "_adam_step_", /* False off the CPU: Python runs the op-by-op update */
};

/* Move data between devices: their tensors may sit on several. */
static const char *const crosses_devices[] = {"copy_"};

THPDeviceRule
THPDevice_ruleOf(const char *name)
{
#define THP_COUNT(array) (sizeof(array) / sizeof((array)[0]))
    if (name_in(name, runs_on_any_device, THP_COUNT(runs_on_any_device))) {
        return THP_DEVICE_ANY;
    }
    if (name_in(name, crosses_devices, THP_COUNT(crosses_devices))) {
        return THP_DEVICE_MIXED;
    }
    return THP_DEVICE_SAME;
#undef THP_COUNT
}

/* ---- module functions ---------------------------------------------------- */

/* Replaces slots[device] by `value` (None: empty) and returns the previous
 * value (None when empty).  The argument is a device type only. */
static PyObject *
exchange_slot(PyObject **slots, const char *fname, PyObject *const *args,
              Py_ssize_t nargs)
{
    THDeviceType device;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s(device, fn) takes 2 arguments",
                     fname);
        return NULL;
    }
    if (THPDevice_Parse(args[0], &device) < 0) {
        return NULL;
    }
    if (device == TH_DEVICE_CPU) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the CPU runs ember's C kernels; only other "
                     "devices take one",
                     fname);
        return NULL;
    }
    if (args[1] != Py_None && !PyCallable_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "%s: expected a callable or None, got %s",
                     fname, Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    PyObject *previous = slots[device];
    slots[device] = args[1] == Py_None ? NULL : Py_NewRef(args[1]);
    return previous != NULL ? previous : Py_NewRef(Py_None);
}

/* _register_device_backend(device, launcher) -> the previous launcher.
 * launcher(name, args, kwargs) runs one call on the device's tensors. */
static PyObject *
THPDevice_register_backend(PyObject *module, PyObject *const *args,
                           Py_ssize_t nargs)
{
    (void)module;
    return exchange_slot(launchers, "_register_device_backend", args, nargs);
}

/* _set_device_initializer(device, fn) -> the previous initializer. */
static PyObject *
THPDevice_set_initializer(PyObject *module, PyObject *const *args,
                          Py_ssize_t nargs)
{
    (void)module;
    return exchange_slot(initializers, "_set_device_initializer", args,
                         nargs);
}

PyMethodDef THPDevice_methods[] = {
    {"_register_device_backend",
     (PyCFunction)(void (*)(void))THPDevice_register_backend, METH_FASTCALL,
     "_register_device_backend(device, launcher or None) -> previous: "
     "launcher(name, args, kwargs) runs the operator calls whose tensors "
     "live on `device`."},
    {"_set_device_initializer",
     (PyCFunction)(void (*)(void))THPDevice_set_initializer, METH_FASTCALL,
     "_set_device_initializer(device, fn or None) -> previous: fn() runs "
     "when a use of `device` finds no allocator or launcher; it installs "
     "them or raises why it cannot."},
    {NULL, NULL, 0, NULL},
};
