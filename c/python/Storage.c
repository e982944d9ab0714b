/*
 * Storage.c -- ember.UntypedStorage: the Python face of a THStorage.
 *
 * Layout: PyObject_HEAD + one owned THStorage reference (plus bookkeeping
 * for the buffer protocol).  Many tensors may share one THStorage; each
 * call to tensor.untyped_storage() makes a new THPStorage that retains it,
 * so the bytes live as long as any tensor or storage object needs them.
 *
 * The buffer protocol is written the way memoryview is (CPython's
 * Objects/memoryobject.c): every check first, then view->obj takes a new
 * reference and the export counter goes up; releasebuffer only counts
 * down.  It exports the raw bytes as a 1-d array of unsigned char ('B').
 */
#include "THP.h"

/* Any non-NULL pointer will do for an empty buffer: nothing is read. */
static char empty_buffer[1];

PyObject *
THPStorage_New(THStorage *storage)
{
    THPStorage *self = PyObject_New(THPStorage, &THPStorageType);
    if (self == NULL) {
        return NULL;
    }
    THStorage_retain(storage);
    self->cdata = storage;
    self->buffer_exports = 0;
    self->buffer_shape[0] = (Py_ssize_t)storage->nbytes;
    return (PyObject *)self;
}

static void
THPStorage_dealloc(PyObject *self)
{
    THStorage_release(((THPStorage *)self)->cdata);
    PyObject_Free(self);
}

static PyObject *
THPStorage_nbytes(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(((THPStorage *)self)->cdata->nbytes);
}

static PyObject *
THPStorage_data_ptr(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(((THPStorage *)self)->cdata->data);
}

static PyObject *
THPStorage_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    THStorage *storage = ((THPStorage *)self)->cdata;
    PyObject *list = PyList_New((Py_ssize_t)storage->nbytes);
    if (list == NULL) {
        return NULL;
    }
    const unsigned char *bytes = storage->data;
    for (int64_t i = 0; i < storage->nbytes; i++) {
        PyObject *byte = PyLong_FromLong(bytes[i]);
        if (byte == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, byte); /* steals `byte` */
    }
    return list;
}

static PyObject *
THPStorage_device(PyObject *self, void *closure)
{
    (void)closure;
    return THPDevice_Get(((THPStorage *)self)->cdata->device);
}

static PyObject *
THPStorage_is_read_only(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((THPStorage *)self)->cdata->read_only);
}

static Py_ssize_t
THPStorage_length(PyObject *self)
{
    return (Py_ssize_t)((THPStorage *)self)->cdata->nbytes;
}

static PyObject *
THPStorage_item(PyObject *self, Py_ssize_t index)
{
    THStorage *storage = ((THPStorage *)self)->cdata;
    if (index < 0 || index >= storage->nbytes) {
        PyErr_Format(PyExc_IndexError,
                     "index %zd out of range for storage of size %lld",
                     index, (long long)storage->nbytes);
        return NULL;
    }
    return PyLong_FromLong(((unsigned char *)storage->data)[index]);
}

static PyObject *
THPStorage_repr(PyObject *self)
{
    THStorage *storage = ((THPStorage *)self)->cdata;
    return PyUnicode_FromFormat(
        "<ember.UntypedStorage of %lld bytes at %p, device='cpu'%s>",
        (long long)storage->nbytes, storage->data,
        storage->read_only ? ", read-only" : "");
}

/* ---- shared memory (THShared.h) ------------------------------------------
 *
 * The Python half of Note [Shared memory by file descriptor]: moving a
 * storage into shared memory, the descriptor behind it, and making a
 * storage from a descriptor another process sent.  PyTorch's names:
 * share_memory_(), is_shared(), and the private _share_fd_cpu_(),
 * _new_shared_fd_cpu(fd, size) and _new_shared(size) that
 * torch.multiprocessing.reductions uses. */

static PyObject *
THPStorage_share_memory_(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (THStorage_shareInPlace(((THPStorage *)self)->cdata) < 0) {
        return THPUtils_setErrorFromTH();
    }
    Py_INCREF(self); /* returned: a new reference */
    return self;
}

static PyObject *
THPStorage_is_shared(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(THStorage_isShared(((THPStorage *)self)->cdata));
}

/* (fd, nbytes), after moving the bytes into shared memory if need be.
 * The descriptor stays the storage's: dup it to keep it longer. */
