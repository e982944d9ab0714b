/*
 * Random.c -- ember.Generator, the seeding functions, and the random
 * operators: multinomial, bernoulli, poisson and the in-place samplers
 * Tensor.uniform_/normal_/random_/exponential_/bernoulli_.  The factories
 * that take a generator= (rand, randn, randint, randperm, the *_like forms)
 * live in Creation.c; the samplers themselves in c/th/THRandom.c.
 *
 * An ember.Generator owns one THGenerator; ember.default_generator wraps
 * the process-wide one that every random function uses when it is given no
 * generator=.  A generator argument is parsed with the others, before any
 * THTensor * is taken (Note [Pinned arguments] in THP.h); the caller's
 * reference keeps the object, and so its THGenerator, alive for the call.
 * Sampling runs with the GIL held: it mutates the generator's state.
 */
#include "THP.h"

/* ---- ember.Generator ---------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    THGenerator *cdata; /* &owned, or the process-wide default generator */
    THGenerator owned;
} THPGenerator;

static PyObject *default_generator_object; /* strong; ember.default_generator */

static PyObject *
generator_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"device", NULL};
    PyObject *device_obj = NULL;
    THDeviceType device;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Generator", names,
                                     &device_obj)
        || THPDevice_Parse(device_obj, &device) < 0) {
        return NULL;
    }
    if (device != TH_DEVICE_CPU) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ember.Generator: only CPU generators exist yet "
                        "(CUDA random numbers will be seeded by "
                        "ember.cuda.manual_seed)");
        return NULL;
    }
    THPGenerator *self = (THPGenerator *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    /* A new generator starts at the default seed, as torch.Generator()
     * does. */
    THGenerator_seed(&self->owned, TH_DEFAULT_SEED);
    self->cdata = &self->owned;
    return (PyObject *)self;
}

static void
generator_dealloc(PyObject *self)
{
    Py_TYPE(self)->tp_free(self);
}

/* A seed argument: any Python int; like PyTorch, negative seeds wrap to
 * 64 bits. */
static int
parse_seed(PyObject *obj, uint64_t *seed)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "manual_seed expected an int, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long value = PyLong_AsUnsignedLongLongMask(obj);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *seed = value;
    return 0;
}

static PyObject *
generator_manual_seed(PyObject *self, PyObject *seed_obj)
{
    uint64_t seed;
    if (parse_seed(seed_obj, &seed) < 0) {
        return NULL;
    }
    THGenerator_seed(((THPGenerator *)self)->cdata, seed);
    return Py_NewRef(self);
}

static PyObject *
generator_seed(PyObject *self, PyObject *unused)
{
    (void)unused;
    uint64_t seed = THGenerator_nondeterministicSeed();
    THGenerator_seed(((THPGenerator *)self)->cdata, seed);
    return PyLong_FromUnsignedLongLong(seed);
}

static PyObject *
generator_initial_seed(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(((THPGenerator *)self)->cdata->seed);
}

static PyObject *
generator_get_state(PyObject *self, PyObject *unused)
{
    (void)unused;
    int64_t size = TH_GENERATOR_STATE_SIZE;
    THTensor *state = THTensor_newEmpty(1, &size, TH_UInt8, TH_DEVICE_CPU);
    if (state == NULL) {
        return THPUtils_setErrorFromTH();
    }
    THGenerator_getState(((THPGenerator *)self)->cdata,
                         (uint8_t *)THTensor_data(state));
    return THPVariable_Wrap(state);
}

