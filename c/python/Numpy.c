/*
 * Numpy.c -- zero-copy exchange with NumPy and anything else that speaks
 * the buffer protocol (PEP 3118) or DLPack.
 *
 * Note [Zero-copy lifetime]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * Importing (ember.from_numpy(a), ember.from_dlpack(x)): the tensor's
 * THStorage points straight at the exporter's memory and its deleter
 * releases the exporter's hold (PyBuffer_Release on our Py_buffer, or the
 * DLPack deleter).  The Py_buffer holds a reference to the exporter, so the
 * exporter lives exactly as long as the storage: not one tensor longer,
 * not one tensor shorter.  With t = ember.from_numpy(a):
 *     a += 1        writes the shared memory: t sees it;
 *     a = a + 1     makes a new array and rebinds the name: t still views
 *                   the old one, which it keeps alive.
 * Exporting (t.numpy()): the ndarray points at the tensor's memory and its
 * base is the tensor's storage (an ember.UntypedStorage, set with
 * PyArray_SetBaseObject), so the memory outlives the array.  Not the
 * tensor object: `t.data = other` replaces the tensor's THTensor, and the
 * old storage would go with it while the array still points into it.
 * DLPack export retains the THTensor in the capsule's context; the
 * consumer's deleter releases it.
 */
#include "THP.h"

#include "DLPack.h"

#include <numpy/arrayobject.h>

/* ---- buffer protocol import --------------------------------------------------- */

/* Storage deleter for memory lent through the buffer protocol; the context
 * is the heap-allocated Py_buffer.  May run without the GIL (a kernel may
 * drop the last reference), so it takes the GIL itself. */
static void
release_buffer(void *context, void *data)
{
    (void)data;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_buffer *view = context;
    PyBuffer_Release(view); /* drops view->obj, the exporter */
    PyMem_Free(view);
    PyGILState_Release(gil);
}

/* Validates a Py_buffer's layout and computes what the tensor needs. */
static int
check_buffer_layout(const Py_buffer *view, THDtype *dtype, int64_t *sizes,
                    int64_t *strides, int64_t *nbytes)
{
    if (THDtype_fromBufferFormat(view->format, (int)view->itemsize, dtype)
        < 0) {
        THPUtils_setErrorFromTH();
        return -1;
    }
    if (view->ndim > TH_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "can't share a buffer of %d dimensions: ember tensors "
                     "have at most %d",
                     view->ndim, TH_MAX_DIMS);
        return -1;
    }
    if (view->suboffsets != NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "can't share a buffer with suboffsets (PIL-style "
                        "indirect arrays); copy it into a contiguous array "
                        "first");
        return -1;
    }
    int64_t last = 0, numel = 1;
    for (int d = 0; d < view->ndim; d++) {
        Py_ssize_t stride = view->strides != NULL ? view->strides[d] : 0;
        sizes[d] = view->shape[d];
        numel *= sizes[d];
        if (stride < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "At least one stride in the given numpy array "
                            "is negative, and tensors with negative strides "
                            "are not currently supported. (You can probably "
                            "work around this by making a copy of your array "
                            " with array.copy().)");
            return -1;
        }
        if (stride % view->itemsize != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "given numpy array strides not a multiple of the "
                            "element byte size. Copy the numpy array to "
                            "reallocate the memory.");
            return -1;
        }
        strides[d] = stride / view->itemsize;
        last += (sizes[d] - 1) * strides[d];
    }
    if (view->strides == NULL) {
        THTensor_contiguousStrides(view->ndim, sizes, strides);
        last = numel - 1;
    }
    *nbytes = numel == 0 ? 0 : (last + 1) * view->itemsize;
    return 0;
}

