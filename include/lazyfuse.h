/* lazyfuse.h: the whole public API of lazyfuse.
 *
 * lazyfuse builds a deferred dataflow graph of map / zipwith / reduce nodes and
 * evaluates it when a result is asked for. Nothing computes while a graph is
 * built; lf_eval plans, runs, and writes results into buffers.
 *
 * Worked example: the Gaussian density of the Numba lecture notes, and a sum of
 * squares, over n float32 values (error handling shortened to one check).
 *
 *     lf_ctx *ctx = lf_ctx_new(NULL);                       // default options
 *     int64_t n = 1000;
 *     lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
 *     lf_buffer_write(xb, host_x, n * sizeof(float));       // copy host data in
 *     lf_buffer *pdf = lf_buffer_new(ctx, LF_F32, 1, &n);
 *     lf_buffer *ss  = lf_buffer_new(ctx, LF_F32, 0, NULL); // 0-d result
 *
 *     lf_graph *g = lf_graph_new(ctx);
 *     lf_fn *gauss = lf_fn_parse(g,
 *         "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
 *     lf_node *x = lf_input(g, xb);
 *     lf_node *y = lf_zipwith(g, gauss, 3, (lf_node *[]){
 *                      x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.0)});
 *     lf_node *s = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
 *     if (lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){pdf, ss}) != LF_OK)
 *         fprintf(stderr, "lazyfuse: %s\n", lf_errmsg(ctx));
 *     lf_buffer_read(pdf, host_pdf, n * sizeof(float));      // copy results out
 *     lf_graph_free(g);
 *     lf_ctx_destroy(ctx);                                   // frees the buffers too
 *
 * Ownership, in one sentence: you free what you create with lf_ctx_new,
 * lf_buffer_new (or _wrap, _from_dlpack) and lf_graph_new (a graph owns its
 * nodes and fns, and keeps the buffers it reads alive until it is freed), and
 * lf_ctx_destroy frees everything of that context still alive.
 *
 * Errors: no call aborts because of its arguments. Fallible calls return a
 * status (LF_OK is 0) or NULL / a negative id. lf_errmsg(ctx) says what and
 * where. Builder errors are sticky on their graph: once a graph has failed,
 * later builder calls return NULL and lf_eval reports the first error, so a
 * chain of builder calls may be checked once, at the end. A failed call leaves
 * the caller's buffers untouched.
 *
 * Threads: one context and everything made from it belongs to one thread at a
 * time. Different contexts may be used concurrently.
 *
 * Dtype rules (NumPy 2's): bool, the integers i8 u8 i16 u16 i32 u32 i64 u64,
 * the floats f16 bf16 f32 f64, the complex c64 c128.
 *   promote(a, b): the dtype of least width that holds every value of both
 *     exactly: the same dtype if equal; bool with X gives X; u8 with i8 gives
 *     i16, u32 with i32 gives i64, u64 with any signed integer gives f64; an
 *     integer with a float gives that float when the float holds the
 *     integer's every value (i8, u8 with f16 or bf16; i16, u16 with f16 give
 *     f32; i32, u32 with f32 give f64), and f64 with any integer. f16 with
 *     bf16 gives f32. bfloat16 is ml_dtypes' (JAX's): i8, u8 and bool with
 *     bf16 give bf16; where ml_dtypes has no common dtype (i16 or f16 with
 *     bf16) the rule above gives f32. A complex with a real dtype gives the
 *     complex whose components hold that dtype: c64 with f16, bf16, f32,
 *     i8, u8, i16, u16 or bool gives c64; with f64, i32, u32, i64 or u64
 *     c128 (NumPy 2: complex64 + float64 is complex128).
 *   Complex (c64, c128; issue 31): a value is a pair (re, im) of its
 *     component float (f32, f64). Allowed: + - * / unary -, **, == and !=
 *     (both parts equal), abs (the component float: hypot(re, im)), real,
 *     imag, angle (the component float: atan2(im, re)), conj, sqrt, exp,
 *     log, where, casts, and the reductions sum, prod and mean. Every other
 *     operator with a complex operand (< <= > >= min max, rounding, % //,
 *     bit operators, other float functions, isnan, isinf) is refused with
 *     LF_ERR_DTYPE when the node is built, as are min/max/argmin/argmax and
 *     scans of complex, sort, top-k, scatter and gather of complex data,
 *     and complex iota, arange and random. The formulas are fixed, written
 *     once (graph/complex.h) and run by every evaluator, so results are
 *     bit-identical across the reference, the interpreter and compiled C:
 *     each step rounds in the component float, without contraction
 *       (a+bi)(c+di) = (ac - bd) + (ad + bc)i           (no rescaling:
 *         inf/NaN follow these four products, not C Annex G)
 *       (a+bi)/(c+di) = Smith's algorithm: if |c| >= |d|: r = d/c,
 *         t = c + d r, ((a + b r)/t) + ((b - a r)/t)i; else r = c/d,
 *         t = c r + d, ((a r + b)/t) + ((b r - a)/t)i
 *       exp(a+bi) = exp(a) cos(b) + exp(a) sin(b) i
 *       log(z) = log(abs(z)) + angle(z) i;  abs(z) = hypot(a, b)
 *       sqrt(z): 0 -> (0, b); else t = sqrt((|a| + abs(z)) / 2), for
 *         a >= 0: (t, b / (2t)), else (|b| / (2t), copysign(t, b))
 *       z ** w: 0 ** w is 1 for w = 0, else 0; else exp(w log(z))
 *     c64's functions call libm's float versions (hypotf, atan2f, expf,
 *     cosf, sinf, logf, sqrtf). A cast from complex to a real dtype takes
 *     the real part (NumPy, which warns); to bool, re != 0 or im != 0; a
 *     real to complex is (x, 0). Sums and products accumulate in c128 and
 *     round once, as floats accumulate in f64.
 *   Small integers (i8 u8 i16 u16, and u32, i32) wrap at their own width
 *     after every operation, as NumPy does (u8 200 + 100 is 44); unsigned
 *     integers wrap modulo 2^width, and their comparisons, min/max, //, %
 *     and >> (logical) are unsigned. f16 and bf16 compute each operation in
 *     float32 (as f32 does: libm's float functions) and round its result to
 *     nearest even in the dtype, so every evaluator, fused or not, gives the
 *     same bits (XLA rounds so at each op); a cast to f16 or bf16 rounds the
 *     same way, NaN stays NaN, overflow gives inf.
 *   Literals in expression strings and lf_fn_const are weak (as NumPy 2 and
 *     JAX scalars): an integer literal takes the other operand's dtype (bool
 *     becomes i64); a float literal takes the other operand's dtype when that
 *     is floating, else f64. A result that is still weak at the end becomes
 *     i64 (integer) or f64 (float). So x*0.5 with x f32 is f32.
 *     An integer literal that the dtype it meets cannot hold (beyond i32's
 *     range against an i32 operand; an expression of literals alone counts
 *     by its value, computed in i64) is never wrapped (NEP 50): a
 *     comparison compares exactly (x < 3000000000 is true for every i32 x),
 *     and any other operator (arithmetic, //, %, **, min, max, & | ^, << >>,
 *     where) refuses it when the node is built, LF_ERR_DTYPE "map: +:
 *     integer literal 3000000000 is out of range for i32 (...)". NumPy 2
 *     raises OverflowError there too (its np.where wraps instead); x / 3e9
 *     with x i32 computes in f64 with the exact literal, as NumPy. An
 *     integer literal beyond i64 (up to 38 digits; more is a parse error) follows
 *     the same rule against every integer and bool: x < 2**63 (written
 *     9223372036854775808) is true for every i64 x, INT64_MAX included; x +
 *     9223372036854775808 is refused, "map: +: integer literal
 *     9223372036854775808 is out of range for i64 (...)", as is a cast of it
 *     to i32 or i64, or such a literal as the whole result; against a float,
 *     and with /, it is its nearest double (NumPy converts a Python int so). A float
 *     literal meeting f32 is rounded to f32 once: x + 1e19 is f32 1e19,
 *     x * 1e39 is inf (NumPy 2 gives the same, with a warning).
 *   Arithmetic (+ - * // % ** unary -) gives the promoted dtype; bool operands
 *     are taken as i32. Integer arithmetic wraps (two's complement); integer
 *     x % 0 is 0; integer x ** negative is 0 unless x is 1 or -1. % follows
 *     the sign of the divisor (Python, NumPy).
 *   / is true division: integers give f64.
 *   // is floor division (np.floor_divide), typed as arithmetic. Integers
 *     round toward -inf; x // 0 is 0 (NumPy's result, without its warning);
 *     MIN // -1 wraps to MIN. Floats follow NumPy's npy_floor_divide bit
 *     for bit: b == 0 gives a / b (+-inf, or NaN for 0 // 0 and NaN // 0);
 *     else mod = fmod(a, b), div = (a - mod) / b, minus 1 when mod is
 *     nonzero and its sign differs from b's; then a nonzero div is snapped
 *     to floor(div) (+1 when div - floor(div) > 0.5) and a zero div becomes
 *     copysign(0, a / b). So inf // x and x // nan are NaN, 1 // inf is 0,
 *     -1 // inf is -1, and -0.0 // 1 is -0.0. f32 runs these steps in float.
 *   & | ^ take integer or bool operands only (a float operand is an
 *     LF_ERR_DTYPE error when the node is built: "&: operands must be
 *     integers or bool, got f32"); they give the promoted dtype, bitwise on
 *     integers and logical on bool (bool ^ bool is "differs"); ^ on floats in
 *     a map or zipwith fn adds "(use ** for powers; ^ is bitwise xor)". ~ is
 *     bitwise not on integers and logical not on bool. Integer operands
 *     whose promoted dtype is a float (u64 with a signed integer: f64) are
 *     refused the same way, for & | ^ << >> alike, as NumPy 2 refuses them.
 *   << >> take integer or bool operands only (bool is taken as i32) and give
 *     the promoted dtype; >> is arithmetic (sign-filling). A count outside
 *     [0, width) (width 32 for i32, 64 for i64; negative counts included)
 *     gives 0, or -1 for >> of a negative value: NumPy's npy_lshift and
 *     npy_rshift. << wraps (the bits shifted out are lost).
 *   Float functions (sqrt, exp, sin, ...): f32 stays f32, f64 stays f64,
 *     bool and integers give f64.
 *   min, max, abs, sign, floor, ceil, round, trunc keep the promoted dtype.
 *     min and max are NumPy's minimum and maximum: a NaN operand is the
 *     result (the first when both are NaN), and of two equal values (+0.0
 *     and -0.0) the second operand is (min(0.0, -0.0) is -0.0, max(-0.0,
 *     0.0) is 0.0). sign gives -1, 0 or 1 (+0.0 for +-0.0, NaN for NaN).
 *     round is half to even.
 *   Comparisons, and/or/not, isnan, isinf, signbit give bool. signbit reads
 *     the sign bit itself (NumPy's): true for -0.0 and for a NaN whose sign
 *     bit is set; for integers x < 0; false for bool and unsigned.
 *   where(c, a, b) gives promote(a, b); c is a truth value (nonzero is true).
 *   Casts from a float to an integer dtype truncate toward zero and
 *     saturate at the dtype's range; NaN casts to 0. Casts between integer
 *     dtypes wrap (two's complement: i64 -> i32 keeps the low 32 bits).
 *     Casts to bool give value != 0 (NaN is true).
 *   Reductions: sum and prod of bool and signed integers give i64, of
 *     unsigned integers u64; of floats keep the dtype (f16 and bf16 too,
 *     accumulated in double and rounded once). mean of integers gives f64. min and max keep the dtype.
 *     argmin and argmax give i64. Float reductions (and mean of integers)
 *     accumulate in double, integer sum and prod in int64 (wrapping), and
 *     round once at the end, except contractions (below).
 *   Contractions. A float32 sum over exactly one axis of a float32 product
 *     x * y (the result of a map's fn, the map not marked materialized)
 *     where x or y is independent of at least one kept axis (every map input
 *     it reads has extent 1 there, broadcasting right-aligned: matmul written
 *     sum(A[:, :, None] * B[None, :, :], axis=1), batched matmul,
 *     matrix-vector, a product with a scalar) is a contraction. Its value:
 *     along the contracted axis in ascending order, in blocks of
 *     LF_CONTRACT_BLOCK elements, a float32 partial from +0.0f updated with
 *     fmaf(x, y, partial) (one rounding a step); each block's partial added,
 *     in block order, into a double from 0.0; the double rounded to float32
 *     once. Deterministic, independent of threads and position, and what a
 *     packed f32 FMA micro-kernel computes (its K loop blocked by
 *     LF_CONTRACT_BLOCK); its error against BLAS's is not measured. The
 *     product map is computed inside the contraction's kernel even when it
 *     is also stored (an output). f64, integer, several reduced axes, a sum
 *     of anything but a product, a product that depends on every kept axis
 *     (a row-wise dot) or a marked product are plain reductions.
 */
