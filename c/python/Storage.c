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
    (void)self;
    (void)closure;
    Py_INCREF(THPDevice_cpu); /* returned: a new reference */
    return THPDevice_cpu;
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