THTensor *
THPNumpy_tensorFromBuffer(PyObject *obj)
{
    THDtype dtype;
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS], nbytes;
    Py_buffer *view = PyMem_Malloc(sizeof(Py_buffer));
    if (view == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    /* Strides and format, writable or not: a read-only buffer becomes a
     * read-only tensor. */
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0) {
        PyMem_Free(view);
        return NULL;
    }
    if (check_buffer_layout(view, &dtype, sizes, strides, &nbytes) < 0) {
        PyBuffer_Release(view);
        PyMem_Free(view);
        return NULL;
    }
    THStorage *storage = THStorage_newExternal(
        view->buf, nbytes, TH_DEVICE_CPU, view->readonly != 0,
        release_buffer, view);
    if (storage == NULL) {
        PyBuffer_Release(view); /* the deleter was not taken over */
        PyMem_Free(view);
        THPUtils_setErrorFromTH();
        return NULL;
    }
    /* From here the storage owns `view` and releases it at its end. */
    THTensor *tensor = THTensor_newWithStorage(storage, 0, view->ndim, sizes,
                                               strides, dtype);
    THStorage_release(storage); /* the tensor holds its own reference */
    if (tensor == NULL) {
        THPUtils_setErrorFromTH();
    }
    return tensor;
}

static PyObject *
THPModule_from_numpy(PyObject *module, PyObject *obj)
{
    (void)module;
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "expected np.ndarray or another object supporting the "
                     "buffer protocol (got %s)",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    THTensor *tensor = THPNumpy_tensorFromBuffer(obj);
    return tensor == NULL ? NULL : THPVariable_Wrap(tensor);
}

/* ---- NumPy export ----------------------------------------------------------------- */

static const int numpy_typenums[TH_NUM_DTYPES] = {
    [TH_Bool] = NPY_BOOL,   [TH_UInt8] = NPY_UINT8,
    [TH_Int8] = NPY_INT8,   [TH_Int16] = NPY_INT16,
    [TH_Int32] = NPY_INT32, [TH_Int64] = NPY_INT64,
    [TH_Float32] = NPY_FLOAT32, [TH_Float64] = NPY_FLOAT64,
    [TH_Float16] = NPY_FLOAT16,
};

static char empty_data[64];

/* An ndarray on the memory of `t` (owned by the caller) whose base is
 * t's storage. */
static PyObject *
tensor_to_numpy(THTensor *t)
{
    npy_intp dims[TH_MAX_DIMS], byte_strides[TH_MAX_DIMS];
    if (t->dtype == TH_BFloat16) { /* NumPy has no bfloat16 */
        PyErr_Format(PyExc_TypeError, "Got unsupported ScalarType %s",
                     THDtype_scalarTypeName(t->dtype));
        return NULL;
    }
    for (int d = 0; d < t->ndim; d++) {
        dims[d] = (npy_intp)t->sizes[d];
        byte_strides[d] = (npy_intp)(t->strides[d] * THTensor_itemsize(t));
    }
    PyObject *storage = THPStorage_New(t->storage);
    if (storage == NULL) {
        return NULL;
    }
    /* An empty storage has no pointer, but NumPy would allocate for NULL. */
    void *data = t->storage->data != NULL ? THTensor_data(t) : empty_data;
    int flags = t->storage->read_only ? 0 : NPY_ARRAY_WRITEABLE;
    PyObject *array = PyArray_New(&PyArray_Type, t->ndim, dims,
                                  numpy_typenums[t->dtype], byte_strides,
                                  data, 0, flags, NULL);
    if (array == NULL) {
        Py_DECREF(storage);
        return NULL;
    }
    /* SetBaseObject steals `storage`, on failure too: the array keeps the
     * memory alive. */
    if (PyArray_SetBaseObject((PyArrayObject *)array, storage) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

/* tensor_to_numpy of a tensor object's current THTensor, held for the
 * call (allocating the array may run the GC, and a finalizer may set
 * `.data`). */
static PyObject *
variable_to_numpy(PyObject *variable)
{
    THTensor *t = THPVariable_Unpack(variable);
    THTensor_retain(t);
    PyObject *array = tensor_to_numpy(t);
    THTensor_release(t);
    return array;
}

static PyObject *
THPVariable_numpy(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"force"};
    PyObject *force_obj;
    if (THPUtils_parseArgs("numpy", args, nargs, kwnames, names, 1, 0,
                           &force_obj)
        < 0) {
        return NULL;
    }
    int force = force_obj != NULL ? PyObject_IsTrue(force_obj) : 0;
    if (force < 0) {
        return NULL;
    }
    if (THPVariable_Unpack(self)->storage->device != TH_DEVICE_CPU) {
        /* numpy() runs on any device (Note [One dispatch point]): only
         * force=True copies device memory to the host, as PyTorch's. */
        if (force) {
            PyObject *name = PyUnicode_InternFromString("Tensor.numpy");
            PyObject *result = name == NULL ? NULL
                                            : THPDevice_launch(name, self,
                                                               args, nargs,
                                                               kwnames);
            Py_XDECREF(name);
            return result;
        }
        PyErr_SetString(PyExc_TypeError,
                        "can't convert cuda:0 device type tensor to numpy. "
                        "Use Tensor.cpu() to copy the tensor to host memory "
                        "first.");
        return NULL;
    }
    if (force) {
        /* force=True: detach and copy, whatever the tensor is. */
        THTensor *copy = THTensor_newClone(THPVariable_Unpack(self));
        if (copy == NULL) {
            return THPUtils_setErrorFromTH();
        }
        PyObject *array = tensor_to_numpy(copy);
        THTensor_release(copy); /* the array holds the copy's storage */
        return array;
    }
    if (((THPVariable *)self)->requires_grad) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't call numpy() on Tensor that requires grad. "
                        "Use tensor.detach().numpy() instead.");
        return NULL;
    }
    return variable_to_numpy(self);
}