#ifndef LAZYFUSE_H
#define LAZYFUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LF_BUILDING_LIBRARY) && defined(__GNUC__)
#define LF_API __attribute__((visibility("default")))
#else
#define LF_API
#endif

/* ABI (README, "Versioning and ABI"): the soname is liblazyfuse.so.MAJOR and
 * within it nothing here changes but by growing: new functions; fields
 * appended to lf_ctx_options and lf_eval_stats (which cross the boundary
 * with the caller's size); enumerators appended at the end of an enum. The
 * count sentinels (LF_NDTYPES, LF_NOPS, LF_NREDS) grow with their enums and
 * are not part of the ABI. CI compares the library with abi/liblazyfuse.abi. */

#define LF_MAX_DIMS 8   /* most dimensions an array may have */
#define LF_MAX_ARGS 8   /* most inputs of a zipwith, most parameters of an fn */
#define LF_NONE INT64_MIN /* slice start/stop: "from the natural end" (Python's None) */
#define LF_CONTRACT_BLOCK 256 /* contractions: fmaf steps per float partial (above) */

/* ---- status and errors ------------------------------------------------- */

typedef enum lf_status {
    LF_OK = 0,
    LF_ERR_NULL,        /* a required handle or pointer was NULL */
    LF_ERR_INVALID,     /* a bad argument: size mismatch, unknown enum, ... */
    LF_ERR_SHAPE,       /* shapes do not broadcast, reshape sizes differ, too many dims */
    LF_ERR_AXIS,        /* axis out of range or repeated */
    LF_ERR_RANGE,       /* slice bounds or step out of range */
    LF_ERR_DTYPE,       /* dtype not allowed here, buffer and node dtypes differ, or
                           an integer literal its operand's dtype cannot hold */
    LF_ERR_OVERFLOW,    /* a shape product or byte count overflows */
    LF_ERR_ARITY,       /* fn parameter count does not match the inputs */
    LF_ERR_PARSE,       /* expression string does not parse */
    LF_ERR_NOMEM,       /* allocation failed */
    LF_ERR_BACKEND,     /* backend not available or failed */
    LF_ERR_STATE,       /* handle used with the wrong context or graph */
    LF_ERR_INDEX,       /* lf_eval: a gather, scatter or bincount index out of range
                           (the message names the node, the first position and the
                           value) */
    LF_ERR_COMPILE,     /* (1.3) a user function's code does not compile (lf_fn_c):
                           the message holds the compiler's, with the user's own
                           line numbers */
    LF_ERR_EXTERN       /* (1.3) lf_eval: an lf_extern callback reported a failure
                           (the message holds the callback's own) */
} lf_status;

typedef struct lf_ctx lf_ctx;       /* context: backend, options, last error */
typedef struct lf_buffer lf_buffer; /* materialized array owned by a context */
typedef struct lf_graph lf_graph;   /* deferred graph: an arena of nodes and fns */
typedef struct lf_node lf_node;     /* one graph node; owned by its graph */
typedef struct lf_fn lf_fn;         /* scalar function; owned by its graph */

/* The last error message of ctx, or of the calling thread when ctx is NULL
 * (errors of calls that had no context to record into). Never NULL; "" when
 * there was none. Valid until the next failing call on that context. A
 * message names a node as "node 4 (add f32[1000,3])": its id (creation
 * order in its graph), the builder or operator that made it, its dtype and
 * shape, and for a map or zipwith of a parsed fn the fn's text (its first
 * 40 bytes, then "..."): "node 7 (map f32[3] \"(x) -> x * 2 + 1\")". A
 * kernel that fails to compile or load is named by the node it computes:
 * "eval: compiling kernel 1 (computing node 7 (...)) failed: ...". */
LF_API const char *lf_errmsg(const lf_ctx *ctx);
/* Short name of a status code ("LF_ERR_SHAPE"). */
LF_API const char *lf_status_name(lf_status s);

/* ---- dtypes ------------------------------------------------------------ */

typedef enum lf_dtype {
    LF_BOOL = 0, /* stored as one byte, 0 or 1 */
    LF_I32,
    LF_I64,
    LF_F32,
    LF_F64,
    LF_I8,   /* appended in this order (ABI): small integers wrap at their width */
    LF_U8,
    LF_I16,
    LF_U16,
    LF_U32,
    LF_U64,
    LF_F16,  /* IEEE binary16, stored as its 16 bits */
    LF_BF16, /* bfloat16 (the high half of a float32), stored as its 16 bits */
    LF_C64,  /* (1.4) complex64: two f32 (real, imaginary), 8 bytes, C99's layout */
    LF_C128, /* (1.4) complex128: two f64 (real, imaginary), 16 bytes */
    LF_NDTYPES
} lf_dtype;

LF_API size_t lf_dtype_size(lf_dtype t);       /* bytes per element; 0 if unknown */
LF_API const char *lf_dtype_name(lf_dtype t);  /* "f32", ...; "?" if unknown */
LF_API lf_dtype lf_dtype_promote(lf_dtype a, lf_dtype b); /* rules above */

/* ---- context ------------------------------------------------------------ */

typedef enum lf_backend {
    LF_BACKEND_AUTO = 0,  /* the best available: CUDA if usable, else CPU */
    LF_BACKEND_CPU,       /* host CPU */
    LF_BACKEND_CUDA,      /* NVIDIA GPU */
    LF_BACKEND_REFERENCE  /* the naive reference evaluator (the test oracle) */
} lf_backend;

/* Options of lf_ctx_new. The struct grows: fields are only ever appended,
 * and struct_size, set by lf_ctx_options_init, tells the library how much of
 * it the caller's program knows (README, "Versioning and ABI"). So fill it
 * with lf_ctx_options_init, then set fields by name; never with = {0} or a
 * struct literal (struct_size 0 is refused). */
typedef struct lf_ctx_options {
    size_t struct_size;    /* sizeof the caller's lf_ctx_options: set by
                              lf_ctx_options_init; lf_ctx_new reads only the
                              fields inside it (later fields take their
                              defaults) and refuses 0, less than
                              LF_CTX_OPTIONS_SIZE_1_0, or more than this
                              library's own size (a program built against a
                              newer lazyfuse 1.x) with LF_ERR_INVALID */
    lf_backend backend;    /* default LF_BACKEND_AUTO */
    int threads;           /* worker threads; 0 means one per online CPU */
    int fusion;            /* 1 on, 0 off, -1 default (on unless LF_FUSION=0) */
    const char *cache_dir; /* kernel cache folder; NULL means $LF_CACHE_DIR, else
                              $XDG_CACHE_HOME/lazyfuse, else ~/.cache/lazyfuse */
    int compile;           /* CPU kernels, one of lf_compile_mode (default AUTO) */
    double compile_timeout; /* seconds one run of the C compiler may take: 0
                               means $LF_COMPILE_TIMEOUT, else
                               LF_COMPILE_TIMEOUT_DEFAULT ("CPU backend" below);
                               INFINITY: no limit; < 0 or NaN: lf_ctx_new fails */
    /* New fields go here, at the end, and nowhere else. */
} lf_ctx_options;

/* The smallest struct_size lf_ctx_new accepts: the end of the last field of
 * lazyfuse 1.0's lf_ctx_options. */
#define LF_CTX_OPTIONS_SIZE_1_0 (offsetof(lf_ctx_options, compile_timeout) + sizeof(double))

/* The compile time limit when neither the option nor the environment sets one. */
#define LF_COMPILE_TIMEOUT_DEFAULT 120.0

/* What the CPU backend does about compiling kernels (lf_ctx_options.compile). */
typedef enum lf_compile_mode {
    LF_COMPILE_AUTO = 0,    /* compile; when no C compiler works, or $TMPDIR
                               cannot hold a compile (missing, not writable, or
                               full: "disk full at '<$TMPDIR>'"), run the
                               schedule interpreter instead, with a one-time
                               warning on stderr that says why (a full or
                               missing $TMPDIR is looked at again by the next
                               new program, which compiles once there is room).
                               A compiler that runs but fails on a kernel is
                               LF_ERR_BACKEND, as is one that writes an object
                               larger than 64 MiB (the disk cache's entry
                               bound: refused from its size, never read).
                               LF_COMPILE=never in the environment chooses
                               NEVER: no compiling, no warning */
    LF_COMPILE_REQUIRE = 1, /* compile; no working C compiler, or no room to
                               compile in $TMPDIR, is LF_ERR_BACKEND
                               (LF_COMPILE=always in the environment turns an
                               AUTO context into this one) */
    LF_COMPILE_NEVER = 2    /* never compile: the interpreter runs everything */
} lf_compile_mode;

/* Fills the first size bytes of *opt with the defaults and sets
 * opt->struct_size = size, size being the size of the caller's
 * lf_ctx_options. LF_ERR_NULL for a NULL opt; LF_ERR_INVALID, with *opt
 * unchanged, for a size below LF_CTX_OPTIONS_SIZE_1_0; LF_ERR_INVALID for a
 * size above this library's (a program built against a newer lazyfuse 1.x):
 * *opt is then filled (zeros past this library's fields), so that lf_ctx_new
 * refuses it with the same message. C and C++
 * call lf_ctx_options_init, which passes sizeof *opt; a binding that loads
 * the library by name calls this with the size of its own struct. */
LF_API lf_status lf_ctx_options_init_sized(lf_ctx_options *opt, size_t size);
/* Fills *opt with the defaults and its struct_size with sizeof *opt as this
 * header declares it (an inline function, so the size is the caller's). */
static inline lf_status lf_ctx_options_init(lf_ctx_options *opt) {
    return lf_ctx_options_init_sized(opt, sizeof *opt);
}
/* Creates a context; opt may be NULL for defaults, else filled by
 * lf_ctx_options_init first (see struct_size). NULL on failure, with the
 * reason in lf_errmsg(NULL). CPU plans each eval with the fusion pass, prints
 * each kernel as C, compiles it with the system C compiler ($CC, else cc)
 * into a shared object that is loaded with dlopen, and runs it on a thread
 * pool made once per context (see "CPU backend" below). CUDA does the same
 * with CUDA C++ compiled by NVRTC and launched on an NVIDIA GPU (see "CUDA
 * backend" below); when it cannot be had (no driver, no device, no NVRTC,
 * or a build configured with -Dcuda=disabled) lf_ctx_new fails with
 * LF_ERR_BACKEND and a message naming what failed and the driver's error.
 * AUTO takes CUDA when it can be had, else CPU, printing one line on stderr
 * the first time in the process that says why CUDA could not be used (unless
 * LF_QUIET is set in the environment; a build without the CUDA backend
 * prints nothing). lf_ctx_backend says which one a context got. REFERENCE
 * runs the unfused node-by-node evaluator. */
