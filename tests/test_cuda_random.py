"""ember.cuda's random integers, exponential and Bernoulli draws, without a GPU.

randint/random_ in every dtype (PyTorch's range checks and adjustments
for float formats: _random.random_bounds), exponential_, bernoulli_ with
a number or a tensor of probabilities and torch.bernoulli, each one Philox
kernel (ember/cuda/_random.py) run in tests/cuda_emulation.py's runtime
(or on a GPU through CuPy where there is one).  In the emulation the
values are checked bit for bit against the Philox words they come from;
everywhere against their distribution's range and moments, and their
errors against PyTorch's (the CPU's for bernoulli and exponential).
"""

import re
import warnings

import numpy as np
import pytest

import ember
from ember.cuda import _launcher, _random

import cuda_emulation
from test_cuda_launcher import _words, device, runtime, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

try:
    import torch
except ImportError:  # the bounds below are PyTorch's, written out
    torch = None

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64"]
NEW = ("randint", "exponential", "bernoulli", "bernoulli_tensor")


@pytest.fixture(scope="module", autouse=True)
def kernels(runtime):
    """The integer, exponential and Bernoulli kernels of every dtype, in
    one g++ run."""
    runtime.preload("random_kernels", [_launcher._random_kernel(*key)
                                       for key in _random.kernel_keys() if key[0] in NEW])


def _emulated(device):
    return isinstance(device, cuda_emulation.EmulatedRuntime)


def _numbers(tensor):
    return tensor.cpu().double().numpy()


def _cpu_error(call):
    """The message of the RuntimeError `call` raises on the CPU, as a match
    for the whole message (an ExceptionInfo kept for the device's error would
    keep its frames, and their CUDA tensors, alive past the test)."""
    with pytest.raises(RuntimeError) as on_cpu:
        call()
    return "^" + re.escape(str(on_cpu.value)) + "$"


# ---- random_ and randint in every dtype ------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_random_integers_fill_every_dtype(device, dtype):
    low, high = {"bool": (0, 2), "uint8": (3, 11)}.get(dtype, (-3, 5))
    x = ember.empty(2000, dtype=getattr(ember, dtype), device="cuda").random_(low, high)
    assert x.is_cuda and x.dtype == getattr(ember, dtype)
    assert set(np.unique(_numbers(x))) == set(range(low, high))
    y = ember.randint(low, high, (3, 500), dtype=getattr(ember, dtype), device="cuda")
    assert y.dtype == getattr(ember, dtype) and y.shape == (3, 500)
    assert set(np.unique(_numbers(y))) == set(range(low, high))
    # random_(): from 0 to the largest integer the dtype holds (exactly)
    full = _numbers(ember.empty(4000, dtype=getattr(ember, dtype), device="cuda").random_())
    largest = {"bool": 1, "uint8": 255, "int8": 127, "int16": 2**15 - 1, "int32": 2**31 - 1,
               "int64": 2**63 - 1, "float16": 2**11, "bfloat16": 2**8, "float32": 2**24,
               "float64": 2**53}[dtype]
    assert full.min() >= 0 and full.max() <= largest and full.max() > largest * 0.9
    assert np.all(full == np.floor(full))


def test_randint_like_keeps_the_shape_and_dtype(device):
    like = ember.empty(40, 50, dtype=ember.int16, device="cuda")
    for x in (ember.randint_like(like, 7), ember.randint_like(like, -2, high=3),
              ember.randint_like(like, 7, device="cuda")):
        assert x.is_cuda and x.dtype == ember.int16 and x.shape == (40, 50)
        assert _numbers(x).min() >= -2 and _numbers(x).max() < 7
    floats = ember.randint_like(like, 1, 4, dtype=ember.float32)
    assert floats.dtype == ember.float32 and set(np.unique(_numbers(floats))) == {1, 2, 3}