/* __array__(dtype=None, copy=None): what np.asarray(t) calls.  NumPy 2's
 * copy keyword: None copies only if the dtype needs it, True always,
 * False never (ValueError when the dtype would need one). */
static PyObject *
THPVariable_array(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"dtype", "copy"};
    PyObject *objs[2];
    if (THPUtils_parseArgs("__array__", args, nargs, kwnames, names, 2, 2,
                           objs)
        < 0) {
        return NULL;
    }
    PyObject *array = THPVariable_numpy(self, NULL, 0, NULL);
    if (array == NULL) {
        return NULL;
    }
    int copy = objs[1] != NULL && objs[1] != Py_None
                   ? PyObject_IsTrue(objs[1])
                   : 0;
    if (copy < 0) {
        Py_DECREF(array);
        return NULL;
    }
    int never_copy = objs[1] != NULL && objs[1] != Py_None && !copy;
    if ((objs[0] != NULL && objs[0] != Py_None) || copy) {
        /* astype(dtype, copy=copy), in C: the descriptor is the asked
         * dtype or the array's own (None would mean float64 to NumPy). */
        PyArray_Descr *descr = NULL;
        if (objs[0] != NULL && objs[0] != Py_None) {
            if (!PyArray_DescrConverter(objs[0], &descr)) {
                Py_DECREF(array);
                return NULL;
            }
        }
        else {
            descr = PyArray_DESCR((PyArrayObject *)array);
            Py_INCREF(descr); /* stolen by PyArray_FromArray */
        }
        PyObject *converted = PyArray_FromArray(
            (PyArrayObject *)array, descr,
            NPY_ARRAY_FORCECAST | (copy ? NPY_ARRAY_ENSURECOPY : 0)
                | (never_copy ? NPY_ARRAY_ENSURENOCOPY : 0));
        Py_DECREF(array);
        return converted;
    }
    return array;
}

/* ---- DLPack export -------------------------------------------------------------- */

/* Everything one exported capsule owns, freed by the consumer's call to
 * the deleter.  Either `legacy` or `versioned` is the public part. */
typedef struct {
    DLManagedTensor legacy;
    DLManagedTensorVersioned versioned;
    THTensor *tensor; /* retained for the capsule's lifetime */
    int64_t shape[TH_MAX_DIMS];
    int64_t strides[TH_MAX_DIMS];
} DLPackExport;

/* Pure C: safe without the GIL (the THTensor release is atomic, and a
 * storage deleter that needs Python takes the GIL itself). */
static void
dlpack_export_free(DLPackExport *ctx)
{
    THTensor_release(ctx->tensor);
    free(ctx);
}

static void
dlpack_legacy_deleter(DLManagedTensor *managed)
{
    dlpack_export_free(managed->manager_ctx);
}

static void
dlpack_versioned_deleter(DLManagedTensorVersioned *managed)
{
    dlpack_export_free(managed->manager_ctx);
}

static const DLDataType dlpack_dtypes[TH_NUM_DTYPES] = {
    [TH_Bool] = {kDLBool, 8, 1},     [TH_UInt8] = {kDLUInt, 8, 1},
    [TH_Int8] = {kDLInt, 8, 1},      [TH_Int16] = {kDLInt, 16, 1},
    [TH_Int32] = {kDLInt, 32, 1},    [TH_Int64] = {kDLInt, 64, 1},
    [TH_Float32] = {kDLFloat, 32, 1}, [TH_Float64] = {kDLFloat, 64, 1},
    [TH_Float16] = {kDLFloat, 16, 1}, [TH_BFloat16] = {kDLBfloat, 16, 1},
};