LF_API lf_ctx *lf_ctx_new(const lf_ctx_options *opt);
/* CPU backend. Each kernel of the fused schedule is printed as C (LF_DEBUG=
 * source prints it to stderr), compiled by $CC (else cc) with -O3
 * -march=native and no fast-math flag into a shared object, and run on the
 * context's thread pool (opt.threads threads, default one per online CPU;
 * arrays below 64 Ki elements run on the calling thread; after a run,
 * workers spin for at most 100 us and the caller for 50 us waiting for the
 * next one, then sleep: an idle pool uses no CPU, and none spins where
 * threads outnumber CPUs or while wake-ups run late). Kernels keep their
 * scratch on the stack of the thread running them, the workers' and the
 * calling thread's (it runs chunks too): up to 64 KiB a row keep (softmax's
 * exp, see the README's fusion rules) and about 640 KiB for a packed
 * contraction's tiles, so call lf_eval from a thread with at least 1 MiB of
 * stack (the default is 8 MiB). An elementwise kernel that moves more bytes
 * (its loads and stores together) than the last-level cache holds writes
 * its contiguous outputs with non-temporal stores, through tiles of 256
 * elements: the output would leave the cache before anyone read it, and a
 * plain store reads each line before filling it. The values are the same
 * either way; $LF_CPU_STREAM_MIN (bytes) sets the threshold. Compiled kernels are cached twice: in memory per context, keyed by
 * the kernel's structure (rebuilding the same graph in a loop compiles
 * nothing), and on disk in opt.cache_dir / $LF_CACHE_DIR /
 * $XDG_CACHE_HOME/lazyfuse / ~/.cache/lazyfuse, keyed by a SHA-256 of the
 * source, the flags, the compiler's version and the CPU, verified on load (a
 * corrupt entry is rebuilt; an unwritable folder only costs the disk level).
 * An entry carries its own key and is refused under another name; an entry
 * file over 64 MiB is corrupt and removed unread. The disk cache holds code
 * that runs in your process, so it is used only when the folder is owned by
 * the effective user and not writable by group or others (as ssh and git
 * ask of their files); otherwise it is neither read nor written, stderr says
 * so once per process (unless $LF_QUIET is set) and kernels are cached in
 * memory only. An entry that is not private (another user's, or writable by
 * others) is removed unread and rebuilt, with a warning. Opening a folder
 * removes the temp and lock files that killed processes left in it.
 * A graph keeps the compiled programs of its last 4 output sets (least
 * recently used dropped first; each holds its schedule, kernels and
 * temporaries until dropped or the graph is freed), so re-evaluating, or
 * alternating between, output sets of a graph plans and looks up nothing; the
 * output buffers are bound at each eval, so they may differ every time.
 * Sizes, strides, offsets and the values of lf_const / lf_fill nodes are
 * run-time parameters: one compiled kernel serves every size and every
 * constant value of the same structure; literals of fn strings are part of
 * the structure, the order the nodes were created in is not (a kernel's
 * parameters, expressions and constants are numbered by a walk of its
 * expression from its result, operands in argument order; a kernel that
 * stores several values takes them in node order). A compiled object is
 * stored on disk only once it has loaded and its functions are bound, and an entry
 * that verifies but does not load or bind is removed and rebuilt (never the
 * eval's failure). Processes sharing a cache folder compile each kernel once:
 * on a disk miss a process locks <folder>/.lock-<entry> (flock; removed when
 * released; it dies with its holder), and the others wait for it (at most the
 * compile time limit + 10 s, then compile themselves) and load its entry.
 * Results: bit-identical to LF_BACKEND_REFERENCE for every operator, cast
 * and iota (a NaN result aside: it is NaN wherever the reference's is, but
 * its sign and payload are not promised on any backend; GCC compiles
 * x*(-1), x/(-1) and (-0.0)-x as -x, which flips a NaN's sign bit, and
 * NumPy's NaN signs depend on the machine too), except (1) the
 * transcendental functions exp, exp2, expm1, log, log2, log10, log1p, sin,
 * cos, tan, asin, acos, atan, sinh, cosh, tanh, asinh, acosh, atanh, erf,
 * pow, atan2, hypot and sigmoid (sqrt, rsqrt and cbrt are not in the list:
 * they are the reference's libm calls, bit for bit), which call glibc's vector math library (libmvec)
 * when GCC and libmvec are present: within 4 ulp of scalar libm for f32 and
 * f64, with the same NaN and infinities, and the same result for the same
 * input at every position of an array, thread count and chunking (every
 * element goes through one libmvec variant, vector loop and remainder
 * alike; pow of +-0 to a negative power and atan2 of +-0 are set as C's,
 * since libmvec's differ there) (x ** y with y == 0.5, on the CPU
 * and CUDA backends, is the correctly rounded square root with pow's values
 * at -inf and -0, +inf and +0: the same at every position of an array,
 * within 1 ulp of C's pow); and (2) float reductions, which sum
 * in double in a fixed order of 16 lanes and fixed blocks of the reduced
 * axes (the order depends on the shape only, never on the thread count, so
 * results are deterministic); min/max/argmin/argmax and integer reductions are
 * exact. Compiler failures are LF_ERR_BACKEND with the compiler's log in
 * lf_errmsg, made printable (other bytes as \xNN) and bounded: its first 20
 * lines, its first line containing "error", and "(N more lines; set
 * LF_DEBUG=cc for the full log)"; LF_DEBUG=cc copies the whole log to
 * stderr. Compile time limit: opt.compile_timeout when not 0, else
 * LF_COMPILE_TIMEOUT (seconds, e.g. "300", "0.5" or "inf"; 0 or empty: the
 * default; a negative or unreadable value makes lf_ctx_new fail with
 * LF_ERR_INVALID), else LF_COMPILE_TIMEOUT_DEFAULT (120 s); lf_ctx_get_options
 * reports the limit in force. It bounds each run of the compiler (the
 * `--version` probe too); when it passes, the compiler's process group is
 * killed (SIGKILL) and the eval fails with LF_ERR_BACKEND "... the C compiler
 * did not finish within N s (killed; ...)" (a probe that times out counts as
 * no working compiler: AUTO falls back to the interpreter). The probe also
 * writes 1 MiB into a temp file in $TMPDIR (then drops it): a compile needs
 * room, and a full disk is found there, before any compile (see
 * LF_COMPILE_AUTO for what follows). The compiler
 * runs in a process group of its own and is killed when the program dies
 * (PR_SET_PDEATHSIG), so a program killed during a compile leaves no
 * compiler driver running (a step it started, such as cc1 or ld, finishes
 * and exits); the temp folder of that compile ($TMPDIR/lazyfuse-cc-<pid>-...)
 * is removed by the first compile of a later process. Environment:
 * LF_COMPILE=never (interpreter) or always (LF_COMPILE_REQUIRE), LF_CPU_MARCH (replaces -march=native, e.g.
 * x86-64-v3 under valgrind), LF_COMPILE_TIMEOUT (above), LF_DEBUG=schedule
 * (the fused schedule when a program is built), LF_DEBUG=cache (disk-cache
 * write failures), LF_DEBUG=cc (the compiler's whole log on failure). */
/* CUDA backend. Neither libcuda nor libnvrtc is linked: both are loaded at
 * run time (LF_CUDA_LIBRARY and LF_NVRTC_LIBRARY, paths, override the search
 * for libcuda.so.1 and for libnvrtc.so / .so.13 / .so.12 / lib64/ under
 * $CUDA_HOME, $CUDA_PATH and /usr/local/cuda). The context uses device 0
 * (LF_CUDA_DEVICE=n picks another), its primary CUDA context and one stream
 * of its own. Buffers live in device memory, from a caching allocator (freed
 * blocks are reused; when the device is full the cache is released and the
 * allocation retried once, then lf_buffer_new fails with LF_ERR_NOMEM and the
 * context stays usable). lf_buffer_write returns once the data is copied
 * (the host memory may be reused); lf_eval queues the kernels and returns
 * without waiting for them; lf_buffer_read waits for everything queued
 * before it, and reports a kernel that failed on the device (LF_ERR_BACKEND).
 * Each kernel of the fused schedule is printed as CUDA C++ (LF_DEBUG=source;
 * LF_DEBUG=launch prints each launch's grid) and compiled by NVRTC for the
 * device's architecture (sm_XY CUBIN; PTX of the newest older compute_XY when
 * NVRTC predates the GPU) with -fmad=false and no fast-math flag. Compiled
 * kernels are cached in memory per context and on disk in the same folder
 * as the CPU backend's, keyed by a SHA-256 of the source, the NVRTC version
 * and the target; a graph keeps the programs of its last output sets (as
 * on the CPU), so a re-evaluation into the same buffers only launches. Results: as the CPU
 * backend's, except that the transcendental functions (the CPU backend's
 * list, and cbrt) are CUDA's device
 * math library (its documented ulp bounds: e.g. 2 ulp for expf, 1 ulp for
 * exp and cbrt; same NaN and infinities), and float reductions sum in double in an
 * order fixed by the shape. Compile failures are LF_ERR_BACKEND with NVRTC's
 * log in lf_errmsg; failed launches name the driver's error.
 * Sorts: the sort's first pass is a generated kernel that computes the keys
 * (their map fused) and the values into a work area; a fixed module of sort
 * kernels (compiled once per context: one block per row in shared memory
 * for rows of up to 4096 keys, per-thread candidate lists merged in a block
 * for top-k with k <= LF_TOPK_SELECT, a stable global LSD radix sort
 * otherwise; grids from the shape alone) orders each row, and an output
 * pass moves the values and positions into place; batched rows are one
 * launch per step, never one per row.
 * Status: CI compiles the bench cases' kernels and those of a sample of
 * random graphs with NVRTC and checks a sample against the reference
 * evaluator in a host emulation; on 2026-11-27 the backend ran on an NVIDIA
 * H200 (scripts/gpu-first-run.sh): the CUDA suites passed, 768 random graphs
 * matched the reference and compute-sanitizer found nothing on a subset
 * (README, "On a GPU"; benches/measured/70-gpu-h200.md). */
/* Destroys the context and every buffer and graph still alive in it. NULL is
 * a no-op. */
LF_API void lf_ctx_destroy(lf_ctx *ctx);
/* The backend this context runs on (never AUTO). */
LF_API lf_backend lf_ctx_backend(const lf_ctx *ctx);
LF_API const char *lf_backend_name(lf_backend b);
/* Writes the options the context was made with, resolved (environment and
 * defaults applied; cache_dir points into the context), into the first size
 * bytes of *out, size being the caller's sizeof *out: this library's fields
 * that fit, zeros after them, and out->struct_size = the bytes written with
 * fields. LF_ERR_NULL for a NULL ctx or out (nothing written),
 * LF_ERR_INVALID for a size below LF_CTX_OPTIONS_SIZE_1_0. */
LF_API lf_status lf_ctx_get_options_sized(const lf_ctx *ctx, lf_ctx_options *out, size_t size);
/* The options the context was made with, as above; the defaults for a NULL
 * ctx. An inline function: the struct returned is the caller's. */
static inline lf_ctx_options lf_ctx_get_options(const lf_ctx *ctx) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    (void)lf_ctx_get_options_sized(ctx, &o, sizeof o);
    return o;
}
/* What the context computes on, for reports and benchmarks: on CUDA the GPU's
 * name, compute capability, multiprocessors and memory, and the driver's and
 * NVRTC's versions ("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB), CUDA
 * driver 12.4, NVRTC 12.4 [libnvrtc.so]", the NVRTC library loaded in
 * brackets); else the CPU's model and online CPUs.
 * snprintf-like: writes at most cap bytes (NUL included; buf may be NULL
 * when cap is 0) and returns the full length, or -1 for a NULL ctx. */
LF_API int lf_ctx_device_name(const lf_ctx *ctx, char *buf, size_t cap);
/* Waits until every lf_eval, copy and DLPack ordering queued by ctx is done
 * on its device. On CUDA lf_eval returns once its kernels are queued, so a
 * timer around lf_eval alone measures the launches: time lf_eval plus this
 * (lazyfuse-bench does). An earlier kernel's fault is reported here
 * (LF_ERR_BACKEND). On CPU and REFERENCE contexts work is done when lf_eval
 * returns and this returns LF_OK at once. LF_ERR_NULL for a NULL ctx. Not in
 * lazyfuse 0.1.0. */
LF_API lf_status lf_ctx_synchronize(lf_ctx *ctx);

/* ---- buffers ------------------------------------------------------------ */

/* A new zero-filled buffer of the given dtype and shape (ndim 0..8, extents
 * >= 0; zero-size is valid; shape may be NULL when ndim is 0).
 * Memory: a host buffer is zeroed lazily (the C library's calloc: large
 * blocks are fresh zero pages), so creating one is fast and costs resident
 * memory only as it is written. LF_ERR_NOMEM therefore comes when the address
 * space cannot be had (RLIMIT_AS, vm.overcommit_memory=2, no memory at all);
 * under a container's memory limit with overcommit, writing past the limit
 * (lf_buffer_write, lf_eval filling it) ends the process by the kernel's OOM
 * killer, as for any program: size buffers to the limit you run under. */
