/*
 * THHalf.h -- the two 16-bit floating formats and their conversions to and
 * from float32 (Note [Half-precision dtypes] in THDtype.h).
 *
 *     float16  (IEEE binary16): sign, 5 exponent bits, 10 mantissa bits
 *     bfloat16:                 sign, 8 exponent bits,  7 mantissa bits
 *
 * Every conversion goes through float32, as PyTorch's do: an int64 or a
 * float64 is first converted to float32, then rounded to 16 bits (so a
 * float64 may be rounded twice, exactly as in PyTorch).
 *
 * Note [Half conversions bit for bit]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The results match PyTorch's tensor casts (`.to()`, which run its
 * vectorised conversions) on every input, NaNs included:
 *
 *   - float32 -> float16 rounds to nearest, ties to even; past 65520 (the
 *     midpoint between the largest half, 65504, and 2^16) it gives inf;
 *     below 2^-14 it gives subnormals, rounded the same way.  A NaN keeps
 *     its sign and the top 10 bits of its payload and becomes quiet (bit 9
 *     set): what the F16C instruction vcvtps2ph does.
 *   - float16 -> float32 is exact; a NaN keeps sign and payload (shifted
 *     up 13 bits) and becomes quiet (bit 22 set), as vcvtph2ps does.
 *   - float32 -> bfloat16 rounds to nearest, ties to even, on the bits
 *     (subnormals are not flushed); every NaN becomes 0xFFFF, the value
 *     PyTorch's AVX2 conversion writes.  (PyTorch's scalar path writes
 *     0x7FC0 instead, e.g. for torch.tensor(nan, dtype=torch.bfloat16);
 *     ember has one conversion, so its NaN bits differ there.)
 *   - bfloat16 -> float32 shifts the bits up 16: exact, NaNs unchanged.
 */
#ifndef TH_HALF_H
#define TH_HALF_H

#include <stdint.h>
#include <string.h>

typedef struct {
    uint16_t bits;
} THHalf;

typedef struct {
    uint16_t bits;
} THBFloat16;

static inline uint32_t
TH_floatBits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

static inline float
TH_floatFromBits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

/* Rounds the magnitude `abs` (a float32 below 2^-14, float16's smallest
 * normal) to a multiple of 2^-24, float16's subnormal step: the integer
 * significand shifted right with round-half-to-even on the dropped bits.
 * A result of 0x400 is the smallest normal, whose bit pattern it is. */
static inline uint16_t
TH_halfSubnormalBits(uint32_t abs)
{
    uint32_t exponent = abs >> 23;
    if (exponent < 102) {
        return 0; /* below 2^-25: rounds to zero (2^-25 itself is a tie) */
    }
    uint32_t significand = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exponent; /* 14 .. 24 */
    uint32_t kept = significand >> shift;
    uint32_t dropped = significand & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    kept += dropped > halfway || (dropped == halfway && (kept & 1));
    return (uint16_t)kept;
}

static inline THHalf
THHalf_fromFloat(float value)
{
    uint32_t bits = TH_floatBits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t abs = bits & 0x7fffffff;
    THHalf half;
    if (abs > 0x7f800000) { /* NaN: quiet, top payload bits kept */
        half.bits = sign | 0x7e00 | (uint16_t)((abs >> 13) & 0x3ff);
    }
    else if (abs >= 0x477ff000) { /* >= 65520: inf */
        half.bits = sign | 0x7c00;
    }
    else if (abs < 0x38800000) { /* < 2^-14 */
        half.bits = sign | TH_halfSubnormalBits(abs);
    }
    else {
        /* Rebias the exponent (127 -> 15) and round the 13 dropped bits to
         * nearest even: adding 0xfff plus the lowest kept bit carries into
         * the kept bits exactly when rounding up. */
        uint32_t odd = (abs >> 13) & 1;
        uint32_t rounded = abs - (112u << 23) + 0xfff + odd;
        half.bits = sign | (uint16_t)(rounded >> 13);
    }
    return half;
}

static inline float
THHalf_toFloat(THHalf half)
{
    uint32_t sign = (uint32_t)(half.bits & 0x8000) << 16;
    uint32_t exponent = (half.bits >> 10) & 0x1f;
    uint32_t mantissa = half.bits & 0x3ff;
    if (exponent == 0x1f) { /* inf, or NaN made quiet */
        uint32_t quiet = mantissa != 0 ? 0x400000 : 0;
        return TH_floatFromBits(sign | 0x7f800000 | quiet | (mantissa << 13));
    }
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact */
        float magnitude = (float)mantissa * 0x1p-24f;
        return TH_floatFromBits(sign | TH_floatBits(magnitude));
    }
    return TH_floatFromBits(sign | ((exponent + 112) << 23)
                            | (mantissa << 13));
}

static inline THBFloat16
THBFloat16_fromFloat(float value)
{
    uint32_t bits = TH_floatBits(value);
    THBFloat16 result;
    if ((bits & 0x7fffffff) > 0x7f800000) {
        result.bits = 0xffff;
    }
    else {
        /* round the low 16 bits to nearest even (inf stays inf, the
         * largest finite values round up to inf) */
        result.bits = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    }
    return result;
}

static inline float
THBFloat16_toFloat(THBFloat16 value)
{
    return TH_floatFromBits((uint32_t)value.bits << 16);
}

/* Contiguous bulk conversions, for casts and matmul's packing: the float16
 * ones use the F16C instructions when the CPU has them (picked at run
 * time), which give the same bits as the scalar functions above. */
void THHalf_toFloatN(const THHalf *in, float *out, int64_t n);
void THHalf_fromFloatN(const float *in, THHalf *out, int64_t n);
void THBFloat16_toFloatN(const THBFloat16 *in, float *out, int64_t n);
void THBFloat16_fromFloatN(const float *in, THBFloat16 *out, int64_t n);

#endif /* TH_HALF_H */