static PyObject *
generator_set_state(PyObject *self, PyObject *state_obj)
{
    if (!THPVariable_Check(state_obj)
        || THPVariable_CURRENT(state_obj)->dtype != TH_UInt8) {
        PyErr_Format(PyExc_TypeError,
                     "RNG state must be an ember.ByteTensor (a uint8 "
                     "tensor from get_state()), not %s",
                     THPVariable_Check(state_obj)
                         ? THDtype_name(THPVariable_CURRENT(state_obj)->dtype)
                         : Py_TYPE(state_obj)->tp_name);
        return NULL;
    }
    /* Held while copying: a Python allocator may run Python code that
     * rebinds state_obj.data (Note [Pinned arguments]). */
    THTensor *given = THPVariable_CURRENT(state_obj);
    if (THPUtils_checkOnHost(given, "the RNG state") < 0) {
        return NULL;
    }
    THTensor_retain(given);
    THTensor *bytes = THTensor_newContiguous(given);
    THTensor_release(given);
    if (bytes == NULL) {
        return THPUtils_setErrorFromTH();
    }
    int status = THGenerator_setState(((THPGenerator *)self)->cdata,
                                      (const uint8_t *)THTensor_data(bytes),
                                      bytes->numel);
    THTensor_release(bytes);
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_NewRef(self);
}

static PyObject *
generator_device(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    if (THPDevice_cpu == NULL) {
        return PyUnicode_FromString("cpu"); /* before ember is imported */
    }
    return Py_NewRef(THPDevice_cpu);
}