LF_API lf_buffer *lf_buffer_new(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape);
/* A buffer over memory the caller owns, read and written in place: no copy
 * is made by lf_eval, and an output lands in that memory directly (a CPU
 * context takes host memory, a CUDA context device memory: a CUdeviceptr
 * cast to void *). strides are in elements, one per axis, NULL for
 * C-contiguous; data is the address of element [0,..,0].
 *  - Checked: ctx non-NULL (LF_ERR_NULL), the dtype (LF_ERR_DTYPE), the
 *    shape as lf_buffer_new, data non-NULL unless the size is 0
 *    (LF_ERR_NULL), data aligned to the dtype's size (LF_ERR_INVALID), and
 *    that the byte size and the span the strides reach fit (LF_ERR_OVERFLOW).
 *    That data really is memory of that size on the right device cannot be
 *    checked.
 *  - Strides of any sign, and 0 (a broadcast), are accepted. A buffer whose
 *    strides differ from C-contiguous (on an axis of extent > 1) is a
 *    strided view: an input (lf_input reads it through a view, no copy) and
 *    lf_buffer_read (element by element, row-major) take it;
 *    lf_buffer_write and lf_eval as an output refuse it with
 *    LF_ERR_INVALID ("... wraps strided memory ...; ... must be
 *    C-contiguous"), since its elements may overlap.
 *  - Aliasing: wrapped buffers may share memory with each other. lf_eval
 *    compares memory ranges, so an output that overlaps memory the program
 *    reads through another buffer is computed into fresh memory and copied
 *    at the end (only the very buffer the program reads can be written in
 *    place, see lf_eval); two different output buffers over
 *    overlapping memory are refused (LF_ERR_INVALID). A failed eval leaves
 *    wrapped outputs untouched, as any buffer.
 *  - Lifetime: the memory must stay valid, and must not be written by
 *    anyone else during an lf_eval that reads or writes it, until release
 *    is called: release(release_arg) is called exactly once, when lazyfuse
 *    no longer needs the memory (the last of lf_buffer_free, the graphs
 *    reading the buffer, DLPack exports, or lf_ctx_destroy), never when
 *    this call fails (the memory is then still only yours). release may be
 *    NULL. Freeing the memory before that is undefined behaviour, as for
 *    any dangling pointer (a later eval reads or writes freed memory).
 *  - On a CUDA context, lf_eval's kernels run asynchronously: read the
 *    memory yourself only after lf_buffer_read or another synchronizing
 *    call on the context.
 *  - Bool memory must hold 0 or 1 in every byte (lf_buffer_write normalizes,
 *    a wrapped buffer cannot). */
LF_API lf_buffer *lf_buffer_wrap(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape,
                                 const int64_t *strides, void *data, void (*release)(void *),
                                 void *release_arg);
/* Points a wrapped buffer at other memory of the same dtype and shape (host
 * contexts): b must come from lf_buffer_wrap, C-contiguous (strides NULL or
 * row-major), with a NULL release callback, so no owner is told when lazyfuse
 * drops the old memory; data follows lf_buffer_wrap's rules (non-NULL unless
 * b is zero-size, aligned to the dtype's size, valid until the buffer is
 * freed or pointed elsewhere). Every graph that reads b reads data from its
 * next lf_eval on, and an lf_eval given b as an output writes there: one call
 * where lf_buffer_wrap + lf_input_rebind + lf_buffer_free would be three, and
 * nothing is replanned or recompiled (programs read a buffer's memory at each
 * eval; overlaps of inputs and outputs are checked at each eval too).
 * Errors (b is unchanged):
 *   LF_ERR_NULL    "buffer_set_data: buffer is NULL" (data, for a non-empty b)
 *   LF_ERR_STATE   b was freed by lf_buffer_free, or its address was exported
 *                  through DLPack (an export's memory never moves)
 *   LF_ERR_INVALID b is lazyfuse's own memory, a strided wrap, a wrap with
 *                  a release callback, or device memory; data misaligned
 * Since lazyfuse 1.2.0. */
LF_API lf_status lf_buffer_set_data(lf_buffer *b, void *data);
/* Frees a buffer. A graph that reads it keeps it alive until the graph is
 * freed. NULL is a no-op. */
LF_API void lf_buffer_free(lf_buffer *b);
/* Copies bytes of host data in; bytes must equal the buffer's byte size.
 * Bool data is normalized to 0 and 1. A strided wrapped buffer is refused. */
LF_API lf_status lf_buffer_write(lf_buffer *b, const void *src, size_t bytes);
/* Copies the buffer out, row-major; bytes must equal the buffer's byte size
 * (numel times the dtype's size, also for a strided wrapped buffer). */
LF_API lf_status lf_buffer_read(const lf_buffer *b, void *dst, size_t bytes);

struct DLManagedTensor; /* <dlpack/dlpack.h> */

/* DLPack, the array-exchange standard of NumPy, CuPy, PyTorch and JAX.
 * Include <dlpack/dlpack.h> (Debian: libdlpack-dev; lazyfuse.h only
 * declares the struct) to fill or read a DLManagedTensor.
 *
 * lf_buffer_from_dlpack: a buffer over the tensor's memory, no copy: the
 * rules of lf_buffer_wrap, with data + byte_offset as element [0,..],
 * strides in elements (NULL: compact, row-major; other strides make a
 * strided, read-only view). Accepted: kDLInt 32/64 bits (i32, i64),
 * kDLFloat 32/64 (f32, f64), bool as code 6, 8 bits (DLPack 0.8's kDLBool),
 * one lane (else LF_ERR_DTYPE); the device must be the context's: kDLCPU
 * device 0 for a CPU or REFERENCE context, kDLCUDA with the context's
 * device number for a CUDA context (else LF_ERR_INVALID); at most
 * LF_MAX_DIMS dimensions (LF_ERR_SHAPE). On success lazyfuse owns the
 * tensor and calls its deleter exactly once, when the buffer dies
 * (lf_buffer_free and the last graph reading it, or lf_ctx_destroy). On
 * failure (NULL) the tensor is still the caller's and its deleter is not
 * called. From Python, take the pointer out of the "dltensor" capsule of
 * x.__dlpack__() and rename the capsule "used_dltensor" once this
 * succeeded, as the protocol asks (tests/dlpack_numpy.py does it). */
LF_API lf_buffer *lf_buffer_from_dlpack(lf_ctx *ctx, struct DLManagedTensor *t);
/* lf_buffer_to_dlpack: *out describes the buffer's own memory (host memory
 * kDLCPU, or kDLCUDA device memory), no copy, with strides always given.
 * The export holds a reference to the buffer: the buffer stays alive,
 * even after lf_buffer_free, until the consumer calls (*out)->deleter(*out)
 * once. The context must outlive every export (lf_ctx_destroy frees the
 * memory; a deleter called after it is undefined behaviour). Bool is code
 * 6 (kDLBool), which consumers older than DLPack 0.8 refuse. On a CUDA
 * context, lf_buffer_read (or another synchronizing call) first: kernels
 * of an lf_eval may still be writing. LF_ERR_NULL, LF_ERR_NOMEM. */
LF_API lf_status lf_buffer_to_dlpack(lf_buffer *b, struct DLManagedTensor **out);
/* The stream side of the DLPack exchange protocol (Python's
 * x.__dlpack__(stream=...)), for CUDA contexts, whose work runs on a stream
 * of their own that is not ordered with other libraries' streams. A stream
 * value is -1 (no ordering), 1 (CUDA's legacy default stream), 2 (the
 * per-thread default stream) or a CUstream cast to intptr_t; 0 is refused
 * (LF_ERR_INVALID), as the protocol says it is ambiguous.
 *  - lf_ctx_dlpack_stream: the value to pass as stream= to a producer's
 *    __dlpack__ when importing into ctx (the context's own stream; -1 on a
 *    host context, whose work is done when lf_eval returns).
 *  - lf_buffer_from_dlpack_stream: lf_buffer_from_dlpack for a tensor whose
 *    data is ready on `stream` (work queued there before this call):
 *    the context's later work waits for it on the device (an event: the
 *    call does not block). A failure leaves the tensor the caller's.
 *  - lf_buffer_to_dlpack_stream: lf_buffer_to_dlpack for a consumer that
 *    will use the tensor on `stream`: work it queues there after this call
 *    sees every lf_eval queued before (no lf_buffer_read needed).
 * On a host context the stream is checked and otherwise ignored.
 * Lifetimes, on CUDA: the deleter of an imported tensor (and a wrapped
 * buffer's release) is called only after the context's queued work is
 * done; the deleter of an exported one waits for the whole device (every
 * stream of its context, the consumer's too) before lazyfuse may reuse the
 * memory. Not in lazyfuse 0.1.0. */
LF_API intptr_t lf_ctx_dlpack_stream(const lf_ctx *ctx);
LF_API lf_buffer *lf_buffer_from_dlpack_stream(lf_ctx *ctx, struct DLManagedTensor *t, intptr_t stream);
LF_API lf_status lf_buffer_to_dlpack_stream(lf_buffer *b, intptr_t stream, struct DLManagedTensor **out);
LF_API lf_dtype lf_buffer_dtype(const lf_buffer *b);
LF_API int lf_buffer_ndim(const lf_buffer *b);
/* Extent of dimension axis (negative counts from the end); -1 if out of range. */
LF_API int64_t lf_buffer_dim(const lf_buffer *b, int axis);
LF_API int64_t lf_buffer_numel(const lf_buffer *b);
LF_API size_t lf_buffer_bytes(const lf_buffer *b);

/* ---- graphs ------------------------------------------------------------- */

LF_API lf_graph *lf_graph_new(lf_ctx *ctx);
/* Frees the graph, its nodes and fns, and releases the buffers it read.
 * Their handles are dangling afterwards: using a node or fn of a freed graph
 * is undefined behaviour, as for any freed memory. Builders and lf_eval check
 * that each node and fn they get was made by the graph they get (its address
 * and a serial number unique in the process), so passing a stale node to a
 * newer graph, even one malloc placed at the freed graph's address, is
 * usually the error LF_ERR_STATE "... belongs to another graph (or to a freed
 * one)"; usually, not always, since the freed memory may hold anything by
 * then. Calls that take only a node or an fn (lf_node_dtype, lf_fn_op, ...)
 * cannot check. */
LF_API void lf_graph_free(lf_graph *g);
/* LF_OK, or the graph's first (sticky) error. */
LF_API lf_status lf_graph_status(const lf_graph *g);
/* The graph's first error message, "" if none. */
LF_API const char *lf_graph_errmsg(const lf_graph *g);

/* Node queries. */
LF_API lf_dtype lf_node_dtype(const lf_node *n);
LF_API int lf_node_ndim(const lf_node *n);
LF_API int64_t lf_node_dim(const lf_node *n, int axis); /* -1 if out of range */
LF_API int64_t lf_node_numel(const lf_node *n);

/* ---- sources ------------------------------------------------------------- */

/* Reads buffer b (dtype and shape from it). A strided wrapped buffer
 * (lf_buffer_wrap) is read in place through a view of its memory, like a
 * slice: no copy. */
LF_API lf_node *lf_input(lf_graph *g, lf_buffer *b);
/* A 0-d constant of dtype t (value converted as a cast would: to f32 rounded
 * to nearest, to an integer truncated toward zero and saturated, NaN to 0; to
 * bool nonzero (NaN included) is 1). A constant is a value, not code: it
 * reaches the compiled kernels as a run-time parameter, so kernels that
 * differ only in their constants' values are one kernel, compiled once, and
 * lf_scalar_set changes a value without recompiling or replanning. One
 * exception: a constant that a node reads directly as the exponent of a
 * float ** (lf_pow(g, x, c), "(x, y) -> x ** y" of c) is compiled by its
 * value's class: 0.5, 2, 1, 0 (-0 too) and -1 each make a kernel that
 * computes the power without pow (as fast as sqrt(x), x*x, x, 1, 1/x;
 * the same values as pow), every other value one general kernel. Each
 * class compiles once; lf_scalar_set to a value of another class replans
 * (lf_eval_stats' program_reused false) and takes that class's kernel.
 * Literals inside fn strings ("x -> x*0.5") are part of the fn instead: a
 * different literal is a different kernel. */
LF_API lf_node *lf_const(lf_graph *g, lf_dtype t, double value);
/* An array of the given shape filled with value (converted as lf_const
 * does); like lf_const, a run-time parameter of the kernels, never stored. */