/* Capsule destructors: a capsule that was never consumed still owns the
 * managed tensor and must free it. */
static void
dlpack_legacy_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
        managed->deleter(managed);
    }
}

static void
dlpack_versioned_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *managed =
            PyCapsule_GetPointer(capsule, "dltensor_versioned");
        managed->deleter(managed);
    }
}

/* ember's CUDA storages all live on device 0 (THStorage has no device
 * index yet). */
static DLDevice
dlpack_device_of(const THTensor *t)
{
    DLDevice device = {t->storage->device == TH_DEVICE_CUDA ? kDLCUDA : kDLCPU,
                       0};
    return device;
}

/* ember.cuda._interop.<name>(*args), args built from `format` (a tuple
 * format, or NULL for none): the streams' policy is Python's. */
static PyObject *
call_interop(const char *name, const char *format, ...)
{
    PyObject *interop = PyImport_ImportModule("ember.cuda._interop");
    if (interop == NULL) {
        return NULL;
    }
    PyObject *function = PyObject_GetAttrString(interop, name);
    Py_DECREF(interop);
    if (function == NULL) {
        return NULL;
    }
    PyObject *arguments = NULL;
    if (format != NULL) {
        va_list va;
        va_start(va, format);
        arguments = Py_VaBuildValue(format, va);
        va_end(va);
        if (arguments == NULL) {
            Py_DECREF(function);
            return NULL;
        }
    }
    PyObject *result = arguments != NULL ? PyObject_CallObject(function, arguments)
                                         : PyObject_CallNoArgs(function);
    Py_XDECREF(arguments);
    Py_DECREF(function);
    return result;
}

/* __dlpack__(stream=s): the consumer will read on stream s, so ember's
 * pending work must be ordered before it.  The policy (type check, the
 * event) is Python's: ember.cuda._interop.dlpack_stream_handshake.  It
 * runs before the caller takes the THTensor: it can run any Python. */