static PyObject *
THPStorage_share_fd(PyObject *self, PyObject *unused)
{
    (void)unused;
    THStorage *storage = ((THPStorage *)self)->cdata;
    if (THStorage_shareInPlace(storage) < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_BuildValue("(iL)", THStorage_sharedFd(storage),
                         (long long)storage->nbytes);
}

/* Wraps a new storage from the core (NULL: its error). */
static PyObject *
wrap_new_storage(THStorage *storage)
{
    if (storage == NULL) {
        return THPUtils_setErrorFromTH();
    }
    PyObject *result = THPStorage_New(storage);
    THStorage_release(storage); /* THPStorage_New took its own reference */
    return result;
}

static PyObject *
THPStorage_new_shared_fd(PyObject *cls, PyObject *args)
{
    (void)cls;
    int fd;
    long long nbytes;
    if (!PyArg_ParseTuple(args, "iL:_new_shared_fd_cpu", &fd, &nbytes)) {
        return NULL;
    }
    return wrap_new_storage(THStorage_newSharedFromFd(fd, nbytes));
}

static PyObject *
THPStorage_new_shared(PyObject *cls, PyObject *args)
{
    (void)cls;
    long long nbytes;
    if (!PyArg_ParseTuple(args, "L:_new_shared", &nbytes)) {
        return NULL;
    }
    return wrap_new_storage(THStorage_newShared(nbytes));
}

/* A tensor viewing this storage: _tensor(dtype, storage_offset, size,
 * stride), what Tensor.set_(storage, offset, size, stride) on an empty
 * tensor gives in PyTorch.  Bounds are checked by the core. */
static PyObject *
THPStorage_tensor(PyObject *self, PyObject *args)
{
    PyObject *dtype_obj, *size_obj, *stride_obj;
    long long offset;
    if (!PyArg_ParseTuple(args, "OLOO:_tensor", &dtype_obj, &offset,
                          &size_obj, &stride_obj)) {
        return NULL;
    }
    THDtype dtype;
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    if (THPDtype_Parse(dtype_obj, &dtype) < 0) {
        return NULL;
    }
    int ndim = THPUtils_parseSizeSequence("_tensor", size_obj, sizes);
    if (ndim < 0) {
        return NULL;
    }
    int nstrides = THPUtils_parseSizeSequence("_tensor", stride_obj, strides);
    if (nstrides < 0) {
        return NULL;
    }
    if (nstrides != ndim) {
        PyErr_Format(PyExc_RuntimeError, "mismatch in length of strides and "
                     "shape");
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newWithStorage(
        ((THPStorage *)self)->cdata, offset, ndim, sizes, strides, dtype));
}

/* ---- buffer protocol ------------------------------------------------------- */

static int
THPStorage_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    THPStorage *storage_obj = (THPStorage *)self;
    THStorage *storage = storage_obj->cdata;
    if ((flags & PyBUF_WRITABLE) && storage->read_only) {
        PyErr_SetString(PyExc_BufferError,
                        "ember.UntypedStorage: this storage is read-only");
        return -1;
    }
    view->buf = storage->data != NULL ? storage->data : empty_buffer;
    view->len = (Py_ssize_t)storage->nbytes;
    view->readonly = storage->read_only;
    view->itemsize = 1;
    view->format = (flags & PyBUF_FORMAT) ? "B" : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? storage_obj->buffer_shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? &view->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    Py_INCREF(self); /* view->obj: the view keeps the storage alive */
    view->obj = self;
    storage_obj->buffer_exports++;
    return 0;
}

static void
THPStorage_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void)view;
    ((THPStorage *)self)->buffer_exports--;
}

static PyBufferProcs THPStorage_as_buffer = {
    .bf_getbuffer = THPStorage_getbuffer,
    .bf_releasebuffer = THPStorage_releasebuffer,
};

static PySequenceMethods THPStorage_as_sequence = {
    .sq_length = THPStorage_length,
    .sq_item = THPStorage_item,
};

static PyMethodDef THPStorage_methods[] = {
    {"nbytes", THPStorage_nbytes, METH_NOARGS, "Size in bytes."},
    {"size", THPStorage_nbytes, METH_NOARGS,
     "Size in bytes (an untyped storage counts bytes)."},
    {"data_ptr", THPStorage_data_ptr, METH_NOARGS,
     "Address of the first byte."},
    {"tolist", THPStorage_tolist, METH_NOARGS, "The bytes as a list of ints."},
    {"share_memory_", THPStorage_share_memory_, METH_NOARGS,
     "Moves the bytes into shared memory in place; returns self."},
    {"is_shared", THPStorage_is_shared, METH_NOARGS,
     "True when the bytes live in shared memory."},
    {"_share_fd_cpu_", THPStorage_share_fd, METH_NOARGS,
     "(fd, nbytes) of the shared memory file, moving the bytes there first."},
    {"_new_shared_fd_cpu", THPStorage_new_shared_fd, METH_VARARGS | METH_CLASS,
     "A storage mapping nbytes of the shared memory file fd (duplicated)."},
    {"_new_shared", THPStorage_new_shared, METH_VARARGS | METH_CLASS,
     "A new zero-filled storage of nbytes in shared memory."},
    {"_tensor", THPStorage_tensor, METH_VARARGS,
     "_tensor(dtype, storage_offset, size, stride): a tensor on these bytes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef THPStorage_getset[] = {
    {"device", THPStorage_device, NULL, "The device the bytes live on.",
     NULL},
    {"is_read_only", THPStorage_is_read_only, NULL,
     "True when the memory was lent read-only.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject THPStorageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.UntypedStorage",
    .tp_basicsize = sizeof(THPStorage),
    .tp_dealloc = THPStorage_dealloc,
    .tp_repr = THPStorage_repr,
    .tp_as_sequence = &THPStorage_as_sequence,
    .tp_as_buffer = &THPStorage_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The bytes behind one or more tensors.",
    .tp_methods = THPStorage_methods,
    .tp_getset = THPStorage_getset,
};

int
THPStorage_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPStorageType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "UntypedStorage",
                                 (PyObject *)&THPStorageType);
}