LF_API lf_node *lf_fill(lf_graph *g, lf_dtype t, double value, int ndim, const int64_t *shape);
/* Sets the value of constant node c (made by lf_const or lf_fill on g) to
 * value, converted to c's dtype exactly as lf_const converts it. The next
 * lf_eval uses it; nothing is replanned or recompiled (a cached program of g
 * stays valid: lf_eval_stats' program_reused, kernels_compiled 0), on every
 * backend, except when c is an exponent whose value class changes (lf_const
 * above: a replan, and a compile the first time the class is seen). Only constants take a value: inputs, iotas, random nodes and the
 * nodes built from constants (a cast, a map, a view of one) do not.
 * Errors (the graph and the value are unchanged; the graph does not fail):
 *   LF_ERR_NULL   "scalar_set: graph is NULL", "scalar_set: node is NULL"
 *   LF_ERR_STATE  "scalar_set: node belongs to another graph (or to a freed one)"
 *   LF_ERR_INVALID "scalar_set: node N is not a constant (only lf_const and
 *                 lf_fill nodes take a value)", N the node's creation index
 * On a graph that has already failed it returns the graph's first error and
 * does nothing. */
LF_API lf_status lf_scalar_set(lf_graph *g, lf_node *c, double value);
/* Points input node `input` (what lf_input returned) of g at buffer b
 * instead, so that a built graph runs again on new data: the next lf_eval
 * reads b, and nothing is replanned or recompiled (a cached program of g
 * stays valid: lf_eval_stats' program_reused, kernels_compiled 0), on every
 * backend. b must have the old buffer's dtype, shape and layout (both
 * C-contiguous, or both strided wraps with the same strides, offset and
 * span). The graph takes a reference to b, as lf_input does, and drops the
 * old buffer's when no other input node of g reads it (the old buffer is
 * then freed, or its release / DLPack deleter called, if nothing else holds
 * it). When the old or the new buffer is also read by another input node of
 * g, the graph's cached programs are dropped (input nodes of one buffer are
 * one load in a program; two buffers are two): the next eval plans again, and
 * compiles kernels of the new structure unless the context's cache has
 * them. Rebinding to the same buffer does
 * nothing. An output buffer is bound at each lf_eval already.
 * Errors (the graph and its bindings are unchanged; the graph does not fail):
 *   LF_ERR_NULL    "input_rebind: graph is NULL" (node, buffer)
 *   LF_ERR_STATE   "input_rebind: node belongs to another graph (or to a
 *                  freed one)", "input_rebind: buffer belongs to another context"
 *   LF_ERR_INVALID "input_rebind: node 3 (add f32[4]) is not an input (only
 *                  nodes lf_input returned)", or a layout that differs
 *   LF_ERR_DTYPE   "input_rebind: node 0 (input f32[4]) reads f32, the new buffer is f64"
 *   LF_ERR_SHAPE   "input_rebind: node 0 (input f32[4]) has shape [4], the new buffer [5]"
 *   LF_ERR_NOMEM
 * On a graph that has already failed it returns the graph's first error and
 * does nothing. Since lazyfuse 1.1.0. */
LF_API lf_status lf_input_rebind(lf_graph *g, lf_node *input, lf_buffer *b);
/* 1-d [0, 1, ..., n-1] of an integer or float dtype. */
LF_API lf_node *lf_iota(lf_graph *g, lf_dtype t, int64_t n);
/* 1-d start, start+step, ... while < stop (> stop for negative step), as
 * NumPy's arange: ceil((stop-start)/step) elements. step must not be 0. */
LF_API lf_node *lf_arange(lf_graph *g, lf_dtype t, double start, double stop, double step);