static int
dlpack_stream_handshake(PyObject *self, PyObject *stream)
{
    PyObject *done = call_interop("dlpack_stream_handshake", "(OO)", self,
                                  stream);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

static PyObject *
THPVariable_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    static const char *const names[] = {"stream", "max_version",
                                        "dl_device", "copy"};
    PyObject *objs[4];
    if (THPUtils_parseArgs("__dlpack__", args, nargs, kwnames, names, 4, 1,
                           objs)
        < 0) {
        return NULL;
    }
    if (((THPVariable *)self)->requires_grad) {
        PyErr_SetString(PyExc_BufferError,
                        "Can't export tensors that require gradient, use "
                        "tensor.detach()");
        return NULL;
    }
    if (objs[0] != NULL && objs[0] != Py_None
        && dlpack_stream_handshake(self, objs[0]) < 0) {
        return NULL;
    }
    if (objs[3] == Py_True) {
        PyErr_SetString(PyExc_BufferError,
                        "__dlpack__(copy=True) is not supported; clone() "
                        "the tensor first");
        return NULL;
    }
    if (objs[2] != NULL && objs[2] != Py_None) {
        /* The array API: a device we can't export to is a BufferError. */
        DLDevice own = dlpack_device_of(THPVariable_Unpack(self));
        PyObject *own_tuple = Py_BuildValue("(ii)", own.device_type, 0);
        int same = own_tuple != NULL
                       ? PyObject_RichCompareBool(objs[2], own_tuple, Py_EQ)
                       : -1;
        Py_XDECREF(own_tuple);
        if (same < 0) {
            return NULL;
        }
        if (!same) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: can't export a %s tensor to "
                         "dl_device=%R; only (%d, 0) is supported",
                         own.device_type == kDLCUDA ? "CUDA" : "CPU",
                         objs[2], own.device_type);
            return NULL;
        }
    }
    long major = 0;
    if (objs[1] != NULL && objs[1] != Py_None) {
        PyObject *first = PySequence_GetItem(objs[1], 0);
        if (first == NULL) {
            return NULL;
        }
        major = PyLong_AsLong(first);
        Py_DECREF(first);
        if (major == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    /* Read only now: the arguments above can run Python (__eq__,
     * __getitem__, __index__), which may have set self.data. */
    THTensor *t = THPVariable_Unpack(self);
    int versioned = major >= DLPACK_MAJOR_VERSION;
    if (!versioned && t->storage->read_only) {
        PyErr_SetString(PyExc_BufferError,
                        "a read-only tensor can only be exported through "
                        "versioned DLPack (max_version >= (1, 0)), which "
                        "can mark it read-only");
        return NULL;
    }
    DLPackExport *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return PyErr_NoMemory();
    }
    THTensor_retain(t);
    ctx->tensor = t;
    memcpy(ctx->shape, t->sizes, sizeof(int64_t) * t->ndim);
    memcpy(ctx->strides, t->strides, sizeof(int64_t) * t->ndim);
    DLDevice device = dlpack_device_of(t);
    DLTensor dl = {
        /* NULL for an empty CUDA tensor; CPU consumers get a valid address */
        .data = t->storage->data != NULL ? THTensor_data(t)
                : device.device_type == kDLCPU ? empty_data
                                               : NULL,
        .device = device,
        .ndim = t->ndim,
        .dtype = dlpack_dtypes[t->dtype],
        .shape = ctx->shape,
        .strides = ctx->strides,
        .byte_offset = 0,
    };
    PyObject *capsule;
    if (versioned) {
        ctx->versioned.version.major = DLPACK_MAJOR_VERSION;
        ctx->versioned.version.minor = DLPACK_MINOR_VERSION;
        ctx->versioned.manager_ctx = ctx;
        ctx->versioned.deleter = dlpack_versioned_deleter;
        ctx->versioned.flags =
            t->storage->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        ctx->versioned.dl_tensor = dl;
        capsule = PyCapsule_New(&ctx->versioned, "dltensor_versioned",
                                dlpack_versioned_capsule_destructor);
    }
    else {
        ctx->legacy.manager_ctx = ctx;
        ctx->legacy.deleter = dlpack_legacy_deleter;
        ctx->legacy.dl_tensor = dl;
        capsule = PyCapsule_New(&ctx->legacy, "dltensor",
                                dlpack_legacy_capsule_destructor);
    }
    if (capsule == NULL) {
        dlpack_export_free(ctx);
    }
    return capsule;
}

static PyObject *
THPVariable_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice device = dlpack_device_of(THPVariable_Unpack(self));
    return Py_BuildValue("(ii)", device.device_type, device.device_id);
}

