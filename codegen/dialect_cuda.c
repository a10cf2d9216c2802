/* codegen/dialect_cuda.c: the CUDA dialect of the emitter (CUDA backend).
 *
 * Supplies what the emitter needs for CUDA C++ compiled by NVRTC: a prelude
 * without any #include (NVRTC has no system headers), defining the fixed-
 * width integer types, the limits and INT64_C, NAN and INFINITY as bit
 * patterns, the qualifiers the shared helpers (cg_prelude_helpers) are
 * written with, and lf_v4, the 4-element aligned vector the elementwise
 * `vec` kernels load and store through (16 bytes for f32).
 *
 * What must stay true: the helpers compute what graph/scalar.c computes,
 * exactly as in the C dialect; the backend compiles with -fmad=false and no
 * fast-math, so f32 arithmetic is rounded after every operation and
 * NaN/Inf follow IEEE 754. The device math library's functions (sinf, expf,
 * erff, ...) are then the only difference from the reference evaluator
 * outside reductions; their documented accuracy is stated in lazyfuse.h.
 */
#include "codegen/codegen.h"
#include "graph/complex.h"

#define CUDA_STRINGIZE_(...) #__VA_ARGS__
#define CUDA_STRINGIZE(...) CUDA_STRINGIZE_(__VA_ARGS__)

#define PRELUDE_CUDA                                                                        \
    "/* lazyfuse generated kernel (CUDA dialect, NVRTC). */\n"                              \
    "typedef unsigned char uint8_t;\n"                                                      \
    "typedef signed char int8_t;\n"                                                        \
    "typedef short int16_t;\n"                                                              \
    "typedef unsigned short uint16_t;\n"                                                    \
    "typedef int int32_t;\n"                                                                \
    "typedef unsigned int uint32_t;\n"                                                      \
    "typedef long long int64_t;\n"                                                          \
    "typedef unsigned long long uint64_t;\n"                                                \
    "#define INT32_MAX 2147483647\n"                                                        \
    "#define INT32_MIN (-INT32_MAX - 1)\n"                                                  \
    "#define INT64_MAX 9223372036854775807LL\n"                                             \
    "#define INT64_MIN (-INT64_MAX - 1LL)\n"                                                \
    "#define INT64_C(x) x##LL\n"                                                            \
    "#define NAN __int_as_float(0x7fc00000)\n"                                              \
    "#define INFINITY __int_as_float(0x7f800000)\n"                                         \
    "#define LF_INLINE __device__ __forceinline__\n"                                     \
    "#define LF_FUNC __device__ inline\n"                                                           \
    "/* CUDA's math functions for graph/complex.h */\n"                                   \
    CUDA_STRINGIZE(GRAPH_COMPLEX_LIBM) "\n"                                                     \
    "template <typename T> struct alignas(4 * sizeof(T)) lf_v4 { T x[4]; };\n"

static const cg_dialect cuda_dialect = {
    .name = "cuda",
    .prelude = PRELUDE_CUDA,
    .type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, c_value, cuda_type, ...) [LF_##ID] = cuda_type,
#include "graph/dtypes.def"
    },
    .value_type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, c_value, cuda_type, cuda_value, ...) \
    [LF_##ID] = cuda_value,
#include "graph/dtypes.def"
    },
    .entry = "extern \"C\" __global__",
    .restrict_kw = "__restrict__",
    .value_attr = "[[maybe_unused]] ",
    .vector_math = false,
    .host_code = false,
    .shift_loads = false,
    .kernel_head = cg_cuda_kernel_head,
    .skeleton = cg_cuda_skeletons,
    .sort_store = cg_cuda_sort_store,
};

const cg_dialect *cg_dialect_cuda(void) { return &cuda_dialect; }
