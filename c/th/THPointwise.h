/*
 * THPointwise.h -- elementwise operators with one, two or three inputs:
 * arithmetic, comparisons, logical and bitwise ops, where and clamp.
 *
 * An operator runs in three steps so that the caller can release the GIL
 * around the middle one only:
 *
 *     THPointwisePlan plan;
 *     if (THPointwise_prepare(&plan, op, args, &options) < 0) -> error
 *     THPointwise_execute(&plan);           (no allocation, no error)
 *     THTensor *result = THPointwise_finish(&plan);   (NULL on error)
 *
 * prepare does all the checking (type promotion, broadcasting, the out= and
 * in-place rules, integer division by zero), allocates the result and any
 * converted copy of an input, and sets up the iteration; it leaves nothing
 * allocated when it fails.  execute only runs inner loops (on the worker
 * threads when the work is large).  finish copies into an out= tensor of
 * another dtype if needed, bumps the written tensor's version counter and
 * releases the temporaries.  THPointwise_apply does all three.
 *
 * Note [Wrapped numbers]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * An input is either a tensor or a Python number (PyTorch calls those
 * "wrapped numbers").  Promotion (THPointwise_resultType) follows
 * torch.result_type: tensors with dims decide the dtype; 0-dim tensors and
 * then numbers only matter when they are of a higher category (bool <
 * integer < floating).  A float number counts as the default float dtype.
 * So int32 tensor + 2.5 is float32, float32 tensor + 2.5 stays float32,
 * uint8 tensor + 1000 stays uint8 (the number wraps), int32 tensor + 0-dim
 * int64 tensor is int32.  A number never becomes a tensor: prepare
 * converts it into a buffer inside the plan, iterated as a 0-dim operand.
 */
#ifndef TH_POINTWISE_H
#define TH_POINTWISE_H

#include "THIter.h"
#include "THTensor.h"

/* The operators, with PyTorch's kernel names (used in messages such as
 * "\"remainder_cpu\" not implemented for 'Bool'") and their arity.
 * ADD_ALPHA/SUB_ALPHA are a + alpha * b and a - alpha * b.  WHERE is
 * (condition, a, b); CLAMP is (x, min, max); LERP is (start, end, weight);
 * ADDCMUL/ADDCDIV are (input, tensor1, tensor2) with alpha as their
 * `value`. */
#define TH_FORALL_POINTWISE_OPS(_)            \
    _(ADD, "add_cpu", 2)                      \
    _(ADD_ALPHA, "add_cpu", 2)                \
    _(SUB, "sub_cpu", 2)                      \
    _(SUB_ALPHA, "sub_cpu", 2)                \
    _(MUL, "mul_cpu", 2)                      \
    _(DIV, "div_true_cpu", 2)                 \
    _(DIV_TRUNC, "div_trunc_cpu", 2)          \
    _(DIV_FLOOR, "div_floor_cpu", 2)          \
    _(REMAINDER, "remainder_cpu", 2)          \
    _(FMOD, "fmod_cpu", 2)                    \
    _(POW, "pow", 2)                          \
    _(MAXIMUM, "maximum_cpu", 2)              \
    _(MINIMUM, "minimum_cpu", 2)              \
    _(ATAN2, "atan2_cpu", 2)                  \
    _(HYPOT, "hypot_cpu", 2)                  \
    _(COPYSIGN, "copysign_cpu", 2)            \
    _(LOGADDEXP, "logaddexp_cpu", 2)          \
    _(LOGADDEXP2, "logaddexp2_cpu", 2)        \
    _(XLOGY, "xlogy_cpu", 2)                  \
    _(EQ, "eq_cpu", 2)                        \
    _(NE, "ne_cpu", 2)                        \
    _(LT, "lt_cpu", 2)                        \
    _(LE, "le_cpu", 2)                        \
    _(GT, "gt_cpu", 2)                        \
    _(GE, "ge_cpu", 2)                        \
    _(LOGICAL_AND, "logical_and_cpu", 2)      \
    _(LOGICAL_OR, "logical_or_cpu", 2)        \
    _(LOGICAL_XOR, "logical_xor_cpu", 2)      \
    _(BITWISE_AND, "bitwise_and_cpu", 2)      \
    _(BITWISE_OR, "bitwise_or_cpu", 2)        \
    _(BITWISE_XOR, "bitwise_xor_cpu", 2)      \
    _(LSHIFT, "lshift_cpu", 2)                \
    _(RSHIFT, "rshift_cpu", 2)                \
    _(NEG, "neg_cpu", 1)                      \
    _(ABS, "abs_cpu", 1)                      \
    _(SIGN, "sign_cpu", 1)                    \
    _(BITWISE_NOT, "bitwise_not_cpu", 1)      \
    _(LOGICAL_NOT, "logical_not_cpu", 1)      \
    _(WHERE, "where_cpu", 3)                  \
    _(CLAMP, "clamp_cpu", 3)                  \
    _(LERP, "lerp_kernel", 3)                 \
    _(ADDCMUL, "addcmul_cpu_out", 3)          \
    _(ADDCDIV, "addcdiv_cpu_out", 3)