/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC 2011,
 * "Parallel random numbers: as easy as 1, 2, 3"). Element i (the row-major
 * flat index in the node's own shape) is a pure function of (seed, i), so
 * every backend, every thread count and every view of the node give the
 * same bits. A random node is a source like lf_iota: it fuses into its
 * consumers, which compute it in registers; it is stored only when it is an
 * output or marked with lf_node_materialize. A new seed does not recompile
 * (it is a kernel parameter); another distribution or dtype does.
 *
 * Element i, exactly:
 *   (x0, x1, x2, x3) = Philox4x32-10(counter = (lo32(i), hi32(i), 0, 0),
 *                                    key = (lo32(seed), hi32(seed)))
 *   (one block per element; i as uint64; lo32/hi32 its 32-bit halves)
 *   LF_RANDOM_BITS (i32, i64): i32 is x0 as a signed 32-bit value, i64 is
 *     x1 * 2^32 + x0 as a signed 64-bit value (two's complement).
 *   LF_RANDOM_UNIFORM in [0, 1): f32 is (x0 >> 8) * 2^-24 (24 bits, exact
 *     in float), f64 is ((x1 * 2^32 + x0) >> 11) * 2^-53 (53 bits).
 *   LF_RANDOM_NORMAL (mean 0, sd 1): Box-Muller, z = sqrt(-2 ln u1) *
 *     cos(2 pi u2) with u1 = (2 a + 1) * 2^-53 in (0, 1), a = (x1 * 2^32 +
 *     x0) >> 12 (52 bits), and u2 = b * 2^-53, b = (x3 * 2^32 + x2) >> 11
 *     (the sine of the pair is not used). It is computed in double with +,
 *     -, *, / and sqrt only (correctly rounded on every target, no fused
 *     multiply-add): ln by exponent extraction from the integer 2a+1 and
 *     the atanh series to 1/23; cos(2 pi u2) by octant reduction on the
 *     integer b and Taylor series of sin and cos on [0, pi/4] to 1/20!. No
 *     libm, libmvec or device math call is involved, so the values are
 *     bit-identical everywhere. Both functions are meant to be within about
 *     2^-50 (relative) of the exact ones (not measured: the tests check z
 *     within 1e-14 (1 + |z|) of libm's Box-Muller, in
 *     eval/random_matches_plain_philox and
 *     eval/random_normal_branch_free_same_values); |z| <= 8.6. f32 is the
 *     f64 value rounded to float. Uniform and normal nodes of one seed
 *     share x0, x1: use different seeds for independent streams.
 * dtype: UNIFORM and NORMAL take f32 or f64, BITS takes i32 or i64 (else
 * LF_ERR_DTYPE); an unknown dist is LF_ERR_INVALID; ndim and shape as
 * lf_fill (zero-size shapes are valid). */
typedef enum lf_random_dist {
    LF_RANDOM_UNIFORM, /* [0, 1) */
    LF_RANDOM_NORMAL,  /* mean 0, standard deviation 1 */
    LF_RANDOM_BITS     /* raw Philox output bits */
} lf_random_dist;
LF_API lf_node *lf_random(lf_graph *g, lf_dtype t, lf_random_dist dist, int ndim, const int64_t *shape,
                          uint64_t seed);

/* ---- gather (an index that is data) ------------------------------------ */

/* NumPy's take_along_axis: out[..., i, ...] = x[..., idx[..., i, ...], ...]
 * with the index replacing x's coordinate on `axis` (-ndim .. ndim-1). idx
 * is an i32 or i64 node of x's rank that broadcasts against x on every axis
 * but `axis`; the output has idx's extent on `axis`, the broadcast extent
 * elsewhere, and x's dtype. A 1-d x takes any-shaped idx (NumPy's take:
 * out has idx's shape). Negative indices count from the end, as in NumPy.
 * An index still out of range makes lf_eval fail with LF_ERR_INDEX and the
 * message "node <ID> (gather <dtype><shape>): index V out of range for axis
 * A of size N at position [i,j,...]" naming the lowest row-major position of the gather's
 * output whose index is bad (whatever the thread count); no output buffer
 * is changed. Every index of a gather node is checked, also where a view
 * reads only part of it.
 * Errors: axis out of range (LF_ERR_AXIS), idx not i32/i64 (LF_ERR_DTYPE),
 * ranks differ (x not 1-d) or shapes that do not broadcast (LF_ERR_SHAPE).
 * Fusion: the index's producers run in their own kernel (a stored index),
 * x is read from a buffer (an input or a materialized node: its positions
 * are data), and the gather's consumers read it in registers
 * (exp(x[idx]) * w is one kernel). */
LF_API lf_node *lf_gather(lf_graph *g, lf_node *x, int axis, lf_node *idx);
/* NumPy's take(x, idx, axis): every index of idx (i32 or i64, any shape, 0-d
 * included) picks a slice of x along `axis` (-ndim .. ndim-1); the output is
 * x's shape with the axis replaced by idx's shape (ndim(x) - 1 + ndim(idx)
 * dimensions, at most LF_MAX_DIMS), x's dtype. An embedding lookup is
 * lf_take(g, table, 0, idx): table [V, D] and idx [N] give [N, D], no
 * reshape of idx to [N, 1]. A gather node with take's geometry: lf_gather's
 * index rules (negative counts from the end; out of range is lf_eval's
 * LF_ERR_INDEX, "take n<ID>: index V out of range for axis A of size N at
 * position [..]", the lowest row-major position of the output) and its
 * fusion (table[idx] * w is one kernel reading idx where it lies).
 * Errors: axis out of range or x 0-d (LF_ERR_AXIS, "take: axis 2 out of
 * range for 2 dimensions"), idx not i32/i64 (LF_ERR_DTYPE), too many
 * output dimensions (LF_ERR_SHAPE). */
LF_API lf_node *lf_take(lf_graph *g, lf_node *x, int axis, lf_node *idx);

/* ---- scatter and bincount (a store whose index is data) ---------------- */

/* How lf_scatter combines a value into its destination element. */
typedef enum lf_scatter_op {
    LF_SCATTER_SET,  /* the value at the highest position wins */
    LF_SCATTER_ADD,
    LF_SCATTER_MIN,  /* NaN propagates */
    LF_SCATTER_MAX,  /* NaN propagates */
    LF_SCATTER_PROD
} lf_scatter_op;
/* A new array: dst (unchanged itself) with values combined in at positions
 * idx along axis: NumPy's put_along_axis for SET, np.add.at and friends for
 * the others. The positions are S: dst's shape with the axis extent taken
 * from idx and values broadcast together (idx and values must broadcast to
 * S; idx has dst's rank); a 1-d dst takes any-shaped idx and values that
 * broadcast together (np.add.at(dst, idx, values)). Position p writes dst's
 * element at p with the axis coordinate replaced by idx[p] (negative
 * indices count from the end); values are converted to dst's dtype first
 * and the result has dst's dtype and shape. Out-of-range indices fail
 * lf_eval with LF_ERR_INDEX, "node <ID> (scatter <op> <dtype><shape>): index
 * V out of range for axis A of size N at position [..]" (the lowest
 * position of S), outputs
 * untouched.
 * Order (results never depend on threads or timing, every backend is
 * bit-identical to the reference): SET takes the value of the highest
 * row-major position of S that names the element (dst's value if none).
 * ADD, PROD, MIN, MAX: S's positions, row-major, are cut into blocks of
 * LF_SCATTER_BLOCK positions when dst has at most LF_SCATTER_SMALL elements
 * (histograms), else form one block; each block folds its values per
 * destination element in position order into a partial that starts at the
 * identity (-0.0 or 0, 1, +inf or the largest integer, -inf or the
 * smallest), in dst's dtype (floats round at every step, integers wrap);
 * then out = ((dst (+) part_0) (+) part_1) ... in block order. MIN and MAX
 * return NaN when either side is NaN. dst's dtype must not be bool for ADD
 * and PROD (LF_ERR_DTYPE). The CPU backend runs the blocks on its threads
 * (each into its own partials) and then dst's elements; CUDA gives each
 * block of positions one thread (no atomics; its parallelism is the number
 * of blocks, so a scatter into a large dst is one sequential thread there)
 * and then a thread per element of dst.
 * Fusion: the producers of idx and values are computed in the scatter's
 * kernel (a histogram of floor(x*256) reads x once, one kernel); dst is read
 * from a buffer (an input or a stored node) or is a constant fill. */
#define LF_SCATTER_BLOCK 65536
#define LF_SCATTER_SMALL 4096
LF_API lf_node *lf_scatter(lf_graph *g, lf_scatter_op op, lf_node *dst, int axis, lf_node *idx,
                           lf_node *values);
/* Counts (weights NULL: i64) or sums of weights (the weights' dtype; bool
 * weights count as i64) per index value in 0 .. nbins-1: a scatter ADD of
 * weights (or 1) into zeros(nbins) along axis 0 (np.bincount with
 * minlength = nbins). Unlike lf_scatter, a negative value is not counted
 * from the end: as np.bincount, it fails lf_eval with LF_ERR_INDEX,
 * "bincount n<ID>: negative value V at position [..] (bincount counts
 * values 0 .. nbins-1)", and a value >= nbins with lf_scatter's "index V
 * out of range" message; the position is the lowest row-major one with a
 * bad value (whatever the thread count), and no output buffer is changed.
 * weights must broadcast against idx. nbins < 0 is LF_ERR_SHAPE. */
LF_API lf_node *lf_bincount(lf_graph *g, lf_node *idx, lf_node *weights, int64_t nbins);

/* ---- views (no data is copied; they become index arithmetic) ------------ */

/* New shape of the same element count; one extent may be -1 (inferred). */
LF_API lf_node *lf_reshape(lf_graph *g, lf_node *x, int ndim, const int64_t *shape);
/* Output axis i is input axis perm[i]; perm is a permutation of 0..ndim-1. */
LF_API lf_node *lf_permute(lf_graph *g, lf_node *x, const int *perm);
/* Reverses the axes (a matrix transpose for 2-d). */
LF_API lf_node *lf_transpose(lf_graph *g, lf_node *x);
/* Broadcasts x to shape by NumPy's rules. */
LF_API lf_node *lf_broadcast_to(lf_graph *g, lf_node *x, int ndim, const int64_t *shape);
/* Inserts an axis of extent 1 at position axis (-ndim-1 .. ndim). */
LF_API lf_node *lf_expand_dims(lf_graph *g, lf_node *x, int axis);
/* Python's x[start:stop:step] along one axis. start and stop may be negative
 * (counting from the end) or LF_NONE (from the natural end for step's sign);
 * after adding the extent to a negative value, start and stop must lie in
 * 0..extent, else LF_ERR_RANGE (bounds are checked, not clamped). step is
 * any int64_t but 0 and INT64_MIN (LF_ERR_RANGE); negative steps walk
 * backwards; a step longer than the slice takes one element, as in Python. */
LF_API lf_node *lf_slice(lf_graph *g, lf_node *x, int axis, int64_t start, int64_t stop, int64_t step);

/* ---- pad and concatenate (index maps that branch; nothing is copied) ---- */

/* How lf_pad fills the border (NumPy's np.pad modes of the same names). */
typedef enum lf_pad_mode {
    LF_PAD_CONSTANT = 0, /* value, converted to x's dtype as lf_const does */
    LF_PAD_EDGE = 1,     /* the nearest edge element repeated */
    LF_PAD_REFLECT = 2   /* mirrored about the edge element, which is not
                            repeated ([1 2 3] padded by 2 each side: [3 2 1 2
                            3 2 1]); a border wider than the extent keeps
                            reflecting, as NumPy does (period 2(n-1); an
                            extent of 1 repeats its element) */
} lf_pad_mode;

/* NumPy's np.pad(x, [(before[d], after[d]) ...], mode): extent d becomes
 * before[d] + x's extent + after[d], x's dtype. before and after have x's
 * ndim entries (may be NULL for a 0-d x, which is returned as is); value is
 * used by LF_PAD_CONSTANT only. A pad node is a view: x is read where it
 * lies through an index map that clamps or reflects the position, and the
 * constant border is a select on the position inside the same kernel, so
 * pad(x) * 2 + 1, or a stencil of slices of pad(x), is one kernel with no
 * stored temporary (x itself is read from memory when it is an input or a
 * materialized node, else computed in the kernel). All widths zero returns
 * x. Errors: NULL arguments (LF_ERR_NULL), a negative width (LF_ERR_SHAPE,
 * "pad: negative width -2 after axis 0 of node 4 (add f32[1000,3])"), an
 * edge or reflect border on an axis of extent 0 (LF_ERR_SHAPE, as NumPy
 * refuses it), an unknown mode (LF_ERR_INVALID), a padded extent or shape
 * past int64_t (LF_ERR_OVERFLOW). Since lazyfuse 1.1.0. */
LF_API lf_node *lf_pad(lf_graph *g, lf_node *x, const int64_t *before, const int64_t *after, lf_pad_mode mode,
                       double value);

/* Most pieces lf_concat joins in one call (join more by nesting calls). */
#define LF_CONCAT_MAX 32

/* NumPy's np.concatenate(xs, axis): n pieces (1 .. LF_CONCAT_MAX) of the
 * same ndim (>= 1) whose extents agree except on axis (-ndim .. ndim-1),
 * joined in order along it; the dtype is the promotion of the pieces'
 * dtypes (lf_dtype_promote), each piece converted as lf_cast does. Pieces
 * of extent 0 on the axis are allowed (they add nothing). Each piece is
 * read through an index map (a clamped view of it) and the output picks
 * the piece by position in the same kernel, so concat(a, b) * 2 is one
 * kernel with no stored temporary. Errors: NULL arguments (LF_ERR_NULL), n
 * out of range or a 0-d piece (LF_ERR_SHAPE), axis out of range
 * (LF_ERR_AXIS), ranks or extents that differ (LF_ERR_SHAPE, naming both
 * pieces as "node 4 (add f32[1000,3])"), a joined extent or shape past
 * int64_t (LF_ERR_OVERFLOW). Since lazyfuse 1.1.0. */
LF_API lf_node *lf_concat(lf_graph *g, int n, lf_node *const *xs, int axis);

/* ---- scalar functions --------------------------------------------------- */

typedef enum lf_op {
#define LF_OP(ID, text, arity, syntax, typing, cname) LF_OP_##ID,
#include "lazyfuse_ops.def"
    LF_NOPS
} lf_op;

/* Parses "(a, b, ...) -> expr". Operators, by rising precedence (Python's):
 *   or (also ||);  and (also &&);  not (also !);  < <= > >= == != (no chains);
 *   |;  ^;  &;  << >>;  + -;  * / // %;  unary - + ~;
 *   ** (right-associative: -x**2 is -(x**2), ~x**2 is ~(x**2)).
 * So x & 7 == 3 is (x & 7) == 3, and x >> 2 & 3 is (x >> 2) & 3.
 * Calls: every CALL operator in lazyfuse_ops.def (min, max, abs, ..., where),
 * pow(a, b) (same as a**b), the NumPy / numexpr spellings power, absolute,
 * minimum, maximum (NaN-propagating, as min and max), arcsin, arccos, arctan,
 * arctan2, arcsinh, arccosh, arctanh (printed back as the table's names), and
 * casts bool(x), i32(x), i64(x), f32(x), f64(x). fmod(a, b) is C's fmod (the
 * dividend's sign; integers: C's %, with fmod(x, 0) == 0), a % b Python's.
 * Names: the parameters, and the constants pi, e, inf, nan. Numbers: 2 is an
 * integer literal, 2.0 / 2e0 / .5 / 5. are float literals (both weak, see
 * above). A minus directly before a number or named constant makes a negative
 * constant (write -(2) for the negation); -2**2 is still -(2**2). Parameter
 * names are 0 to 8 distinct identifiers that are not builtin names ("() ->
 * 1+1" is a fn of no parameters, see lf_zipwith), except
 * that a parameter may take a constant's name (e, pi, inf, nan) and then
 * hides the constant: "(b, c, d, e) -> b*c+d*e" multiplies by e. Nesting
 * depth is not limited: the parser keeps what is still open on the heap (about
 * 40 bytes a level), not on the thread's stack, so deep input needs no more
 * stack than shallow (a few KiB; any input is parsed or refused on a 64 KiB
 * thread stack); running out of memory is LF_ERR_NOMEM. Numbers are read and
 * printed in the "C" locale.
 * On error returns NULL and the message says "parse error at LINE:COL: ...". */
LF_API lf_fn *lf_fn_parse(lf_graph *g, const char *src);
/* Builder: a new fn of nparams parameters (0..8) named p0, p1, ... Expressions
 * are ids (>= 0) inside the fn; a builder call given a negative id, or that
 * fails, returns -1 and records the error on the graph. lf_fn_op takes the
 * op's arity operands and -1 for the unused ones (anything else is an error).
 * Identical expressions are stored once (common subexpressions are shared). */
LF_API lf_fn *lf_fn_new(lf_graph *g, int nparams);
LF_API int lf_fn_param(lf_fn *f, int index);
LF_API int lf_fn_const(lf_fn *f, double value);      /* weak float literal */
LF_API int lf_fn_const_int(lf_fn *f, int64_t value); /* weak integer literal */
LF_API int lf_fn_op(lf_fn *f, lf_op op, int a, int b, int c); /* unused operands: -1 */
LF_API int lf_fn_cast(lf_fn *f, lf_dtype t, int a);
/* Sets the result expression; the fn is usable once it has one. */
LF_API lf_status lf_fn_set_result(lf_fn *f, int e);
LF_API int lf_fn_arity(const lf_fn *f);
/* Prints f in the parser's syntax; parsing the text gives an equal fn, however
 * deep f is (no fn walk in lazyfuse recurses over its expressions: printing,
 * typing, fusion, codegen and evaluation use the same stack at any depth).
 * snprintf-like: writes at most cap bytes (NUL included) and returns the full
 * length, or -1 for a NULL or unfinished fn, a text longer than INT_MAX, or an
 * allocation failure. */
LF_API int lf_fn_print(const lf_fn *f, char *buf, size_t cap);
/* Structural equality of the result expressions (parameter names ignored). */
LF_API bool lf_fn_equal(const lf_fn *a, const lf_fn *b);

/* ---- user functions written in C (1.3) ------------------------------------
 *
 * lf_fn_c declares a scalar function whose body the user writes in C. The
 * fn it returns is used like any other (lf_map, lf_zipwith, composed by
 * fusion): kernels call it like a builtin operator, its definition is
 * printed into each kernel's translation unit that calls it, so
 * map(user_f, map(g, x)) is still one kernel, and its text is part of the
 * kernel's source, hence of the kernel cache's keys (memory and disk).
 *
 *   lf_fn *f = lf_fn_c(g, "smooth", "f32(f32 x, f32 k)",
 *                      "float t = x / k;\n"
 *                      "return t / (1.0f + fabsf(t));");
 *
 * name: a C identifier of at most 63 bytes, not starting with "lf_", "LF_"
 * or "_", and not used by another user function of the same graph with a
 * different signature or text (declaring the same one again returns an
 * equal fn).
 * signature: "RET(T1 a, T2 b, ...)" with RET and Ti dtype names (bool, i32,
 * i64, f32, f64; lf_dtype_name's spelling) and 0 to 3 parameters; a
 * parameter's name is optional (unnamed ones are p0, p1, p2 in the body) and
 * must be a C identifier. Blanks are free.
 * c_source: the function's BODY (the statements between its braces; it must
 * return a value), in C11 with <math.h> and <stdint.h> included; the C types
 * of the dtypes are bool -> int (0 or 1; a nonzero result is true), i32 ->
 * int32_t, i64 -> int64_t, f32 -> float, f64 -> double. The library writes the function's head itself
 * (static, in the kernel's unit), so the body cannot declare other
 * functions. An argument of another dtype is converted to the parameter's
 * dtype with lf_cast's rules first; the result has dtype RET.
 *
 * Checked when declared: a bad name or signature is LF_ERR_INVALID (the
 * message says what is wrong). The body is compiled at once, with the same
 * compiler and flags as the CPU backend's kernels ($CC, the context's
 * compile_timeout), into a host function that the reference evaluator and
 * the CPU interpreter call element by element (contexts of every backend
 * do this; a context keeps each distinct body compiled once, until it is
 * destroyed). A body that does not compile is LF_ERR_COMPILE with the
 * compiler's message, whose "NAME:LINE" positions count the lines of
 * c_source from 1; a compiler that cannot run is LF_ERR_BACKEND. Either way
 * NULL is returned and the error is sticky on the graph, as for every
 * builder.
 *
 * Evaluation: every evaluator computes f(args) by calling the body; the
 * library assumes it is a pure function of its arguments (no state, same
 * result for the same arguments): the planner may compute it more or fewer
 * times than the graph names it. lf_fn_print writes a call as
 * NAME(args), and lf_fn_parse on the same graph reads NAME(args) as a call
 * of the user function declared there by that name (builtin function and
 * cast names come first; a parameter of that name is not callable), so
 * "(x) -> smooth(x * 2.0, 3.0) + 1" composes it with builtins in one fn. */
LF_API lf_fn *lf_fn_c(lf_graph *g, const char *name, const char *signature, const char *c_source);
/* lf_fn_c with a body for each dialect: c_source for the CPU backend and
 * the host function, cuda_source for CUDA kernels (NVRTC, CUDA C++ device
 * code; NULL: c_source is used for both). Both get the same head: in CUDA
 * a __device__ function with the same types (int for bool, int32_t,
 * int64_t, float, double). cuda_source is checked when a CUDA kernel
 * using it is compiled: an error then fails that lf_eval with NVRTC's log.
 * The two bodies must compute the same function; the library checks the
 * CUDA one only by compiling it. */
LF_API lf_fn *lf_fn_c_cuda(lf_graph *g, const char *name, const char *signature, const char *c_source,
                           const char *cuda_source);
/* A user function whose code is precompiled: the function `symbol` of the
 * shared object at `path` (dlopen(path, RTLD_NOW | RTLD_LOCAL), so a path
 * without '/' is searched as dlopen does), with the C prototype that
 * signature gives (lf_fn_c's rules; the C types: bool -> int, i32 ->
 * int32_t, i64 -> int64_t, f32 -> float, f64 -> double). The library stays
 * loaded while the graph lives. CPU kernels call it through its address,
 * a run-time kernel parameter (the kernel's text, hence its cache key,
 * holds no address), so it is never inlined; the reference evaluator and
 * the interpreter call it through a small compiled trampoline (lf_fn_c's
 * host compile). The CUDA backend cannot call host code: a CUDA kernel
 * that would is refused when compiled (lf_eval fails with LF_ERR_BACKEND).
 * Errors: LF_ERR_NULL, LF_ERR_INVALID for a library that does not load or
 * lacks the symbol (dlerror's text in the message), a bad name or
 * signature; the trampoline's compile as lf_fn_c's. The library cannot
 * check that the prototype is right: a wrong one is undefined behaviour. */
LF_API lf_fn *lf_fn_from_library(lf_graph *g, const char *name, const char *signature, const char *path,
                                 const char *symbol);

/* ---- extern nodes: a user routine inside the graph (1.3) ------------------
 *
 * lf_extern makes a node whose value a callback computes from its inputs'
 * values: an escape hatch for routines that are no map / reduce (a user's
 * own code, a vendor library). The planner treats it as a barrier with a
 * step of its own: lf_eval first evaluates the extern's inputs (their
 * producers fuse with each other up to this boundary, as if they were the
 * eval's outputs) into temporary arrays, calls the callback, and then
 * evaluates the rest, which reads the extern's result like an input
 * (consumers fuse with each other from the boundary on; nothing fuses
 * across it). The extern's inputs and result are therefore always
 * materialized; lf_eval_stats counts the kernels of every step (kernels,
 * bytes, compile figures), not the callback.
 *
 * Every backend runs it the same way: the callback gets dense row-major
 * host arrays (a device backend copies the inputs to the host and the
 * result back), on the thread that called lf_eval, once per lf_eval that
 * needs it, extern nodes in creation order. It must write all of out->data
 * (zero-filled when it is called; bool: any nonzero byte is true) and
 * return 0, or return nonzero after writing a message into msg (msg_cap
 * bytes, NUL-terminated; may be left empty): lf_eval then fails with
 * LF_ERR_EXTERN, "eval: extern node N (extern NAME ...) failed: MSG", and
 * no output buffer is changed. It must not call lazyfuse on the same
 * context, and must not keep the pointers it is given. */
typedef struct lf_extern_array {
    void *data;              /* dense row-major elements (NULL when numel is 0) */
    lf_dtype dtype;
    int ndim;
    const int64_t *shape;    /* ndim extents */
    int64_t numel;           /* product of the extents */
} lf_extern_array;
typedef int (*lf_extern_fn)(void *user, int nin, const lf_extern_array *ins, const lf_extern_array *out,
                            char *msg, size_t msg_cap);
/* An extern node of dtype t and shape (ndim, shape) computed by fn(user,
 * ...) from ins[0..nin) (0..LF_MAX_ARGS nodes of g). name (a label for
 * messages and DOT, 1..63 printable bytes) and fn must not be NULL. Errors
 * as every builder's: LF_ERR_NULL, LF_ERR_INVALID (name, nin), LF_ERR_SHAPE
 * / LF_ERR_OVERFLOW (shape), LF_ERR_DTYPE, sticky on the graph. The node
 * may be an output, an input of any node and of other extern nodes;
 * lf_input_rebind refuses it. */
LF_API lf_node *lf_extern(lf_graph *g, const char *name, lf_extern_fn fn, void *user, int nin,
                          lf_node *const *ins, lf_dtype t, int ndim, const int64_t *shape);

/* ---- Fourier transforms (1.4, issue 31) ------------------------------------
 *
 * lf_fft(x, axis) is NumPy's numpy.fft.fft(x, axis=axis) and lf_ifft its
 * numpy.fft.ifft: the discrete Fourier transform of every 1-D line of x
 * along axis (batched over the other axes), forward y[k] = sum_j x[j]
 * exp(-2 pi i j k / n), inverse with exp(+2 pi i j k / n) and divided by n
 * (NumPy's default "backward" normalization), n = x's extent on axis (no
 * padding or cropping). The result has x's shape and dtype c64 when x is
 * c64, f32, f16 or bf16 (NumPy 2 computes float32 in single precision),
 * c128 otherwise; x is cast to it first. An FFT node is an extern node
 * (lf_extern, above) the library makes: a barrier, x's producers fuse up to
 * it and its consumers from it (fft(a) * fft(b) is one kernel between the
 * transforms), and every backend runs it the same way, with FFTW on host
 * arrays (multi-threaded with the context's thread count; FFTW_ESTIMATE
 * plans, made once per node and kept with the graph), the reference
 * evaluator included. Results are FFTW's, not bit-identical to other FFT
 * libraries (NumPy's pocketfft differs in the last bits). Errors:
 * LF_ERR_AXIS (axis out of range, or a 0-d x), LF_ERR_SHAPE (zero points
 * along axis), LF_ERR_BACKEND (this build has no FFTW), sticky on the
 * graph. The CUDA backend copies through the host (no cuFFT yet). */
LF_API lf_node *lf_fft(lf_graph *g, lf_node *x, int axis);
LF_API lf_node *lf_ifft(lf_graph *g, lf_node *x, int axis);

/* ---- elementwise nodes ---------------------------------------------------- */

/* map(f, x): f must take one parameter. */
LF_API lf_node *lf_map(lf_graph *g, lf_fn *f, lf_node *x);
/* zipwith(f, xs...): 0..8 inputs, broadcast together (NumPy rules); f takes n
 * parameters. Input i becomes parameter i. With n == 0 (xs may be NULL) f
 * takes no parameters and the node is 0-d, f's value computed by the kernel
 * that needs it, typed by the literal rules: "() -> 1+1" is an i64 2,
 * "() -> sin(pi/4)" an f64, "() -> f32(1)/3" an f32. */
LF_API lf_node *lf_zipwith(lf_graph *g, lf_fn *f, int n, lf_node *const *xs);
/* where(c, a, b), broadcasting all three. */
LF_API lf_node *lf_select(lf_graph *g, lf_node *c, lf_node *a, lf_node *b);
LF_API lf_node *lf_cast(lf_graph *g, lf_node *x, lf_dtype t);
/* One builtin operator applied elementwise (arity 1, 2 or 3 inputs; unused
 * inputs NULL). The convenience calls below are this with a fixed op. */
LF_API lf_node *lf_apply(lf_graph *g, lf_op op, lf_node *a, lf_node *b, lf_node *c);

#define LF_UNARY_(name, OP) \
    static inline lf_node *lf_##name(lf_graph *g, lf_node *a) { return lf_apply(g, LF_OP_##OP, a, NULL, NULL); }
#define LF_BINARY_(name, OP) \
    static inline lf_node *lf_##name(lf_graph *g, lf_node *a, lf_node *b) { return lf_apply(g, LF_OP_##OP, a, b, NULL); }
LF_BINARY_(add, ADD) LF_BINARY_(sub, SUB) LF_BINARY_(mul, MUL) LF_BINARY_(div, DIV)
LF_BINARY_(mod, MOD) LF_BINARY_(pow, POW) LF_BINARY_(lt, LT) LF_BINARY_(le, LE)
LF_BINARY_(gt, GT) LF_BINARY_(ge, GE) LF_BINARY_(eq, EQ) LF_BINARY_(ne, NE)
LF_BINARY_(logical_and, AND) LF_BINARY_(logical_or, OR)
LF_BINARY_(minimum, MIN) LF_BINARY_(maximum, MAX) LF_BINARY_(atan2, ATAN2)
LF_BINARY_(hypot, HYPOT) LF_BINARY_(floor_divide, FLOORDIV) LF_BINARY_(bitwise_and, BITAND)
LF_BINARY_(bitwise_or, BITOR) LF_BINARY_(bitwise_xor, BITXOR) LF_BINARY_(left_shift, LSHIFT)
LF_BINARY_(right_shift, RSHIFT) LF_UNARY_(bitwise_not, BITNOT)
LF_UNARY_(neg, NEG) LF_UNARY_(logical_not, NOT) LF_UNARY_(abs, ABS) LF_UNARY_(sign, SIGN)
LF_UNARY_(floor, FLOOR) LF_UNARY_(ceil, CEIL) LF_UNARY_(round, ROUND) LF_UNARY_(trunc, TRUNC)
LF_UNARY_(sqrt, SQRT) LF_UNARY_(rsqrt, RSQRT) LF_UNARY_(cbrt, CBRT) LF_UNARY_(exp, EXP)
LF_UNARY_(exp2, EXP2) LF_UNARY_(expm1, EXPM1) LF_UNARY_(log, LOG) LF_UNARY_(log2, LOG2)
LF_UNARY_(log10, LOG10) LF_UNARY_(log1p, LOG1P) LF_UNARY_(sin, SIN) LF_UNARY_(cos, COS)
LF_UNARY_(tan, TAN) LF_UNARY_(asin, ASIN) LF_UNARY_(acos, ACOS) LF_UNARY_(atan, ATAN)
LF_UNARY_(sinh, SINH) LF_UNARY_(cosh, COSH) LF_UNARY_(tanh, TANH)
LF_UNARY_(asinh, ASINH) LF_UNARY_(acosh, ACOSH) LF_UNARY_(atanh, ATANH) LF_BINARY_(fmod, FMOD)
LF_UNARY_(sigmoid, SIGMOID) LF_UNARY_(erf, ERF) LF_UNARY_(isnan, ISNAN) LF_UNARY_(isinf, ISINF)
LF_UNARY_(signbit, SIGNBIT)
#undef LF_UNARY_
#undef LF_BINARY_
static inline lf_node *lf_fma(lf_graph *g, lf_node *a, lf_node *b, lf_node *c) {
    return lf_apply(g, LF_OP_FMA, a, b, c);
}

/* ---- reductions ------------------------------------------------------------ */

typedef enum lf_reduce_op {
#define LF_RED(ID, text, identity) LF_RED_##ID,
#include "lazyfuse_ops.def"
    LF_NREDS
} lf_reduce_op;

/* Reduces x over naxes axes (negative counts from the end; no repeats), or
 * over all axes when naxes is 0 and axes is NULL (naxes > 0 with a NULL axes
 * array is LF_ERR_NULL, naxes < 0 LF_ERR_AXIS). keepdims keeps reduced axes as extent 1.
 * A sum or product over at most 8 elements per output that is not an
 * output is computed inline by its consumers (no kernel, nothing stored),
 * with the same result bits (a contraction, above: its fma chain, unless its
 * product is an output too).
 * Empty reductions: sum 0, prod 1, mean NaN; min, max, argmin and argmax of
 * an empty set fail with LF_ERR_SHAPE. min/max propagate NaN; argmin/argmax
 * give the first extreme (the first NaN if any), as an index into the reduced
 * axes flattened in row-major order. */
LF_API lf_node *lf_reduce(lf_graph *g, lf_reduce_op op, lf_node *x, int naxes, const int *axes,
                          bool keepdims);
LF_API const char *lf_reduce_op_name(lf_reduce_op op);
/* Prefix combine of x along one axis (negative counts from the end), every
 * other axis batched: element i of a row is op over elements 0..i
 * (inclusive) or 0..i-1 (exclusive; element 0 is the op's identity: sum 0,
 * prod 1, min +inf or the dtype's largest value (true for bool), max -inf or
 * the smallest (false)). Ops LF_RED_SUM, PROD, MIN, MAX (others are
 * LF_ERR_INVALID "scan: op argmax is not supported (sum, prod, min, max)");
 * a bad axis is LF_ERR_AXIS. Dtypes as lf_reduce: sum and prod of bool and
 * integers give i64 (wrapping), floats keep their dtype; min and max keep the
 * dtype and propagate NaN. Zero-size and size-1 axes are valid.
 * Order (every backend and the reference evaluator, so results are
 * bit-identical and independent of threads and timing): a row is cut into
 * blocks of LF_SCAN_BLOCK elements. Values accumulate as lf_reduce's do
 * (double for floats, wrapping int64 for integers) and each result is the
 * accumulator rounded to the node's dtype. T[b] is block b folded in order
 * from the identity; the block offsets are O[0] = identity, O[b+1] = O[b]
 * folded with T[b], in block order; within block b the running value starts
 * at O[b] and folds the block's elements in order. A row of at most
 * LF_SCAN_BLOCK elements is therefore the plain sequential scan; integer,
 * min and max scans equal it at any length. */
#define LF_SCAN_BLOCK 4096
LF_API lf_node *lf_scan(lf_graph *g, lf_reduce_op op, lf_node *x, int axis, bool exclusive);
/* lf_scan with an accumulator dtype t, NumPy's cumsum(x, dtype=t) and
 * cumprod(x, dtype=t): x is cast to t first (as lf_cast), then scanned, and
 * the result has dtype t (a cumulative sum of i32 values in i64 is
 * lf_scan_dtype(g, LF_RED_SUM, x, 0, false, LF_I64)). Integer sums and
 * products wrap in t (two's complement, as NumPy); a bool sum is a running
 * logical or and a bool product a running and (NumPy's add and multiply on
 * bool); floats accumulate as lf_scan's do (in double, each result rounded
 * to t). Errors as lf_scan, plus an unknown t (LF_ERR_INVALID, "scan:
 * unknown accumulator dtype 9"). Fusion as lf_scan: the cast of x is a
 * producer inlined into the scan's kernel. */
LF_API lf_node *lf_scan_dtype(lf_graph *g, lf_reduce_op op, lf_node *x, int axis, bool exclusive, lf_dtype t);

/* ---- sort, argsort and top-k (k-select) --------------------------------- */

/* Order. Every dtype sorts by one total order, NumPy's: ascending is the
 * numeric order with NaN last (every NaN, whatever its sign or payload, is
 * equal to every other NaN and larger than +inf); descending is its exact
 * reverse, so NaN comes first. -0.0 and +0.0 compare equal; bool sorts
 * false < true. Sorts are stable: elements that compare equal keep the order
 * of their positions along the axis (in descending order too), so -0.0 and
 * +0.0, or two NaNs, come out in the order they went in. Values keep their
 * bits: a sorted value is the element's own (a -0.0 stays -0.0, a NaN keeps
 * its payload).
 * The axis may be negative (counting from the end); every other axis is
 * batched: each row along the axis is sorted on its own. A bad axis is
 * LF_ERR_AXIS ("sort: axis 3 out of range for 2 dimensions"); a 0-d x is
 * LF_ERR_AXIS too. Zero-size axes and rows of one element are valid.
 * Fusion: the map that produces the keys is computed in the sort's first
 * pass (its values are never stored apart), and a gather of a payload by
 * argsort's indices (lf_gather(v, axis, lf_argsort(k, axis, ..))) reads the
 * payload in its consumer. */

/* The values of x sorted along axis (x's dtype and shape). */
LF_API lf_node *lf_sort(lf_graph *g, lf_node *x, int axis, bool descending);
/* The stable sorting permutation of x along axis: i64 positions along the
 * axis, x's shape, such that lf_gather(x, axis, lf_argsort(x, axis, d))
 * equals lf_sort(x, axis, d). */
LF_API lf_node *lf_argsort(lf_graph *g, lf_node *x, int axis, bool descending);
/* Top-k: the k largest (largest true) or smallest elements of x along
 * axis, in order (largest first, or smallest first), every other axis
 * batched. lf_topk gives their values (x's dtype), lf_argtopk their
 * positions along the axis (i64); both have x's shape with extent k on the
 * axis. They are the first k entries of lf_sort / lf_argsort (descending =
 * largest), so ties keep the lower index first and NaN counts as the
 * largest value. An lf_topk and an lf_argtopk of the same x, k, axis and
 * largest that one lf_eval needs (as outputs or through their consumers)
 * are one selection: one pass over x and one sort kernel give both, as
 * lf_sort and lf_argsort of one key do.
 * Errors (NULL returned, sticky as every builder's; "argtopk" in its own):
 *   LF_ERR_SHAPE  "topk: k = 7 out of range 0..5 for axis 1 of x [3,5]"
 *   LF_ERR_AXIS   "topk: axis 2 out of range for 2 dimensions"
 * Small k (LF_TOPK_SELECT or less, and at most a quarter of the extent)
 * is a selection that keeps the k best candidates, never a full sort of the
 * row, on rows of more than 32 elements (the CPU reads a row twice in
 * cache: its lane minima bound the k best first, for k <= 16 with AVX-512;
 * a row whose order makes candidates enter again and again, such as rising
 * keys for largest, may be sorted instead; the result is the same).
 * How sorts run. CPU: the keys of a cache-sized group of rows are computed
 * (the key's map fused) into a thread's own memory and selected or
 * radix-sorted there, groups in parallel; fewer long rows than threads are
 * radix-sorted across the threads; work memory is kept by the context
 * between evals. CUDA: see "CUDA backend" above.
 * (lf_topk used to return both through out-pointers: issue 26.) */
#define LF_TOPK_SELECT 64
LF_API lf_node *lf_topk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest);
LF_API lf_node *lf_argtopk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest);

