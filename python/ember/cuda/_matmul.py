"""The CUDA source of ember's float16/bfloat16 matrix product.

float32 and float64 products go to cuBLAS (the runtime's matmul).  The
16-bit formats get a kernel of ember's own, so they compute what the CPU's
Note [Half-precision matmul] computes: every element widened to float32,
the products summed in float32, the sum rounded once to the format.  (CuPy,
through which ember reaches cuBLAS, has no bfloat16 array type.)

Note [A tiled product]
~~~~~~~~~~~~~~~~~~~~~~
C is cut into TILE x TILE tiles, one block of TILE * TILE threads per
tile, each thread one element of C.  The block walks k in steps of TILE:
its threads load a TILE x TILE piece of A and one of B into shared memory
(each thread one element of each, widened to float32), wait for each
other (__syncthreads), and then each thread adds its row of the A piece
times its column of the B piece to its sum.  So every element of A and B
is read from device memory once per tile that needs it instead of once
per element of C, and TILE threads in a row read consecutive elements when
the operands are row-major.  A piece that runs past m, n or k is padded
with zeros, which add nothing to a sum that is stored.

Each product is added with an explicit fmaf, in order of k: the same
roundings under NVRTC (which would otherwise contract a * b + c at will)
and under the CPU emulation (built with -ffp-contract=off).  Batches (one
stride per operand, 0 for a broadcast operand) and tiles are numbered in
one sequence that the grid's blocks share out, a grid-stride loop over
tiles.
"""

import ctypes
import functools

from . import _kernels

__all__ = ["TILE", "DTYPES", "MatmulShape", "kernel_name", "kernel_source",
           "kernel_parameters", "headers", "tile_count", "shape_of"]

TILE = 16
DTYPES = ("float16", "bfloat16")

_SHAPE_NAME = "EmberMatmulShape"


class MatmulShape(ctypes.Structure):
    """The kernel's description of C[b] = A[b] @ B[b], strides in elements,
    in the order (batch, row, column)."""
    _fields_ = [("batch", ctypes.c_int64), ("m", ctypes.c_int64), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("a_strides", ctypes.c_int64 * 3),
                ("b_strides", ctypes.c_int64 * 3), ("c_strides", ctypes.c_int64 * 3)]


def shape_of(a, b, c):
    """MatmulShape of 3-d tensors a (batch, m, k), b (batch, k, n) and
    c (batch, m, n)."""
    batch, m, k = a.shape
    n = b.shape[2]
    return MatmulShape(batch, m, n, k, (ctypes.c_int64 * 3)(*a.stride()),
                       (ctypes.c_int64 * 3)(*b.stride()), (ctypes.c_int64 * 3)(*c.stride()))


def tile_count(shape):
    def tiles(extent):
        return -(-extent // TILE)
    return shape.batch * tiles(shape.m) * tiles(shape.n)


def kernel_name(dtype):
    return f"ember_matmul_{dtype}"


@functools.cache
def kernel_source(dtype):
    """C = A @ B for one 16-bit dtype (Note [A tiled product])."""
    if dtype not in DTYPES:
        raise ValueError(f"no matmul kernel for {dtype!r}")
    ctype = _kernels.DTYPES[dtype]
    return f"""\
#include "{_kernels.PRELUDE_NAME}"

#ifndef EMBER_MATMUL_SHAPE
#define EMBER_MATMUL_SHAPE
#define EMBER_TILE {TILE}
typedef struct {{
    int64_t batch, m, n, k;
    int64_t a_strides[3], b_strides[3], c_strides[3]; /* batch, row, column */
}} {_SHAPE_NAME};
#endif

extern "C" __global__ void
{kernel_name(dtype)}(const {ctype} *a, const {ctype} *b, {ctype} *c, {_SHAPE_NAME} s)
{{
    __shared__ float a_piece[EMBER_TILE][EMBER_TILE];
    __shared__ float b_piece[EMBER_TILE][EMBER_TILE];
    const int r = (int)threadIdx.x / EMBER_TILE, q = (int)threadIdx.x % EMBER_TILE;
    const int64_t row_tiles = (s.m + EMBER_TILE - 1) / EMBER_TILE;
    const int64_t column_tiles = (s.n + EMBER_TILE - 1) / EMBER_TILE;
    const int64_t tiles = s.batch * row_tiles * column_tiles;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{
        const int64_t batch = tile / (row_tiles * column_tiles);
        const int64_t in_batch = tile % (row_tiles * column_tiles);
        const int64_t row = in_batch / column_tiles * EMBER_TILE + r;
        const int64_t column = in_batch % column_tiles * EMBER_TILE + q;
        const {ctype} *a_rows = a + batch * s.a_strides[0];
        const {ctype} *b_rows = b + batch * s.b_strides[0];
        float sum = 0.0f;
        for (int64_t k0 = 0; k0 < s.k; k0 += EMBER_TILE) {{
            /* thread (r, q) loads A[row, k0 + q] and B[k0 + r, column] */
            a_piece[r][q] = row < s.m && k0 + q < s.k
                                ? ember_widen(a_rows[row * s.a_strides[1]
                                                     + (k0 + q) * s.a_strides[2]])
                                : 0.0f;
            b_piece[r][q] = k0 + r < s.k && column < s.n
                                ? ember_widen(b_rows[(k0 + r) * s.b_strides[1]
                                                     + column * s.b_strides[2]])
                                : 0.0f;
            __syncthreads();
            for (int j = 0; j < EMBER_TILE; j++) {{
                sum = fmaf(a_piece[r][j], b_piece[j][q], sum);
            }}
            __syncthreads(); /* the pieces are read before the next load */
        }}
        if (row < s.m && column < s.n) {{
            ember_store(c[batch * s.c_strides[0] + row * s.c_strides[1]
                          + column * s.c_strides[2]],
                        sum);
        }}
    }}
}}
"""


def kernel_parameters(dtype):
    ctype = _kernels.DTYPES[dtype]
    return [(f"const {ctype} *", "a"), (f"const {ctype} *", "b"), (f"{ctype} *", "c"),
            (_SHAPE_NAME, "s")]


def headers():
    return _kernels.headers()