PyMethodDef THPVariable_numpy_methods[] = {
    {"numpy", (PyCFunction)(void (*)(void))THPVariable_numpy,
     METH_FASTCALL | METH_KEYWORDS,
     "numpy(force=False): an ndarray sharing this tensor's memory"},
    {"__array__", (PyCFunction)(void (*)(void))THPVariable_array,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"__dlpack__", (PyCFunction)(void (*)(void))THPVariable_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "Exports the tensor as a DLPack capsule (zero-copy)."},
    {"__dlpack_device__", THPVariable_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* ---- DLPack import ---------------------------------------------------------------- */

/* The storage deleter's context for imported DLPack memory. */
typedef struct {
    void *managed;
    int versioned;
} DLPackImport;

static void
dlpack_import_release(void *context, void *data)
{
    (void)data;
    DLPackImport *import = context;
    if (import->versioned) {
        DLManagedTensorVersioned *managed = import->managed;
        if (managed->deleter != NULL) {
            managed->deleter(managed);
        }
    }
    else {
        DLManagedTensor *managed = import->managed;
        if (managed->deleter != NULL) {
            managed->deleter(managed);
        }
    }
    free(import);
}

static int
dtype_from_dlpack(DLDataType dl, THDtype *out)
{
    for (int i = 0; i < TH_NUM_DTYPES; i++) {
        if (dlpack_dtypes[i].code == dl.code
            && dlpack_dtypes[i].bits == dl.bits && dl.lanes == 1) {
            *out = (THDtype)i;
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError,
                 "unsupported DLPack dtype (code %d, bits %d, lanes %d): "
                 "ember supports bool, uint8, int8, int16, int32, int64, "
                 "float16, bfloat16, float32 and float64",
                 dl.code, dl.bits, dl.lanes);
    return -1;
}

/* The ember device of DLPack memory: host memory (pinned included) is the
 * CPU's; CUDA memory must be on device 0, the only one ember addresses. */
static int
dlpack_import_device(DLDevice dl, THDeviceType *device)
{
    if (dl.device_type == kDLCPU || dl.device_type == kDLCUDAHost) {
        *device = TH_DEVICE_CPU;
        return 0;
    }
    if (dl.device_type == kDLCUDA && dl.device_id == 0) {
        *device = TH_DEVICE_CUDA;
        return 0;
    }
    if (dl.device_type == kDLCUDA) {
        PyErr_Format(PyExc_BufferError,
                     "from_dlpack: the memory is on cuda:%d, and ember "
                     "addresses only cuda:0 so far",
                     dl.device_id);
        return -1;
    }
    PyErr_Format(PyExc_BufferError,
                 "from_dlpack: device type %d is not supported (ember reads "
                 "CPU and CUDA memory)",
                 dl.device_type);
    return -1;
}

/* Builds a tensor over a DLTensor.  On success the storage owns `import`
 * (and through it the managed tensor); on failure the caller keeps it. */
static THTensor *
tensor_from_dltensor(const DLTensor *dl, int read_only,
                     DLPackImport *import)
{
    THDtype dtype;
    THDeviceType device;
    int64_t strides[TH_MAX_DIMS], last = 0, numel = 1;
    if (dlpack_import_device(dl->device, &device) < 0) {
        return NULL;
    }
    if (dl->ndim < 0 || dl->ndim > TH_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "from_dlpack: %d dimensions is out of range (at most "
                     "%d)",
                     dl->ndim, TH_MAX_DIMS);
        return NULL;
    }
    if (dtype_from_dlpack(dl->dtype, &dtype) < 0) {
        return NULL;
    }
    if (dl->strides == NULL) {
        THTensor_contiguousStrides(dl->ndim, dl->shape, strides);
    }
    else {
        memcpy(strides, dl->strides, sizeof(int64_t) * dl->ndim);
    }
    for (int d = 0; d < dl->ndim; d++) {
        if (dl->shape[d] < 0 || strides[d] < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "from_dlpack: negative sizes or strides are "
                            "not supported; copy the array first");
            return NULL;
        }
        numel *= dl->shape[d];
        last += (dl->shape[d] - 1) * strides[d];
    }
    int64_t nbytes = numel == 0 ? 0 : (last + 1) * THDtype_itemsize(dtype);
    char *data = (char *)dl->data + dl->byte_offset;
    THStorage *storage = THStorage_newExternal(
        data, nbytes, device, read_only != 0, dlpack_import_release, import);
    if (storage == NULL) {
        THPUtils_setErrorFromTH();
        return NULL;
    }
    THTensor *tensor = THTensor_newWithStorage(storage, 0, dl->ndim,
                                               dl->shape, strides, dtype);
    if (tensor == NULL) {
        /* Give the obligation back to the caller before the storage goes */
        storage->deleter = NULL;
        THStorage_release(storage);
        THPUtils_setErrorFromTH();
        return NULL;
    }
    THStorage_release(storage); /* the tensor holds its own reference */
    return tensor;
}

/* Takes the managed tensor out of a capsule, marking it consumed. */
static PyObject *
tensor_from_capsule(PyObject *capsule)
{
    DLPackImport *import = calloc(1, sizeof(*import));
    if (import == NULL) {
        return PyErr_NoMemory();
    }
    const DLTensor *dl;
    int read_only = 0;
    const char *used_name;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *managed =
            PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (managed->version.major > DLPACK_MAJOR_VERSION) {
            free(import);
            PyErr_Format(PyExc_BufferError,
                         "from_dlpack: DLPack version %u.%u is newer than "
                         "ember supports (%d.x)",
                         managed->version.major, managed->version.minor,
                         DLPACK_MAJOR_VERSION);
            return NULL;
        }
        import->managed = managed;
        import->versioned = 1;
        dl = &managed->dl_tensor;
        read_only = (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        used_name = "used_dltensor_versioned";
    }
    else if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
        import->managed = managed;
        dl = &managed->dl_tensor;
        used_name = "used_dltensor";
    }
    else {
        free(import);
        PyErr_SetString(PyExc_ValueError,
                        "from_dlpack: expected a DLPack capsule that was not "
                        "consumed yet (named 'dltensor' or "
                        "'dltensor_versioned')");
        return NULL;
    }
    THTensor *tensor = tensor_from_dltensor(dl, read_only, import);
    if (tensor == NULL) {
        free(import); /* the capsule still owns the managed tensor */
        return NULL;
    }
    /* Consumed: from now on the storage calls the deleter, not the
     * capsule's destructor. */
    if (PyCapsule_SetName(capsule, used_name) < 0) {
        THTensor_release(tensor);
        return NULL;
    }
    return THPVariable_Wrap(tensor);
}