typedef enum {
#define TH_POINTWISE_ENUM(NAME, name, arity) TH_OP_##NAME,
    TH_FORALL_POINTWISE_OPS(TH_POINTWISE_ENUM)
#undef TH_POINTWISE_ENUM
    TH_NUM_POINTWISE_OPS
} THPointwiseOp;

/* One input: a tensor (borrowed), or a number when tensor is NULL. */
typedef struct {
    THTensor *tensor;
    THScalar number;
} THPointwiseArg;

static inline THPointwiseArg
THPointwiseArg_tensor(THTensor *tensor)
{
    THPointwiseArg arg = {.tensor = tensor};
    return arg;
}

static inline THPointwiseArg
THPointwiseArg_number(THScalar number)
{
    THPointwiseArg arg = {.tensor = NULL, .number = number};
    return arg;
}

typedef struct {
    /* Where the result goes: NULL allocates a new tensor.  With `inplace`
     * it must be args[0]'s tensor (PyTorch's in-place rules and messages);
     * otherwise it is an out= tensor, which must have the broadcast shape
     * exactly.  Either way the result type must be castable to its dtype. */
    THTensor *out;
    bool inplace;
    /* alpha, for TH_OP_ADD_ALPHA and TH_OP_SUB_ALPHA, and the `value` of
     * TH_OP_ADDCMUL and TH_OP_ADDCDIV.  Ignored else. */
    THScalar alpha;
    /* The dtype a float number counts as (torch.get_default_dtype()), which
     * is also what true division and atan2 of integers give. */
    THDtype default_float;
} THPointwiseOptions;

/* Inputs are copied into the plan at most this many at a time. */
#define TH_POINTWISE_MAX_INPUTS 3

/* A fused streaming loop (Note [Fused streaming loops], THPointwise.c):
 * the loop's arguments, n a whole number of TH_STREAM_CHUNK-byte chunks of
 * the result; false, with nothing written, for a layout it does not take. */
typedef bool (*THStreamLoop)(char **data, const int64_t *strides, int64_t n,
                             void *ctx);

typedef struct {
    THIter iter;          /* the general path (flat == false) */
    bool flat;            /* every operand walks the data as one run */
    int64_t numel;
    int noperands;        /* output + inputs */
    char *flat_data[TH_POINTWISE_MAX_INPUTS + 1];
    int64_t flat_strides[TH_POINTWISE_MAX_INPUTS + 1];
    THLoop loop;
    THStreamLoop stream_loop; /* NULL: streams by blocks */
    /* Numbers and 1-element inputs converted to the compute dtype, and the
     * loop's scalar parameter; iterated in place, so a plan never moves
     * between prepare and finish. */
    union {
        int64_t i;
        double d;
    } buffers[TH_POINTWISE_MAX_INPUTS], param;
    THTensor *temporaries[TH_POINTWISE_MAX_INPUTS + 1]; /* owned or NULL */
    THTensor *result;     /* owned: what finish returns */
    THTensor *written;    /* owned: what the loops write (result, or a
                           * temporary copied into result by finish) */
    bool bump_version;    /* out= and in-place writes */
} THPointwisePlan;

int THPointwise_prepare(THPointwisePlan *plan, THPointwiseOp op,
                        const THPointwiseArg *args,
                        const THPointwiseOptions *options);
/* Runs the plan.  A large flat result that shares no memory with an input
 * is written with streaming stores (Note [Streaming stores], THStream.h). */
void THPointwise_execute(THPointwisePlan *plan);
/* How many executions so far wrote with streaming stores (tests check
 * which path a call took). */
int64_t THPointwise_streamedRuns(void);
/* How many of their threads' ranges took a fused streaming loop (the
 * rest computed blocks and copied them out). */
int64_t THPointwise_fusedStreamingRanges(void);
/* Returns a new reference to the result (options->out, retained, when it
 * was given), or NULL with a TH error.  Always frees the plan's
 * temporaries. */
THTensor *THPointwise_finish(THPointwisePlan *plan);
/* Releases what a prepared plan holds without running it. */
void THPointwise_abandon(THPointwisePlan *plan);
THTensor *THPointwise_apply(THPointwiseOp op, const THPointwiseArg *args,
                            const THPointwiseOptions *options);

int THPointwise_arity(THPointwiseOp op);

/* ---- type promotion (torch.result_type, promote_types, can_cast) -------- */

/* The dtype `nargs` inputs combine in (Note [Wrapped numbers]). */
THDtype THPointwise_resultType(int nargs, const THPointwiseArg *args,
                               THDtype default_float);
/* PyTorch's canCast: no floating -> integral, nothing but bool -> bool. */
bool THPointwise_canCast(THDtype from, THDtype to);

#endif /* TH_POINTWISE_H */
