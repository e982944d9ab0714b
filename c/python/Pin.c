/*
 * Pin.c -- pin frames: an entry point owns the tensors it touches.
 *
 * See Note [Pinned arguments] in THP.h for the rule and why it is needed.
 * A frame lives on the C stack of the entry point that opened it; this
 * thread's open frames form a stack through `outer`.
 */
#include "THP.h"

#include <string.h>

/* initial-exec: the entry points read this on every call, and the
 * extension is loaded once, so the faster TLS model is safe. */
__attribute__((tls_model("initial-exec"))) _Thread_local THPPinFrame
    *THPPin_top = NULL;

/* Grows one of the frame's arrays (inline storage first, then the heap). */
static int
grow(void **array, void *inline_storage, Py_ssize_t *capacity,
     Py_ssize_t count, size_t item_size)
{
    if (count < *capacity) {
        return 0;
    }
    Py_ssize_t wanted = *capacity * 2;
    void *bigger = PyMem_Malloc((size_t)wanted * item_size);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(bigger, *array, (size_t)count * item_size);
    if (*array != inline_storage) {
        PyMem_Free(*array);
    }
    *array = bigger;
    *capacity = wanted;
    return 0;
}

/* Appends `tensor` (retained here) to the frame's kept references. */
static inline int
keep(THPPinFrame *frame, THTensor *tensor)
{
    if (frame->kept_count == frame->kept_capacity
        && grow((void **)&frame->kept, frame->inline_kept,
                &frame->kept_capacity, frame->kept_count, sizeof(THTensor *))
               < 0) {
        return -1;
    }
    THTensor_retain(tensor); /* released by THPPin_exit */
    frame->kept[frame->kept_count++] = tensor;
    return 0;
}

/* Notes where a pinned tensor lives, for THPDevice_placement (a 0-dim
 * CPU tensor goes with any device, as PyTorch's scalars do). */
static inline void
note_device(THPPinFrame *frame, THTensor *tensor)
{
    THDeviceType device = tensor->storage->device;
    if (device == TH_DEVICE_CPU && tensor->ndim == 0) {
        frame->has_cpu_scalar = true;
    }
    else {
        frame->devices |= 1u << device;
    }
}

/* Pins one tensor object: remembers it and keeps its THTensor. */
static inline int
pin_tensor(THPPinFrame *frame, PyObject *obj)
{
    THTensor *tensor = ((THPVariable *)obj)->cdata;
    if ((frame->pinned_count == frame->objects_capacity
         && grow((void **)&frame->objects, frame->inline_objects,
                 &frame->objects_capacity, frame->pinned_count,
                 sizeof(PyObject *))
                < 0)
        || keep(frame, tensor) < 0) {
        return -1;
    }
    /* The same index as the kept reference: kept[i] is objects[i]'s
     * THTensor for i < pinned_count (pins come before THPPin_keepAlive). */
    frame->objects[frame->pinned_count++] = obj;
    note_device(frame, tensor);
    return 0;
}

/* Pins `obj` when it is a tensor, and each tensor item of a tuple or of
 * a list only this frame can reach (its private copy).  Items of any
 * other list are left alone: Python code may remove them, and a freed
 * item's address could come back as another object. */
