"""Random numbers on the GPU: Philox4x32-10 kernels and the CUDA generator.

A counter-based generator needs no state in device memory: Philox4x32-10
(Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
maps a 128-bit counter and a 64-bit key to four random 32-bit words by ten
rounds of multiplications and XORs, so every thread computes its own words
from (seed, its element's index) in any order, and a launch is
reproducible however the grid is shaped.  PyTorch's CUDA generator is also
Philox4x32-10 (its counter layout differs, so the streams differ).

Element i of a call takes words from counter (offset + i // per_call_group,
0, 0) under key = seed: float32, float16 and bfloat16 use one word a value
(4 a group), float64, randint and bernoulli two (2 a group).  The
generator's offset then moves past the groups the call used, so the next
call draws fresh counters (ember.cuda.manual_seed resets it).

  uniform      [low, high): 24 (float32), 53 (float64), 11 (float16) or 8
               (bfloat16) random bits scaled, a draw that rounds up to high
               stepped down (Note [A uniform draw stays below high]);
  normal       mean + std * Box-Muller of pairs of uniforms in (0, 1];
  randint      low + a 64-bit word (two 32-bit ones) modulo the range, in
               every dtype (range 0 stands for 2^64: random_ of all int64);
  exponential  -log(1 - u) / lambd, u uniform in [0, 1) (24 or 53 bits);
  bernoulli    1 where a 53-bit uniform u < p, else 0, in every dtype: p a
               number, or (bernoulli_tensor) a dense float64 tensor's
               element i.

float16 and bfloat16 values are computed in float32 and rounded once to
their format (ember_store: Note [Half precision on the device] in
_kernels.py), as the CPU's samplers (c/th/THRandom.c's store_draw).

Testing without a GPU: tests/test_cuda_launcher.py runs the kernels in the
CPU emulation and checks them against `philox` below (a NumPy transcription)
and against Random123's published known-answer vectors.
"""

import functools
import warnings

import numpy as np

import ember

from . import _pointwise

__all__ = ["DISTRIBUTIONS", "DTYPES", "philox", "random_bounds", "kernel_keys", "dtypes_of",
           "kernel_name", "kernel_source", "kernel_parameters", "headers", "groups", "CUDAGenerator",
           "default_generator"]

PRELUDE_NAME = "ember_random.h"
DISTRIBUTIONS = ("uniform", "normal", "randint", "exponential", "bernoulli",
                 "bernoulli_tensor")
DTYPES = {name: ctype for name, (_, ctype) in _pointwise.DTYPES.items()}
FLOATING = ("float32", "float64", "float16", "bfloat16")
# What a value is stored from: the 16-bit formats are computed in float32,
# as on the CPU (an integer draw too: c/th/THDtype.h's TH_FROM_FLOAT).
STORED_FROM = dict(DTYPES, float16="float", bfloat16="float")
# The 16-bit formats' significant bits: a uniform draw's u has as many
# (THRandom.c's TH_DEFINE_UNIFORM_NARROW, PyTorch's too), so each u in
# [0, 1) is exact in the format.
NARROW_DIGITS = {"float16": 11, "bfloat16": 8}
# Philox's constants (Random123's PHILOX_M4x32_0/1 and PHILOX_W32_0/1).
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85


def philox(counter, key, rounds=10):
    """Philox4x32 of uint32 arrays: counter (4, n), key (2, n) -> (4, n)."""
    c = [np.asarray(w, np.uint64) for w in counter]
    k = [np.asarray(w, np.uint64) for w in key]
    mask = np.uint64(0xFFFFFFFF)
    for r in range(rounds):
        if r:
            k = [(k[0] + np.uint64(W0)) & mask, (k[1] + np.uint64(W1)) & mask]
        p0, p1 = np.uint64(M0) * c[0], np.uint64(M1) * c[2]
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & mask, p1 >> np.uint64(32), p1 & mask
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
    return np.array(c, dtype=np.uint32)