def test_random_integers_are_philox_words_modulo_the_range(device):
    ember.cuda.manual_seed(11)
    x = ember.empty(5, dtype=ember.int16, device="cuda").random_(-7, 1000)
    words = _words(11, 0, 3).T.reshape(-1, 2).astype(np.uint64)  # two words a value
    bits = (words[:, 0] << np.uint64(32)) | words[:, 1]
    if _emulated(device):
        np.testing.assert_array_equal(_numbers(x), (bits[:5] % np.uint64(1007)).astype(np.int64)
                                      - 7)
    # all 2^64 int64s: random_(from=INT64_MIN) is the words themselves
    ember.cuda.manual_seed(11)
    y = ember.empty(5, dtype=ember.int64, device="cuda").random_(**{"from": -2**63})
    if _emulated(device):
        np.testing.assert_array_equal(y.cpu().numpy(),  # bits - 2^63: the top bit flipped
                                      (bits[:5] ^ np.uint64(1 << 63)).astype(np.int64))
    z = ember.empty(3, 4, dtype=ember.float64, device="cuda").t().random_(10)  # strided
    assert set(np.unique(_numbers(z))) <= set(range(10))


# (dtype, from, to): PyTorch's outcome in its own words, or its range.
_BOUNDS = [("bool", 0, 10, "to - 1 is out of bounds for bool"),
           ("bool", -1, 1, "from is out of bounds for bool"),
           ("uint8", -5, 5, "from is out of bounds for unsigned char"),
           ("int8", 0, 300, "to - 1 is out of bounds for signed char"),
           ("int16", 0, 70000, "to - 1 is out of bounds for short int"),
           ("int32", 0, 2**32 + 1, "to - 1 is out of bounds for int"),
           ("float16", 0, 70000, "to - 1 is out of bounds for c10::Half"),
           ("bfloat16", 299, 300, "random_ expects 'from' casted to dtype to be less than "
                                  "'to' casted to dtype, but got from=299 >= to=298"),
           ("float16", 3000, None, "random_ expects 'from' casted to dtype to be less than or "
                                   "equal to 'to_inc' casted to dtype, but got from=3000 > "
                                   "to_inc=2048"),
           ("int64", 5, 5, "random_ expects 'from' to be less than 'to', but got from=5 >= "
                           "to=5"),
           ("int8", -2**63, None, "random_full_64_bits_range_kernel_cuda handles only int64, "
                                  "double, float and bfloat16"),
           ("bfloat16", 0, 300, (0, 298)),  # 299 rounds up to 300 = to: to steps down
           ("int8", -5, None, (-5, 133)),
           ("float32", 0, None, (0, 2**24 + 1)),
           ("int64", 0, None, (0, 2**63)),
           ("int32", 0, 2**31, (0, 2**31))]


@pytest.mark.parametrize("dtype, low, high, outcome", _BOUNDS)
def test_random_bounds_are_pytorchs(dtype, low, high, outcome):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if isinstance(outcome, str):
            with pytest.raises(RuntimeError, match="^" + re.escape(outcome) + "$"):
                _random.random_bounds(dtype, low, high)
        else:
            assert _random.random_bounds(dtype, low, high) == outcome
        if torch is None:
            return
        draw = torch.empty(1000, dtype=getattr(torch, dtype)).random_
        if isinstance(outcome, str):  # PyTorch's CPU kernel names itself _cpu
            with pytest.raises(RuntimeError, match="^" + re.escape(outcome.replace("_cuda",
                                                                                   "_cpu"))):
                draw(**{"from": low, "to": high})
        else:
            drawn = draw(**{"from": low, "to": high}).double()
            start, span = outcome
            assert drawn.min() >= start and drawn.max() <= start + span - 1


def test_random_errors_and_warnings_on_the_device(device):
    with pytest.raises(RuntimeError, match="^to - 1 is out of bounds for bool$"):
        ember.randint(0, 5, (3,), dtype=ember.bool, device="cuda")
    with pytest.raises(TypeError, match=r"argument 'from' must be int, not float"):
        ember.empty(3, device="cuda").random_(0.5, 3)
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^8\), 2\^8\]"):
        ember.empty(3, dtype=ember.bfloat16, device="cuda").random_(0, 300)
    with pytest.raises(RuntimeError, match="generator"):
        ember.empty(3, device="cuda").random_(generator=ember.Generator())