static PyMethodDef generator_methods[] = {
    {"manual_seed", generator_manual_seed, METH_O,
     "manual_seed(seed) -> Generator: seeds this generator, returns it."},
    {"seed", generator_seed, METH_NOARGS,
     "seed() -> int: seeds from the operating system, returns the seed."},
    {"initial_seed", generator_initial_seed, METH_NOARGS,
     "initial_seed() -> int: the seed it was last seeded with."},
    {"get_state", generator_get_state, METH_NOARGS,
     "get_state() -> Tensor: the state, a uint8 tensor of 40 bytes."},
    {"set_state", generator_set_state, METH_O,
     "set_state(new_state) -> Generator: restores a get_state() result."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef generator_getset[] = {
    {"device", generator_device, NULL, "The generator's device (cpu).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject THPGeneratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C.Generator",
    .tp_basicsize = sizeof(THPGenerator),
    .tp_dealloc = generator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Generator(device='cpu'): a random number generator "
              "(xoshiro256**), for the generator= argument of the random "
              "functions.",
    .tp_methods = generator_methods,
    .tp_getset = generator_getset,
    .tp_new = generator_new,
};

int
THPGenerator_parse(const char *fname, PyObject *obj, THGenerator **out)
{
    if (obj == NULL || obj == Py_None) {
        *out = THGenerator_default();
        return 0;
    }
    if (!PyObject_TypeCheck(obj, &THPGeneratorType)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'generator' must be ember.Generator, "
                     "not %s",
                     fname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = ((THPGenerator *)obj)->cdata;
    return 0;
}

/* ---- module functions on the default generator -------------------------- */

static PyObject *
THPModule_manual_seed(PyObject *module, PyObject *seed_obj)
{
    (void)module;
    return generator_manual_seed(default_generator_object, seed_obj);
}

static PyObject *
THPModule_initial_seed(PyObject *module, PyObject *unused)
{
    (void)module;
    return generator_initial_seed(default_generator_object, unused);
}

static PyObject *
THPModule_seed(PyObject *module, PyObject *unused)
{
    (void)module;
    return generator_seed(default_generator_object, unused);
}

PyMethodDef THPRandom_module_methods[] = {
    {"manual_seed", THPModule_manual_seed, METH_O,
     "manual_seed(seed) -> Generator: seeds the default generator and "
     "returns it."},
    {"initial_seed", THPModule_initial_seed, METH_NOARGS,
     "The seed the default generator was last seeded with."},
    {"seed", THPModule_seed, METH_NOARGS,
     "Seeds the default generator from the operating system; returns the "
     "seed."},
    {NULL, NULL, 0, NULL},
};

int
THPGenerator_InitModule(PyObject *module)
{
    if (PyType_Ready(&THPGeneratorType) < 0
        || PyModule_AddObjectRef(module, "Generator",
                                 (PyObject *)&THPGeneratorType)
               < 0) {
        return -1;
    }
    THPGenerator *wrapper =
        PyObject_New(THPGenerator, &THPGeneratorType);
    if (wrapper == NULL) {
        return -1;
    }
    wrapper->cdata = THGenerator_default();
    default_generator_object = (PyObject *)wrapper; /* kept for good */
    return PyModule_AddObjectRef(module, "default_generator",
                                 default_generator_object);
}

/* ---- argument helpers ------------------------------------------------------ */

/* A number argument (absent: *out keeps its default). */
static int
parse_double(PyObject *obj, double *out)
{
    THScalar value;
    if (obj == NULL) {
        return 0;
    }
    if (THPUtils_parseScalar(obj, &value) < 0) {
        return -1;
    }
    *out = value.dtype == TH_Float64 ? value.value.d
           : value.dtype == TH_Int64 ? (double)value.value.i
                                     : (double)value.value.b;
    return 0;
}

/* Samples `dist` into `input` in place; every argument is parsed. */
static PyObject *
sample_into(PyObject *input, THGenerator *gen, const THDistribution *dist)
{
    if (THTensor_sample_(THPVariable_Unpack(input), gen, dist) < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_NewRef(input);
}

/* ---- the in-place samplers ------------------------------------------------------ */

/* The samplers whose parameters are numbers: x.name(a, b, *, generator)
 * with names = {a's, b's, "generator"} (or {a's, "generator"}) and the
 * defaults already in `dist`. */
static PyObject *
sample_with_numbers(const char *fname, const char *const *names,
                    int nnumbers, THDistribution dist, PyObject *input,
                    PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *objs[3];
    THGenerator *gen;
    if (THPUtils_parseArgs(fname, args, nargs, kwnames, names, nnumbers + 1,
                           nnumbers, objs)
            < 0
        || parse_double(objs[0], &dist.a) < 0
        || (nnumbers == 2 && parse_double(objs[1], &dist.b) < 0)
        || THPGenerator_parse(fname, objs[nnumbers], &gen) < 0) {
        return NULL;
    }
    return sample_into(input, gen, &dist);
}

/* uniform_(from=0, to=1, *, generator=None) */
static PyObject *
uniform__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const names[] = {"from", "to", "generator"};
    THDistribution dist = {.kind = TH_DIST_UNIFORM, .a = 0.0, .b = 1.0};
    return sample_with_numbers("uniform_", names, 2, dist, input, args, nargs,
                               kwnames);
}

/* normal_(mean=0, std=1, *, generator=None) */
static PyObject *
normal__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"mean", "std", "generator"};
    THDistribution dist = {.kind = TH_DIST_NORMAL, .a = 0.0, .b = 1.0};
    return sample_with_numbers("normal_", names, 2, dist, input, args, nargs,
                               kwnames);
}

/* exponential_(lambd=1, *, generator=None) */
static PyObject *
exponential__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    static const char *const names[] = {"lambd", "generator"};
    THDistribution dist = {.kind = TH_DIST_EXPONENTIAL, .a = 1.0};
    return sample_with_numbers("exponential_", names, 1, dist, input, args,
                               nargs, kwnames);
}

/* PyTorch's UserWarning for an end of random_'s range beyond the integers
 * a float dtype holds exactly; -1 when a warning filter made it an error. */
static int
warn_inexact_end(const char *end, const THRandintRange *range, THDtype dtype)
{
    return PyErr_WarnFormat(
        PyExc_UserWarning, 1,
        "%s is out of bounds [-(2^%d), 2^%d]. Due to precision limitations "
        "%s can support discrete uniform distribution only within this "
        "range. This warning will become an error in version 1.7 release, "
        "please fix the code in advance",
        end, range->digits, range->digits, THDtype_cppTypeName(dtype));
}

/* random_(from, to=None), random_(to), random_(): integers in [from, to),
 * by default every integer the dtype holds exactly from 0 up. */
static PyObject *
random__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"from", "to", "generator"};
    PyObject *objs[3];
    THDistribution dist = {.kind = TH_DIST_RANDINT, .low = 0};
    THGenerator *gen;
    if (THPUtils_parseArgs("random_", args, nargs, kwnames, names, 3, 2,
                           objs)
        < 0) {
        return NULL;
    }
    /* One positional is `to`: x.random_(10) draws from [0, 10). */
    if (nargs == 1 && objs[1] == NULL) {
        objs[1] = objs[0];
        objs[0] = NULL;
    }
    dist.high_is_max = objs[1] == NULL || objs[1] == Py_None;
    if ((objs[0] != NULL
         && THPUtils_unpackLong(objs[0], "random_", "from", &dist.low) < 0)
        || (!dist.high_is_max
            && THPUtils_unpackLong(objs[1], "random_", "to", &dist.high) < 0)
        || THPGenerator_parse("random_", objs[2], &gen) < 0) {
        return NULL;
    }
    /* The range's errors and warnings before any tensor is taken (a
     * warning may run Python); the sampler checks it again, for the dtype
     * the tensor has then. */
    THDtype dtype = THPVariable_Unpack(input)->dtype;
    THRandintRange range;
    if (THRandom_randintRange(dtype, dist.low,
                              dist.high_is_max ? NULL : &dist.high, &range)
        < 0) {
        return THPUtils_setErrorFromTH();
    }
    if ((range.inexact_from && warn_inexact_end("from", &range, dtype) < 0)
        || (range.inexact_to && warn_inexact_end("to - 1", &range, dtype) < 0)) {
        return NULL;
    }
    return sample_into(input, gen, &dist);
}