/* The DLPack device type x.__dlpack_device__() names (kDLCPU when x has
 * none), or -1 with an exception. */
static int
dlpack_producer_device_type(PyObject *obj)
{
    PyObject *device = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (device == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return kDLCPU;
    }
    int64_t device_type = -1;
    if (!PyTuple_Check(device) || PyTuple_GET_SIZE(device) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "from_dlpack: __dlpack_device__() must return a "
                     "(device_type, device_id) tuple, not %R",
                     device);
    }
    else if (THPUtils_unpackLong(PyTuple_GET_ITEM(device, 0), "from_dlpack",
                                 "the device type", &device_type)
                 == 0
             && (device_type < 0 || device_type > INT_MAX)) {
        PyErr_Format(PyExc_ValueError,
                     "from_dlpack: invalid device type %lld",
                     (long long)device_type);
        device_type = -1;
    }
    Py_DECREF(device);
    return (int)device_type;
}

/* from_dlpack(x): x is an object with __dlpack__, or a capsule. */
static PyObject *
THPModule_from_dlpack(PyObject *module, PyObject *obj)
{
    (void)module;
    if (PyCapsule_CheckExact(obj)) {
        return tensor_from_capsule(obj);
    }
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (method == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "from_dlpack: expected an object with __dlpack__ or a "
                     "DLPack capsule, got %s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    int device_type = dlpack_producer_device_type(obj);
    if (device_type < 0) {
        Py_DECREF(method);
        return NULL;
    }
    /* CUDA memory comes with stream=<the stream ember queues on>, which
     * the producer orders its pending work before. */
    PyObject *stream = NULL;
    if (device_type == kDLCUDA
        && (stream = call_interop("consumer_stream", NULL)) == NULL) {
        Py_DECREF(method);
        return NULL;
    }
    /* Ask for the versioned protocol; producers that predate it raise
     * TypeError on the keyword, and then get the legacy call. */
    PyObject *kwargs = stream != NULL
                           ? Py_BuildValue("{s:(ii),s:O}", "max_version",
                                           DLPACK_MAJOR_VERSION,
                                           DLPACK_MINOR_VERSION, "stream", stream)
                           : Py_BuildValue("{s:(ii)}", "max_version",
                                           DLPACK_MAJOR_VERSION,
                                           DLPACK_MINOR_VERSION);
    PyObject *legacy_kwargs = stream != NULL
                                  ? Py_BuildValue("{s:O}", "stream", stream)
                                  : PyDict_New();
    Py_XDECREF(stream);
    PyObject *empty = PyTuple_New(0);
    PyObject *capsule = NULL;
    if (kwargs != NULL && legacy_kwargs != NULL && empty != NULL) {
        capsule = PyObject_Call(method, empty, kwargs);
        if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            capsule = PyObject_Call(method, empty, legacy_kwargs);
        }
    }
    Py_XDECREF(kwargs);
    Py_XDECREF(legacy_kwargs);
    Py_XDECREF(empty);
    Py_DECREF(method);
    if (capsule == NULL) {
        return NULL;
    }
    PyObject *result = tensor_from_capsule(capsule);
    Py_DECREF(capsule);
    return result;
}

/* ---- memory lent by address (__cuda_array_interface__) ---------------------------- */

/* A DLManagedTensor standing for memory some Python object lends by
 * address: its deleter drops the reference that keeps the lender alive, so
 * the import above (tensor_from_dltensor) serves it unchanged. */
typedef struct {
    DLManagedTensor managed;
    PyObject *owner; /* strong */
    int64_t shape[TH_MAX_DIMS];
    int64_t strides[TH_MAX_DIMS];
} LentMemory;