# ---- exponential_ ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_exponential_on_the_device(device, dtype):
    ember.cuda.manual_seed(5)
    n = 20000
    x = _numbers(ember.empty(n, dtype=getattr(ember, dtype), device="cuda").exponential_(4.0))
    assert np.all(np.isfinite(x)) and x.min() >= 0
    assert abs(x.mean() - 0.25) < 0.01 and abs(x.std() - 0.25) < 0.01
    if _emulated(device) and dtype == "float32":  # -log(1 - u) / lambd, u the top 24 bits
        u = (_words(5, 0, n // 4).T.reshape(-1) >> 8) / 2.0**24
        expected = (-np.log1p(-u.astype(np.float32)) / np.float32(4)).astype(np.float32)
        np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-7)


def test_exponential_errors_are_the_cpus(device):
    for bad in (0, -1.5):
        with pytest.raises(RuntimeError, match=_cpu_error(lambda: ember.empty(3)
                                                          .exponential_(bad))):
            ember.empty(3, device="cuda").exponential_(bad)
    with pytest.raises(RuntimeError, match="dtype must be a floating point but you specified "
                                           "int32$"):
        ember.empty(3, dtype=ember.int32, device="cuda").exponential_()


# ---- bernoulli_ and bernoulli ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_bernoulli_of_a_number_in_every_dtype(device, dtype):
    ember.cuda.manual_seed(9)
    n = 20000
    x = ember.empty(n, dtype=getattr(ember, dtype), device="cuda").bernoulli_(0.3)
    assert x.dtype == getattr(ember, dtype)
    values = _numbers(x)
    assert set(np.unique(values)) == {0, 1} and abs(values.mean() - 0.3) < 0.015
    if _emulated(device):  # 1 where the 53-bit u < p
        words = _words(9, 0, n // 2).T.reshape(-1, 2).astype(np.uint64)
        u = (((words[:, 0] >> np.uint64(6)) << np.uint64(27)) | (words[:, 1] >> np.uint64(5))) \
            / 2.0**53
        np.testing.assert_array_equal(values, (u < 0.3).astype(np.float64))
    assert np.all(_numbers(ember.empty(50, dtype=getattr(ember, dtype),
                                       device="cuda").bernoulli_(0)) == 0)
    assert np.all(_numbers(ember.empty(50, dtype=getattr(ember, dtype),
                                       device="cuda").bernoulli_(1)) == 1)


def test_bernoulli_of_a_tensor_of_probabilities(device):
    p = ember.tensor([0.0, 1.0, 0.5, 0.1], device="cuda")
    x = ember.empty(5000, 4, dtype=ember.float16, device="cuda").bernoulli_(p)  # broadcast
    columns = _numbers(x).mean(axis=0)
    assert columns[0] == 0 and columns[1] == 1 and abs(columns[2] - 0.5) < 0.03
    assert abs(columns[3] - 0.1) < 0.02
    probabilities = ember.rand(3000, 4, dtype=ember.float64).cuda()
    drawn = ember.bernoulli(probabilities)
    assert drawn.is_cuda and drawn.dtype == ember.float64 and drawn.shape == (3000, 4)
    assert abs(_numbers(drawn).mean() - _numbers(probabilities).mean()) < 0.02
    halves = ember.bernoulli(ember.zeros(2000, device="cuda"), 0.5)
    assert halves.dtype == ember.float32 and abs(_numbers(halves).mean() - 0.5) < 0.04
    strided = ember.zeros(6, 8, dtype=ember.int64, device="cuda")[:, ::2].t()
    strided.bernoulli_(ember.tensor(1.0))  # a 0-dim CPU tensor goes with CUDA ones
    assert np.all(strided.cpu().numpy() == 1)


def test_bernoulli_errors_are_the_cpus(device):
    for p in (1.5, -0.1, float("nan")):
        with pytest.raises(RuntimeError, match=_cpu_error(lambda: ember.empty(3).bernoulli_(p))):
            ember.empty(3, device="cuda").bernoulli_(p)
    for bad in (ember.tensor([0.5, 1.5]), ember.tensor([0.5, float("nan")])):
        with pytest.raises(RuntimeError, match=_cpu_error(lambda: ember.bernoulli(bad))):
            ember.bernoulli(bad.cuda())
        with pytest.raises(RuntimeError, match=r"^Expected p_in >= 0 && p_in <= 1"):
            ember.empty(2, device="cuda").bernoulli_(bad.cuda())