/* bernoulli_(p=0.5, *, generator=None); p a number or a tensor of
 * probabilities broadcast to the input's shape. */
static PyObject *
bernoulli__impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    static const char *const names[] = {"p", "generator"};
    PyObject *objs[2];
    THDistribution dist = {.kind = TH_DIST_BERNOULLI, .a = 0.5};
    THGenerator *gen;
    if (THPUtils_parseArgs("bernoulli_", args, nargs, kwnames, names, 2, 1,
                           objs)
            < 0
        || THPGenerator_parse("bernoulli_", objs[1], &gen) < 0) {
        return NULL;
    }
    bool p_is_tensor = objs[0] != NULL && THPVariable_Check(objs[0]);
    if (!p_is_tensor) {
        return parse_double(objs[0], &dist.a) < 0
                   ? NULL
                   : sample_into(input, gen, &dist);
    }
    THTensor *self = THPVariable_Unpack(input);
    THTensor *probs = THTensor_newExpand(THPVariable_Unpack(objs[0]),
                                         self->ndim, self->sizes);
    THTensor *draws = probs == NULL
                          ? NULL
                          : THTensor_newBernoulli(probs, self->dtype, gen);
    int status = draws == NULL ? -1 : THTensor_copy(self, draws);
    THTensor_release(draws);
    THTensor_release(probs);
    if (status < 0) {
        return THPUtils_setErrorFromTH();
    }
    return Py_NewRef(input);
}

/* ---- the samplers that make a new tensor ------------------------------------------ */

/* multinomial(input, num_samples, replacement=False, *, generator=None) */
static PyObject *
multinomial_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
    static const char *const names[] = {"num_samples", "replacement",
                                        "generator"};
    PyObject *objs[3];
    int64_t nsamples;
    int replacement = 0;
    THGenerator *gen;
    if (THPUtils_parseArgs("multinomial", args, nargs, kwnames, names, 3, 2,
                           objs)
        < 0) {
        return NULL;
    }
    if (objs[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "multinomial() missing required "
                                         "argument 'num_samples'");
        return NULL;
    }
    if (THPUtils_unpackLong(objs[0], "multinomial", "num_samples", &nsamples)
            < 0
        || (objs[1] != NULL
            && (replacement = PyObject_IsTrue(objs[1])) < 0)
        || THPGenerator_parse("multinomial", objs[2], &gen) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(THTensor_newMultinomial(
        THPVariable_Unpack(input), nsamples, replacement, gen));
}

/* bernoulli(input, *, generator=None): 1 with probability input[i];
 * bernoulli(input, p, *, generator=None): 1 with probability p, shaped
 * like input. */