_PRELUDE = f"""\
#ifndef EMBER_RANDOM_H
#define EMBER_RANDOM_H
/* the pointwise prelude: its NVRTC typedefs of the 8- and 16-bit integers */
#include "{_pointwise.PRELUDE_NAME}"

/* Philox4x32-10: four 32-bit words from a 128-bit counter and a 64-bit key. */
struct EmberPhilox {{
    uint32_t x[4];
}};

static __device__ __forceinline__ uint32_t
ember_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{{
    uint64_t product = (uint64_t)a * b;
    *hi = (uint32_t)(product >> 32);
    return (uint32_t)product;
}}

static __device__ __forceinline__ EmberPhilox
ember_philox(uint64_t counter, uint64_t seed)
{{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; round++) {{
        if (round > 0) {{
            k0 += 0x{W0:08X}u;
            k1 += 0x{W1:08X}u;
        }}
        uint32_t hi0, hi1;
        uint32_t lo0 = ember_mulhilo(0x{M0:08X}u, c0, &hi0);
        uint32_t lo1 = ember_mulhilo(0x{M1:08X}u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }}
    EmberPhilox r = {{{{c0, c1, c2, c3}}}};
    return r;
}}

/* Uniform in [0, 1) from the top 24 bits of one word, or 53 of two. */
static __device__ __forceinline__ float
ember_unit_float(uint32_t w)
{{
    return (float)(w >> 8) * (1.0f / 16777216.0f);
}}

static __device__ __forceinline__ double
ember_unit_double(uint32_t hi, uint32_t lo)
{{
    return (double)(((uint64_t)(hi >> 6) << 27) | (lo >> 5)) * (1.0 / 9007199254740992.0);
}}

/* Uniform in [0, 1) from the top `digits` bits of one word (a 16-bit
 * format's significant bits: NARROW_DIGITS). */
static __device__ __forceinline__ float
ember_unit_narrow(uint32_t w, int digits)
{{
    return (float)(w >> (32 - digits)) * (1.0f / (float)(1u << digits));
}}

/* Note [A uniform draw stays below high]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * low + u * (high - low) with u < 1 can still round up to high itself:
 * float32's 1 + (1 - 2^-24) is 2, and float16's u = 1 - 2^-11 gives 2 in
 * uniform(1, 2) one draw in 2048.  Such a draw is stored as the dtype's
 * next value below high (when that is not below low), keeping the range
 * half-open as c/th/THRandom.c's samplers do: nextafter for float32 and
 * float64, one step of the format (THRandom.c's narrow_below) for the
 * 16-bit ones. */
static __device__ __forceinline__ void
ember_store_uniform(float &out, float value, double low, double high)
{{
    float lo = (float)low, hi = (float)high;
    out = lo < hi && !(value < hi) ? nextafterf(hi, lo) : value;
}}

static __device__ __forceinline__ void
ember_store_uniform(double &out, double value, double low, double high)
{{
    out = low < high && !(value < high) ? nextafter(high, low) : value;
}}

/* The next 16-bit float below `bits`, finite: both formats are sign and
 * magnitude, the sign in bit 15 (below +-0: the negative subnormal
 * nearest zero). */
static __device__ __forceinline__ uint16_t
ember_narrow_below(uint16_t bits)
{{
    if ((bits & 0x7fff) == 0) {{
        return 0x8001;
    }}
    return (bits & 0x8000) ? (uint16_t)(bits + 1) : (uint16_t)(bits - 1);
}}

/* float16 and bfloat16: value rounded once to the format, then stepped. */
template <typename Narrow>
static __device__ __forceinline__ void
ember_store_uniform(Narrow &out, float value, double low, double high)
{{
    Narrow v;
    ember_store(v, value);
    if (!(ember_widen(v) < high)) {{
        Narrow below = {{ember_narrow_below(v.bits)}};
        if (ember_widen(below) >= low) {{
            v = below;
        }}
    }}
    out = v;
}}
#endif
"""