LF_API const char *lf_op_name(lf_op op); /* the op's text in expression strings */

/* ---- evaluation -------------------------------------------------------------- */

/* Evaluates n output nodes of g into n buffers of matching dtype and shape.
 * On failure no output buffer is changed. An output buffer may also be an
 * input of the graph (x = x*0.5 + 1 evaluated into x's buffer). It is then
 * written in place, with no copy and no extra memory, when every read of
 * that input by the eval is at the element being written (elementwise
 * arithmetic on it, or a row operation such as softmax over rows of it, with
 * no view that moves elements: no slice, flip, transpose or broadcast of it)
 * and the eval has no gather (whose index check could fail after the write);
 * otherwise the output is computed into temporary memory and copied at the
 * end. Results are the same either way; lf_eval_stats' outputs_in_place and
 * bytes_staged say which happened. Each output needs a buffer of its own: one
 * buffer given for two outputs is LF_ERR_INVALID ("eval: outputs 0 and 2 have
 * the same buffer ..."), even when the two outputs are the same node. */
LF_API lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);
/* A new buffer shaped like node n, for its result. */
LF_API lf_buffer *lf_buffer_new_like(lf_ctx *ctx, const lf_node *n);

/* ---- fusion control and statistics ------------------------------------------ */

/* Marks n as a fusion barrier: when an eval needs n, its value gets a buffer
 * of its own (written once, read by every consumer) instead of being fused
 * into, or recomputed inside, the kernels that use it. Applies to every later
 * lf_eval of g, with fusion on or off; an input node is a buffer already. */
