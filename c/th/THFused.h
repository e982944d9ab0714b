/*
 * THFused.h -- fused elementwise kernels: a small register program run
 * block by block over the inputs, numexpr-style, in one pass over memory.
 *
 * A program has `ninputs` input registers (0 .. ninputs-1: tensors or
 * numbers at run time) and SSA instructions, each writing one new register:
 *
 *     r2 = const 2.0
 *     r3 = mul r2, r0
 *     r4 = add r3, r1          outputs: r4
 *
 * Note [Blocked interpretation]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * THIter hands the interpreter runs of elements (the innermost dimension,
 * after broadcasting and coalescing; data[k], strides[k], n).  The
 * interpreter cuts each run into blocks of TH_FUSED_BLOCK elements and
 * runs the whole program on one block before moving on, so every
 * temporary lives in a small block buffer that stays in L1, and each
 * element of the inputs and outputs crosses the memory bus once.  Per run,
 * each register is either
 *   - a SCALAR: a number, a constant, an input with stride 0 along the run
 *     (a broadcast dim, a one-element tensor), or an instruction whose
 *     operands are all scalars -- computed once per run, not per element;
 *   - a VECTOR: an input with unit stride, read in place (a pointer into
 *     the tensor, no copy); a strided input, gathered into a block buffer;
 *     an instruction result, written into a block buffer, or straight into
 *     the output when the register is one (an output larger than the
 *     caches is computed in a buffer and streamed out: Note [Streaming
 *     the outputs] in THFused.c).
 * Two arithmetic instructions, the first read only by the second, run
 * as one loop (Note [Superinstructions] in THFused.c).
 * Instructions dispatch once per (block, instruction) to a loop chosen by
 * which operands are scalars (add(x, 2.0) reads 2.0 once, never a
 * broadcast block).  Full blocks call a loop compiled for the constant
 * length TH_FUSED_BLOCK.  Block buffers are given out by liveness: a
 * buffer is reused once its register has been read for the last time.
 * Every op computes exactly what the eager op computes (THFormulas.h).
 *
 * Use, as THPointwise's plans (prepare with the GIL, execute without):
 *
 *     THFusedProgram *program = THFusedProgram_new(...);  (validated once)
 *     THFusedPlan plan;
 *     int status = THFused_prepare(&plan, program, args);
 *         0: ready; 1: the guard failed (nothing allocated, no error);
 *        -1: error (TH error set)
 *     THFused_execute(&plan);          (no allocation, no error, no GIL)
 *     THFused_finish(&plan, outputs);  (hands over the output tensors)
 */
#ifndef TH_FUSED_H
#define TH_FUSED_H

#include "THIter.h"
#include "THPointwise.h"

#define TH_FUSED_MAX_REGISTERS 256
#define TH_FUSED_MAX_INPUTS 64   /* one bit each in a uint64_t mask */
#define TH_FUSED_MAX_OUTPUTS 4
#define TH_FUSED_MAX_ARITY 3
/* Elements per block: 1 KiB of float32 per block buffer.  (Measured on
 * y = 2*a*a + 3*b - a/(b+1), 4M float32, bench/bench_fused.py: 256 beat
 * 512 and 1024 -- the buffers and input blocks stay well inside L1, and
 * the memory reads of a block overlap the previous block's compute.) */
#define TH_FUSED_BLOCK 256
/* The block buffers of one run live on the stack, in this many bytes;
 * a program with many live temporaries gets shorter blocks. */
#define TH_FUSED_SCRATCH_BYTES (64 * 1024)
/* Outputs of at least this many bytes are written with non-temporal
 * stores (Note [Streaming the outputs] in THFused.c). */
#define TH_FUSED_STREAM_BYTES (4 * 1024 * 1024)

/* _(name, arity): every op a program may use, with ember's eager name.
 * Binary and ternary ops come from THPointwise's formulas, the unary math
 * from THUnary's float formulas (c/th/THFloatFormulas.h). */
#define TH_FORALL_FUSED_POINTWISE_OPS(_)                                   \
    _(add, ADD, 2) _(sub, SUB, 2) _(mul, MUL, 2) _(div, DIV, 2)            \
    _(floor_divide, DIV_FLOOR, 2) _(remainder, REMAINDER, 2)               \
    _(fmod, FMOD, 2) _(pow, POW, 2) _(maximum, MAXIMUM, 2)                 \
    _(minimum, MINIMUM, 2) _(atan2, ATAN2, 2) _(neg, NEG, 1)               \
    _(abs, ABS, 1) _(sign, SIGN, 1) _(clamp, CLAMP, 3)