# Per distribution: the kernel's parameters after (out, n, seed, offset),
# and (_VALUE_CTYPES) what the value `v` of element i is computed in where
# that is not the dtype's STORED_FROM type.
_PARAMETERS = {"uniform": [("double", "a_"), ("double", "b_")],
               "normal": [("double", "a_"), ("double", "b_")],
               "randint": [("int64_t", "low"), ("uint64_t", "range")],
               "exponential": [("double", "lambd")],
               "bernoulli": [("double", "p")],
               "bernoulli_tensor": [("const double *", "p")]}
_VALUE_CTYPES = {"randint": "int64_t", "bernoulli": "bool", "bernoulli_tensor": "bool"}
# uniform and normal compute in their dtype's arithmetic type.
_PREAMBLE = "const {compute} a = ({compute})a_, b = ({compute})b_;"

# Box-Muller in float32: the pair (2m, 2m + 1) shares a radius; 1 - u is in (0, 1]
_NORMAL_FLOAT = (
    "float u1 = 1.0f - ember_unit_float(r.x[j & ~1]);\n"
    "        float u2 = ember_unit_float(r.x[j | 1]);\n"
    "        float radius = sqrtf(-2.0f * logf(u1));\n"
    "        float angle = 6.2831853071795864769f * u2;\n"
    "        v = a + b * radius * ((j & 1) ? sinf(angle) : cosf(angle));")
# 1 - u is in (0, 1]: the logarithm is finite
_EXPONENTIAL_FLOAT = "v = -logf(1.0f - ember_unit_float(r.x[j])) / (float)lambd;"
# the 53-bit u of ember_unit_double: p = 0 never draws 1, p = 1 always
_BERNOULLI_U = "ember_unit_double(r.x[2 * j], r.x[2 * j + 1])"

_BODIES = {
    ("uniform", "float32"): "v = a + (b - a) * ember_unit_float(r.x[j]);",
    ("uniform", "float64"): "v = a + (b - a) * ember_unit_double(r.x[2 * j], r.x[2 * j + 1]);",
    **{("uniform", dtype): f"v = a + (b - a) * ember_unit_narrow(r.x[j], {digits});"
       for dtype, digits in NARROW_DIGITS.items()},
    ("normal", "float32"): _NORMAL_FLOAT,
    **{("normal", dtype): _NORMAL_FLOAT for dtype in NARROW_DIGITS},
    ("normal", "float64"): (
        "double u1 = 1.0 - ember_unit_double(r.x[0], r.x[1]);\n"
        "        double u2 = ember_unit_double(r.x[2], r.x[3]);\n"
        "        double radius = sqrt(-2.0 * log(u1));\n"
        "        double angle = 6.2831853071795864769 * u2;\n"
        "        v = a + b * radius * ((j & 1) ? sin(angle) : cos(angle));"),
    ("exponential", "float32"): _EXPONENTIAL_FLOAT,
    **{("exponential", dtype): _EXPONENTIAL_FLOAT for dtype in NARROW_DIGITS},
    ("exponential", "float64"):
        "v = -log(1.0 - ember_unit_double(r.x[2 * j], r.x[2 * j + 1])) / lambd;",
    # low + (64 random bits mod range), range = high - low on the host (0: all
    # 2^64 values), in int64 as the CPU's randint, then converted to the dtype
    **{("randint", dtype): (
        "uint64_t bits = ((uint64_t)r.x[2 * j] << 32) | r.x[2 * j + 1];\n"
        "        v = (int64_t)((uint64_t)low + (range ? bits % range : bits));")
       for dtype in DTYPES},
    **{("bernoulli", dtype): f"v = {_BERNOULLI_U} < p;" for dtype in DTYPES},
    **{("bernoulli_tensor", dtype): f"v = {_BERNOULLI_U} < p[i];" for dtype in DTYPES},
}


def _check_key(distribution, dtype):
    if (distribution, dtype) not in _BODIES:
        raise ValueError(f"no {distribution} kernel for {dtype!r}")