LF_API lf_status lf_node_materialize(lf_graph *g, lf_node *n);

/* What the last lf_eval on a context did (backends that run a fused schedule).
 * A kernel is one pass over an iteration space; an intermediate is a value
 * the schedule stores in a temporary buffer that is neither an input nor an
 * output of the eval. */
typedef struct lf_eval_stats {
    int kernels;               /* kernels in the schedule that ran */
    size_t bytes_read;         /* sum over kernels, over each distinct buffer a
                                  kernel loads from (inputs and intermediates), of
                                  min(that buffer's bytes, iterations of the loop
                                  that loads it x element size): compulsory traffic */
    size_t bytes_written;      /* sum over kernels of the bytes of every buffer a
                                  kernel stores (outputs and intermediates), each
                                  written in full once */
    size_t temp_bytes_avoided; /* bytes of intermediates unfused execution stores
                                  (every needed node except inputs, views,
                                  constants and outputs, plus marked nodes) minus
                                  bytes_materialized */
    size_t bytes_materialized; /* bytes of the intermediates this schedule stores
                                  (before liveness lets some share memory) */
    double plan_seconds;       /* wall-clock time spent planning the schedule */
    /* compiled backends (zero on the interpreter): */
    int kernels_compiled;      /* kernels this eval compiled (disk and memory misses) */
    int kernels_disk_hits;     /* kernels loaded from the on-disk cache */
    int kernels_memory_hits;   /* kernels found in the context's in-memory cache */
    int compiler_runs;         /* C compiler runs this eval started (CPU backend):
                                  a program's misses are compiled together, one
                                  run per unit of several kernels, up to one unit
                                  per pool thread, run at once; 0 on CUDA */
    bool program_reused;       /* the graph's planned, compiled program was reused
                                  (no planning, no codegen, no lookup) */
    double compile_seconds;    /* wall-clock time in codegen, compile and load */
    int outputs_in_place;      /* outputs written straight into a buffer the eval
                                  also reads (x = x*0.5 + 1 into x): each element
                                  is read only where it is written, so no copy */
    size_t bytes_staged;       /* bytes copied into output buffers after the
                                  kernels ran: outputs whose buffer the eval reads
                                  otherwise (x = x[::-1] into x), or that a
                                  gather's index check runs before */
    /* New fields go here, at the end, and nowhere else. */
} lf_eval_stats;

/* The smallest size lf_ctx_last_stats_sized accepts: the end of the last
 * field of lazyfuse 1.0's lf_eval_stats. */
#define LF_EVAL_STATS_SIZE_1_0 (offsetof(lf_eval_stats, bytes_staged) + sizeof(size_t))

/* Copies the statistics of the last lf_eval on ctx into the first size bytes
 * of *out, size being the caller's sizeof *out (the struct grows: fields are
 * only appended): the fields of this library that fit, zeros after them,
 * nothing past out + size. The statistics are all
 * zero before the first eval, after a failed eval, and after an eval on
 * LF_BACKEND_REFERENCE (which runs no schedule). With LF_DEBUG=fusion in the
 * environment (a comma-separated list), each eval also prints them to stderr.
 * LF_ERR_NULL for a NULL ctx or out, LF_ERR_INVALID for a size below
 * LF_EVAL_STATS_SIZE_1_0 (sizeof of a pointer, say); nothing written then.
 * C and C++ call lf_ctx_last_stats, which passes sizeof *out; a binding that
 * loads the library by name calls this with the size of its own struct. */
LF_API lf_status lf_ctx_last_stats_sized(const lf_ctx *ctx, lf_eval_stats *out, size_t size);
/* lf_ctx_last_stats_sized(ctx, out, sizeof *out): an inline function, so the
 * size is that of the caller's lf_eval_stats. */
static inline lf_status lf_ctx_last_stats(const lf_ctx *ctx, lf_eval_stats *out) {
    return lf_ctx_last_stats_sized(ctx, out, sizeof *out);
}

/* ---- graph visualizer ---------------------------------------------------------- */

typedef enum lf_dot_mode {
    LF_DOT_GRAPH, /* the graph: nodes labelled with op, dtype and shape, edges to inputs */
    LF_DOT_FUSED  /* the plan: each kernel a cluster labelled with its number, kind and
                     bytes in and out; materialized buffers drawn as cylinders */
} lf_dot_mode;

/* Writes Graphviz DOT of what evaluating outs[0..n) involves (n == 0 in
 * LF_DOT_GRAPH mode draws every node). LF_DOT_FUSED plans the outputs as
 * lf_eval would on this context (fusion on or off) without running anything. */
LF_API lf_status lf_dump_dot(lf_graph *g, int n, lf_node *const *outs, lf_dot_mode mode,
                             FILE *out);

/* ---- test hooks -------------------------------------------------------------- */

/* Makes the nth allocation from now (1-based) made by lazyfuse fail, and every
 * one after it while sticky is true; 0 turns failures off. Process-wide. */
LF_API void lf_debug_fail_alloc(int64_t nth, bool sticky);
/* Bytes lazyfuse currently holds from the allocator (process-wide). */
LF_API size_t lf_debug_live_bytes(void);

#ifdef __cplusplus
}
#endif
#endif /* LAZYFUSE_H */