static PyObject *
bernoulli_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"p", "generator"};
    PyObject *objs[2];
    double p = 0.5;
    THGenerator *gen;
    if (THPUtils_parseArgs("bernoulli", args, nargs, kwnames, names, 2, 1,
                           objs)
            < 0
        || parse_double(objs[0], &p) < 0
        || THPGenerator_parse("bernoulli", objs[1], &gen) < 0) {
        return NULL;
    }
    THTensor *self = THPVariable_Unpack(input);
    if (objs[0] == NULL) {
        return THPVariable_Wrap(THTensor_newBernoulli(self, self->dtype, gen));
    }
    THTensor *result = THTensor_newEmpty(self->ndim, self->sizes, self->dtype,
                                         TH_DEVICE_CPU);
    if (result != NULL && THTensor_bernoulli(result, gen, p) < 0) {
        THTensor_release(result);
        result = NULL;
    }
    return THPVariable_Wrap(result);
}

/* poisson(input, generator=None) */
static PyObject *
poisson_impl(PyObject *input, PyObject *const *args, Py_ssize_t nargs,
             PyObject *kwnames)
{
    static const char *const names[] = {"generator"};
    PyObject *objs[1];
    THGenerator *gen;
    if (THPUtils_parseArgs("poisson", args, nargs, kwnames, names, 1, 1, objs)
            < 0
        || THPGenerator_parse("poisson", objs[0], &gen) < 0) {
        return NULL;
    }
    return THPVariable_Wrap(
        THTensor_newPoisson(THPVariable_Unpack(input), gen));
}

#define THP_DEFINE_METHOD_ONLY(name)                                         \
    static PyObject *THPMethod_##name(PyObject *self, PyObject *const *args, \
                                      Py_ssize_t nargs, PyObject *kwnames)   \
    {                                                                        \
        return name##_impl(self, args, nargs, kwnames);                      \
    }

THP_DEFINE_OP(multinomial)
THP_DEFINE_OP(bernoulli)

/* torch.poisson has no tensor-method form. */
static PyObject *
THPFunction_poisson(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    (void)module;
    return THPUtils_callOpFunction("poisson", poisson_impl, args, nargs,
                                   kwnames);
}
THP_DEFINE_METHOD_ONLY(uniform_)
THP_DEFINE_METHOD_ONLY(normal_)
THP_DEFINE_METHOD_ONLY(random_)
THP_DEFINE_METHOD_ONLY(exponential_)
THP_DEFINE_METHOD_ONLY(bernoulli_)
#undef THP_DEFINE_METHOD_ONLY

PyMethodDef THPRandom_functions[] = {
    THP_FUNCTION_ENTRY("multinomial", multinomial,
                       "multinomial(input, num_samples, replacement=False, "
                       "*, generator=None): category indices drawn from "
                       "the weights in input's last dim."),
    THP_FUNCTION_ENTRY("bernoulli", bernoulli,
                       "bernoulli(input, *, generator=None): 1 with "
                       "probability input[i], else 0."),
    THP_FUNCTION_ENTRY("poisson", poisson,
                       "poisson(input, generator=None): Poisson counts with "
                       "rates input."),
    {NULL, NULL, 0, NULL},
};

PyMethodDef THPVariable_random_methods[] = {
    THP_METHOD_ENTRY("multinomial", multinomial, NULL),
    THP_METHOD_ENTRY("bernoulli", bernoulli, NULL),
    THP_METHOD_ENTRY("uniform_", uniform_,
                     "uniform_(from=0, to=1, *, generator=None)"),
    THP_METHOD_ENTRY("normal_", normal_,
                     "normal_(mean=0, std=1, *, generator=None)"),
    THP_METHOD_ENTRY("random_", random_,
                     "random_(from=0, to=None, *, generator=None)"),
    THP_METHOD_ENTRY("exponential_", exponential_,
                     "exponential_(lambd=1, *, generator=None)"),
    THP_METHOD_ENTRY("bernoulli_", bernoulli_,
                     "bernoulli_(p=0.5, *, generator=None)"),
    {NULL, NULL, 0, NULL},
};