/* May run without the GIL (the last storage reference can drop in a
 * kernel), so it takes the GIL itself. */
static void
lent_memory_deleter(DLManagedTensor *managed)
{
    LentMemory *lent = managed->manager_ctx;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(lent->owner);
    PyGILState_Release(gil);
    free(lent);
}

/* _tensor_over_cuda_memory(owner, address, shape, strides, dtype,
 * read_only): a CUDA tensor over device memory at `address` (strides in
 * elements, None for contiguous) that keeps `owner` alive as long as its
 * storage lives.  ember.cuda._interop validates __cuda_array_interface__
 * and calls this; nothing here reads the memory. */
static PyObject *
THPModule_tensor_over_cuda_memory(PyObject *module, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    (void)module;
    int64_t address, shape[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    THDtype dtype;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "_tensor_over_cuda_memory(owner, address, shape, "
                        "strides, dtype, read_only) takes 6 arguments");
        return NULL;
    }
    /* Parse everything first: each step may run Python (__index__, __bool__). */
    if (THPUtils_unpackLong(args[1], "_tensor_over_cuda_memory", "address",
                            &address)
        < 0) {
        return NULL;
    }
    int ndim = THPUtils_parseSizeSequence("_tensor_over_cuda_memory",
                                          args[2], shape);
    if (ndim < 0) {
        return NULL;
    }
    bool contiguous = args[3] == Py_None;
    if (!contiguous) {
        int strides_ndim = THPUtils_parseSizeSequence(
            "_tensor_over_cuda_memory", args[3], strides);
        if (strides_ndim < 0) {
            return NULL;
        }
        if (strides_ndim != ndim) {
            PyErr_Format(PyExc_ValueError,
                         "_tensor_over_cuda_memory: %d strides for %d "
                         "dimensions",
                         strides_ndim, ndim);
            return NULL;
        }
    }
    if (THPDtype_Parse(args[4], &dtype) < 0) {
        return NULL;
    }
    int read_only = PyObject_IsTrue(args[5]);
    if (read_only < 0) {
        return NULL;
    }
    LentMemory *lent = calloc(1, sizeof(*lent));
    DLPackImport *import = calloc(1, sizeof(*import));
    if (lent == NULL || import == NULL) {
        free(lent);
        free(import);
        return PyErr_NoMemory();
    }
    memcpy(lent->shape, shape, sizeof(int64_t) * ndim);
    memcpy(lent->strides, strides, sizeof(int64_t) * ndim);
    Py_INCREF(args[0]);
    lent->owner = args[0];
    lent->managed = (DLManagedTensor){
        .dl_tensor = {.data = (void *)(intptr_t)address,
                      .device = {kDLCUDA, 0},
                      .ndim = ndim,
                      .dtype = dlpack_dtypes[dtype],
                      .shape = lent->shape,
                      .strides = contiguous ? NULL : lent->strides},
        .manager_ctx = lent,
        .deleter = lent_memory_deleter,
    };
    import->managed = &lent->managed;
    THTensor *tensor = tensor_from_dltensor(&lent->managed.dl_tensor,
                                            read_only, import);
    if (tensor == NULL) { /* the obligation is still ours */
        free(import);
        Py_DECREF(lent->owner);
        free(lent);
        return NULL;
    }
    return THPVariable_Wrap(tensor);
}

PyMethodDef THPNumpy_methods[] = {
    {"_tensor_over_cuda_memory",
     (PyCFunction)(void (*)(void))THPModule_tensor_over_cuda_memory,
     METH_FASTCALL,
     "_tensor_over_cuda_memory(owner, address, shape, strides, dtype, "
     "read_only): a CUDA tensor over lent device memory (zero-copy)"},
    {"from_numpy", THPModule_from_numpy, METH_O,
     "from_numpy(a): a tensor sharing a's memory (any PEP 3118 buffer)"},
    {"from_dlpack", THPModule_from_dlpack, METH_O,
     "from_dlpack(x): a tensor sharing x's memory through DLPack"},
    {NULL, NULL, 0, NULL},
};

int
THPNumpy_InitModule(PyObject *module)
{
    (void)module;
    /* import_array() is a macro that returns NULL on failure; wrap it. */
    if (_import_array() < 0) {
        return -1;
    }
    return 0;
}