def kernel_keys():
    """Every (distribution, dtype) there is a kernel for."""
    return sorted(_BODIES)


def dtypes_of(distribution):
    """The dtypes `distribution` has kernels for, in DTYPES' order."""
    return [dtype for dtype in DTYPES if (distribution, dtype) in _BODIES]


def _store(distribution, dtype):
    """The statement that stores `v` as element i."""
    if distribution == "uniform":
        return "ember_store_uniform(out[i], v, a_, b_);"
    if distribution in _VALUE_CTYPES:
        return f"ember_store(out[i], ({STORED_FROM[dtype]})v);"
    return "ember_store(out[i], v);"


def kernel_name(distribution, dtype):
    return f"ember_{distribution}_{dtype}"


def values_per_group(distribution, dtype):
    """How many values one Philox call (four words) gives."""
    two_words = distribution in _VALUE_CTYPES or dtype == "float64"
    return 2 if two_words else 4


@functools.cache
def kernel_source(distribution, dtype):
    """out[i] for i < n, from Philox group offset + i / G (G values a group),
    with the distribution's parameters (_PARAMETERS)."""
    _check_key(distribution, dtype)
    group = values_per_group(distribution, dtype)
    value = _VALUE_CTYPES.get(distribution, STORED_FROM[dtype])
    preamble = (_PREAMBLE.format(compute=value) if distribution in ("uniform", "normal")
                else "")
    signature = ", ".join(f"{ctype}{'' if ctype.endswith('*') else ' '}{name}"
                          for ctype, name in kernel_parameters(distribution, dtype))
    return (f'#include "{PRELUDE_NAME}"\n\n'
            f'extern "C" __global__ void\n'
            f"{kernel_name(distribution, dtype)}({signature})\n"
            f"{{\n"
            + (f"    {preamble}\n" if preamble else "") +
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"        EmberPhilox r = ember_philox(offset + (uint64_t)(i / {group}), seed);\n"
            f"        const int j = (int)(i % {group});\n"
            f"        {value} v;\n"
            f"        {_BODIES[(distribution, dtype)]}\n"
            f"        {_store(distribution, dtype)}\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(distribution, dtype):
    return [(f"{DTYPES[dtype]} *", "out"), ("int64_t", "n"), ("uint64_t", "seed"),
            ("uint64_t", "offset"), *_PARAMETERS[distribution]]


def headers():
    return dict(_pointwise.headers(), **{PRELUDE_NAME: _PRELUDE})


def groups(distribution, dtype, numel):
    """The Philox counters a call of `numel` values uses."""
    group = values_per_group(distribution, dtype)
    return -(-numel // group)


# ---- random_'s range: PyTorch's checks (aten/src/ATen/native/DistributionTemplates.h) --

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
# Integers: the dtype's range; floats: the finite range, and the integers
# the format holds exactly, [-(2^digits), 2^digits].
_INTEGER_LIMITS = {"bool": (0, 1), "uint8": (0, 255), "int8": (-128, 127),
                   "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
                   "int64": (INT64_MIN, INT64_MAX)}
_FLOAT_LIMITS = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
                 "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
DIGITS = dict(NARROW_DIGITS, float32=24, float64=53)


def _through(dtype, value):
    """int64 -> dtype -> int64, as C++'s static_casts (the CPU's conversions)."""
    return ember.tensor(value, dtype=ember.int64).to(getattr(ember, dtype)).long().item()


def _bit_length_below(value):
    """The n of PyTorch's update_from/update_to: floor(log2 |value|)."""
    return max(abs(value).bit_length() - 1, 0)


def _update_from(dtype, low):
    """A float dtype's `from` moved up when low + 1 rounds below it."""
    plus_one = _through(dtype, low + 1)
    if plus_one < low:
        low = plus_one + (1 << (_bit_length_below(low + 1) - DIGITS[dtype] + 1))
    return low


def _update_to(dtype, high):
    """A float dtype's `to` moved down when high - 1 rounds up to it or past."""
    minus_one = _through(dtype, high - 1)
    if minus_one >= high:
        high = minus_one - (1 << (_bit_length_below(high - 1) - DIGITS[dtype] + 1))
    return high


def _check_in_range(dtype, low, to_inc):
    """PyTorch's check_from_to_in_range: both ends in the dtype's range,
    and a warning for a float format's beyond the integers it holds exactly."""
    name = _pointwise.CPP_TYPE_NAMES[dtype]
    lowest, largest = ((-_FLOAT_LIMITS[dtype], _FLOAT_LIMITS[dtype]) if dtype in FLOATING
                       else _INTEGER_LIMITS[dtype])
    for value, what in ((low, "from"), (to_inc, "to - 1")):
        if not lowest <= value <= largest:
            raise RuntimeError(f"{what} is out of bounds for {name}")
    if dtype in FLOATING:
        exact = 1 << DIGITS[dtype]
        for value, what in ((low, "from"), (to_inc, "to - 1")):
            if not -exact <= value <= exact:
                warnings.warn(f"{what} is out of bounds [-(2^{DIGITS[dtype]}), "
                              f"2^{DIGITS[dtype]}]. Due to precision limitations {name} can "
                              f"support discrete uniform distribution only within this range. "
                              f"This warning will become an error in version 1.7 release, "
                              f"please fix the code in advance", UserWarning, stacklevel=4)


def random_bounds(dtype, low, high=None):
    """(low, range) of randint's kernel for random_(low, high) of `dtype`:
    [low, high), or with high None [low, the dtype's largest value] (the
    integers a float format holds exactly: [low, 2^digits]); range 0 is
    all 2^64 int64s.  PyTorch's random_from_to_impl, its checks and errors."""
    if high is not None:
        if not low < high:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={low} >= to={high}")
        if dtype in FLOATING:
            low, high = _update_from(dtype, low), _update_to(dtype, high)
            if not low < high:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than "
                                   f"'to' casted to dtype, but got from={low} >= to={high}")
        _check_in_range(dtype, low, high - 1)
        return low, (high - low) % 2**64
    if low == INT64_MIN:  # all 2^64 int64s, stored in the dtypes that span them
        if dtype not in ("int64", "float32", "float64", "bfloat16"):
            raise RuntimeError("random_full_64_bits_range_kernel_cuda handles only int64, "
                               "double, float and bfloat16")
        return low, 0
    if dtype in FLOATING:
        to_inc = 1 << DIGITS[dtype]
        low = _update_from(dtype, low)
        if not low < to_inc:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or "
                               f"equal to 'to_inc' casted to dtype, but got from={low} > "
                               f"to_inc={to_inc}")
    else:
        to_inc = _INTEGER_LIMITS[dtype][1]
    _check_in_range(dtype, low, to_inc)
    return low, (to_inc - low + 1) % 2**64


class CUDAGenerator:
    """The state of ember's CUDA random numbers: a seed and the counter
    offset of the next call (torch.cuda's default generator's role)."""

    def __init__(self, seed=67280421310721):
        self.manual_seed(seed)

    def manual_seed(self, seed):
        self._seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.offset = 0
        return self

    def initial_seed(self):
        return self._seed

    def take(self, distribution, dtype, numel):
        """(seed, offset) for a call of `numel` values; advances the offset."""
        offset = self.offset
        self.offset += groups(distribution, dtype, numel)
        return self._seed, offset

    def get_state(self):
        """16 bytes: the seed and the offset, little-endian uint64s."""
        return np.array([self._seed, self.offset], dtype="<u8").view(np.uint8)

    def set_state(self, state):
        words = np.asarray(state, dtype=np.uint8)
        if words.shape != (16,):
            raise RuntimeError("ember.cuda's generator state is 16 bytes (seed, offset)")
        self._seed, self.offset = (int(w) for w in words.view("<u8"))


default_generator = CUDAGenerator()