#define TH_FORALL_FUSED_UNARY_OPS(_)                                       \
    _(exp) _(exp2) _(expm1) _(log) _(log2) _(log10) _(log1p) _(sqrt)       \
    _(rsqrt) _(reciprocal) _(sin) _(cos) _(tan) _(asin) _(acos) _(atan)    \
    _(sinh) _(cosh) _(tanh) _(sigmoid) _(erf) _(erfc) _(gelu) _(silu)      \
    _(frac) _(floor) _(ceil) _(round) _(trunc) _(relu) _(square)

typedef enum {
#define TH_FUSED_POINTWISE_ENUM(name, OP, arity) TH_FUSED_##name,
#define TH_FUSED_UNARY_ENUM(name) TH_FUSED_##name,
    TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_ENUM)
    TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_ENUM)
#undef TH_FUSED_POINTWISE_ENUM
#undef TH_FUSED_UNARY_ENUM
    TH_NUM_FUSED_OPS,
    TH_FUSED_CONST = TH_NUM_FUSED_OPS /* dst = value (no sources) */
} THFusedOp;

/* The op named `name`, or -1. */
int THFused_opFromName(const char *name);
const char *THFused_opName(THFusedOp op);  /* "const" for TH_FUSED_CONST */
int THFused_arity(THFusedOp op);           /* 0 for TH_FUSED_CONST */

typedef struct {
    THFusedOp op;
    int dst;
    int src[TH_FUSED_MAX_ARITY];  /* the first arity entries */
    THScalar value;               /* TH_FUSED_CONST */
} THFusedInstruction;

/* A validated program (immutable; share it freely). */
typedef struct {
    int ninputs, nregs, ninstructions, noutputs;
    THFusedInstruction *code;            /* as given, for listings */
    int outputs[TH_FUSED_MAX_OUTPUTS];
    /* What runs: the instructions some output needs, in program order. */
    int nscheduled;
    int *schedule;                       /* indices into code */
    /* Which inputs each output's value depends on (its shape is theirs). */
    uint64_t output_inputs[TH_FUSED_MAX_OUTPUTS];
    /* Block buffers: slot_of[r] (-1: none), nslots in all. */
    int nslots;
    int16_t slot_of[TH_FUSED_MAX_REGISTERS];
    int8_t output_of[TH_FUSED_MAX_REGISTERS]; /* output index or -1 */
    /* How many times the schedule reads each register (as an operand). */
    int16_t nreads[TH_FUSED_MAX_REGISTERS];
} THFusedProgram;

/* Validates and builds a program: NULL with a TH_ERR_VALUE error naming
 * the problem (unknown op, register out of range, use before definition,
 * a register written twice, bad outputs, too many registers or inputs). */
THFusedProgram *THFusedProgram_new(int ninputs, int ninstructions,
                                   const THFusedInstruction *code,
                                   int noutputs, const int *outputs);
void THFusedProgram_free(THFusedProgram *program);

/* One element in the compute dtype: a number or a constant. */
typedef union {
    float f;
    double d;
} THFusedValue;

typedef struct {
    const THFusedProgram *program;
    THDtype dtype;                   /* float32 or float64 */
    int64_t numel;
    int block_len;                   /* elements per block */
    bool stream;  /* Note [Streaming the outputs] in THFused.c */
    THIter iter;  /* operands: the outputs, then the tensor inputs */
    int ntensors;
    int tensor_reg[TH_ITER_MAX_OPERANDS]; /* input register of operand
                                           * noutputs + j */
    THFusedValue values[TH_FUSED_MAX_REGISTERS]; /* numbers, constants */
    THTensor *outputs[TH_FUSED_MAX_OUTPUTS];     /* owned until finish */
} THFusedPlan;

/* Checks the guard (one float dtype for all tensor inputs, at least one
 * tensor, shapes that broadcast, every output of the full shape, at most
 * TH_ITER_MAX_OPERANDS operands), allocates the outputs and sets up the
 * iteration.  args[i] is input i (a tensor, or a number).  Returns 0,
 * 1 (guard failed: nothing allocated, no error) or -1 (TH error). */
int THFused_prepare(THFusedPlan *plan, const THFusedProgram *program,
                    const THPointwiseArg *args);
/* Runs the program (on the worker threads when large). */
void THFused_execute(const THFusedPlan *plan);
/* Moves the program->noutputs output tensors (new references) into
 * `outputs`. */
void THFused_finish(THFusedPlan *plan, THTensor **outputs);
/* Releases what a prepared plan holds without finishing it. */
void THFused_abandon(THFusedPlan *plan);

/* The loop family in use ("avx2" or "baseline"), and a switch between
 * them for tests (-1 with a TH error when the CPU lacks it). */
const char *THFused_isa(void);
int THFused_setIsa(const char *name);

#endif /* TH_FUSED_H */