static int
pin_object(THPPinFrame *frame, PyObject *obj, bool private_list)
{
    if (THPVariable_Check(obj)) {
        return pin_tensor(frame, obj);
    }
    if (PyTuple_Check(obj) || (private_list && PyList_CheckExact(obj))) {
        /* The container (held by the caller or by this frame) keeps its
         * items alive, and nobody can change them. */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(obj, i);
            if (THPVariable_Check(item) && pin_tensor(frame, item) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

THTensor *
THPPin_lookup(THPPinFrame *frame, PyObject *obj)
{
    /* Operators unpack their arguments in order, so the search starts
     * after the last hit: cat() of n tensors costs O(n), not O(n^2). */
    Py_ssize_t n = frame->pinned_count;
    for (Py_ssize_t k = 0, i = frame->cursor; k < n; k++, i++) {
        if (i == n) {
            i = 0;
        }
        if (frame->objects[i] == obj) {
            frame->cursor = i + 1 == n ? 0 : i + 1;
            return frame->kept[i];
        }
    }
    return ((THPVariable *)obj)->cdata;
}

void
THPPin_enter(THPPinFrame *frame)
{
    frame->objects = frame->inline_objects;
    frame->pinned_count = 0;
    frame->objects_capacity = THP_PIN_INLINE;
    frame->cursor = 0;
    frame->kept = frame->inline_kept;
    frame->kept_count = 0;
    frame->kept_capacity = THP_PIN_INLINE;
    frame->args = NULL;
    frame->nargs = 0;
    frame->devices = 0;
    frame->has_cpu_scalar = false;
    frame->allows_mixed_devices = false;
    frame->outer = THPPin_top;
    THPPin_top = frame;
}

static int
pin_each(THPPinFrame *frame, PyObject *const *objects, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = objects[i];
        if (obj == NULL || THPPin_holdsNoTensor(obj)) {
            continue;
        }
        int rc = Py_IS_TYPE(obj, THPVariableClass) ? pin_tensor(frame, obj)
                                                   : pin_object(frame, obj,
                                                                false);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

/* Whether some argument is a list (it gets a private copy). */
static inline int
has_list(PyObject *const *args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Check(args[i])) {
            return 1;
        }
    }
    return 0;
}

/* The commonest frame: one tensor, first, in a frame with nothing pinned
 * yet (so its inline arrays have room).  What pin_tensor does, without
 * the growth checks; the call runs where that one tensor lives. */
int
THPPin_self(THPPinFrame *frame, PyObject *obj)
{
    THTensor *tensor = ((THPVariable *)obj)->cdata;
    THTensor_retain(tensor); /* released by THPPin_exit */
    frame->kept[0] = tensor;
    frame->objects[0] = obj;
    frame->kept_count = frame->pinned_count = 1;
    note_device(frame, tensor);
    return tensor->storage->device == TH_DEVICE_CPU ? 0 : 1;
}

int
THPPin_objects(THPPinFrame *frame, PyObject *const *objects, Py_ssize_t n)
{
    if (frame->pinned_count == 0 && frame->kept_count == 0
        && THPPin_onlySelfIsTensor(objects, n)) {
        return THPPin_self(frame, objects[0]);
    }
    if (pin_each(frame, objects, n) < 0) {
        return -1;
    }
    return THPDevice_placement(frame);
}

int
THPPin_args(THPPinFrame *frame, PyObject *const *args, Py_ssize_t n,
            PyObject *const **pinned_args)
{
    *pinned_args = args;
    if (frame->pinned_count == 0 && frame->kept_count == 0
        && THPPin_onlySelfIsTensor(args, n)) {
        return THPPin_self(frame, args[0]);
    }
    if (__builtin_expect(has_list(args, n), 0)) {
        /* A copy of the argument array in which every list is replaced by
         * a private copy: a new list of the same items, which no Python
         * code can reach, so none can clear it (new references, dropped by
         * THPPin_exit).  A list, not a tuple: messages that name the
         * argument's type stay the same. */
        PyObject **copy = n <= THP_PIN_INLINE
                              ? frame->inline_args
                              : PyMem_Malloc((size_t)n * sizeof(PyObject *));
        if (copy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        frame->args = copy;
        for (Py_ssize_t i = 0; i < n; i++) {
            copy[i] = PyList_Check(args[i])
                          ? PyList_GetSlice(args[i], 0, PY_SSIZE_T_MAX)
                          : Py_NewRef(args[i]);
            if (copy[i] == NULL) {
                frame->nargs = i;
                return -1;
            }
        }
        frame->nargs = n;
        *pinned_args = copy;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (pin_object(frame, copy[i], true) < 0) {
                return -1;
            }
        }
        return THPDevice_placement(frame);
    }
    if (pin_each(frame, args, n) < 0) {
        return -1;
    }
    return THPDevice_placement(frame);
}

/* The outermost frame of this thread: what it keeps alive lives until the
 * whole (possibly nested) call is over. */
static THPPinFrame *
outermost(void)
{
    THPPinFrame *frame = THPPin_top;
    while (frame != NULL && frame->outer != NULL) {
        frame = frame->outer;
    }
    return frame;
}

int
THPPin_keepAlive(THTensor *tensor)
{
    THPPinFrame *frame = outermost();
    if (frame == NULL) {
        return 0;
    }
    return keep(frame, tensor);
}

void
THPPin_exit(THPPinFrame *frame)
{
    THPPin_top = frame->outer;
    /* Releasing can run Python (a Python allocator's free, a deleter):
     * the frame is already off the stack, and nothing below touches a
     * borrowed pointer. */
    for (Py_ssize_t i = 0; i < frame->kept_count; i++) {
        THTensor_release(frame->kept[i]);
    }
    if (frame->kept != frame->inline_kept) {
        PyMem_Free(frame->kept);
    }
    if (frame->objects != frame->inline_objects) {
        PyMem_Free(frame->objects);
    }
    if (frame->args != NULL) {
        for (Py_ssize_t i = 0; i < frame->nargs; i++) {
            Py_DECREF(frame->args[i]);
        }
        if (frame->args != frame->inline_args) {
            PyMem_Free(frame->args);
        }
    }
}

PyObject *
THPPin_callBinary(const char *name, binaryfunc fn, PyObject *a, PyObject *b,
                  bool allows_mixed_devices)
{
    PyObject *objects[2] = {a, b};
    THPPinFrame frame;
    THPPin_enter(&frame);
    frame.allows_mixed_devices = allows_mixed_devices;
    PyObject *result = NULL, *routed;
    switch (THPPin_objects(&frame, objects, 2)) {
    case 0: result = fn(a, b); break;
    case 1: /* another device: autograd first, as fn does on the CPU */
        result = THPAutograd_maybeDispatch(name, objects, 2, &routed)
                     ? routed
                     : THPDevice_launchSlot(name, objects, 2);
        break;
    default: break;
    }
    THPPin_exit(&frame);
    return result;
}

/* _C._pin_depth(): how many pin frames this thread has open (tests). */
PyObject *
THPPin_depth(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    long depth = 0;
    for (THPPinFrame *f = THPPin_top; f != NULL; f = f->outer) {
        depth++;
    }
    return PyLong_FromLong(depth);
}
