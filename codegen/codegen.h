/* codegen/codegen.h: internal interface of the codegen stage.
 *
 * Codegen turns one scheduled kernel (fusion/fusion.h) into source text. It
 * works in two steps, both here:
 *
 *  1. layout (layout.c): every memory access of the kernel (each fn's loads
 *     and the stores) becomes an affine access over one loop nest. The loop
 *     axes are the kernel's iteration-space axes, reordered for the strategy
 *     (kept axes first; reduced axes next; for an "outer" reduction the last
 *     kept axis innermost), extent-1 axes dropped, and adjacent axes merged
 *     where every access allows it. The layout also fixes the kernel's
 *     runtime parameter vector P: extents, offsets and strides are passed at
 *     run time, so one compiled kernel serves every size with the same
 *     structure; what the source bakes in is only structure (rank, dtypes,
 *     which accesses are contiguous or invariant in the innermost loop, the
 *     fns and their literals). The values of constant nodes are parameters
 *     too (param_scalar), so a new lf_const value is the same source.
 *  2. emission (kernel.c picks the dialect's skeleton: emit_c.c, emit_cuda.c;
 *     both print through the shared walker of emit.c, see emit.h): the loop
 *     skeleton of the strategy and the fns' expressions inside; a dialect
 *     (dialect_c.c, dialect_cuda.c) supplies the language's strings: the
 *     prelude of helper functions, type names, math function names and the
 *     kernel qualifiers.
 *
 * What must stay true:
 *  - the source depends only on the kernel's structure, never on node
 *    pointers, buffer addresses or sizes (node ids appear only inside
 *    comments, which cg_strip_comments removes), so rebuilding the same graph gives
 *    the same text and hits the kernel cache;
 *  - cg_fill_params writes exactly the P layout that the emitted source reads
 *    (both follow cg_layout's param_* indices);
 *  - results are those of the reference evaluator: exact for every operator
 *    except the transcendental math functions (the dialect's accuracy,
 *    stated in lazyfuse.h) and the summation order of float reductions
 *    (fixed lanes and blocks: it depends on the shape, never on the thread
 *    count).
 */
#ifndef LF_CODEGEN_H
#define LF_CODEGEN_H

#include "fusion/fusion.h"

/* ==== layout.c: loop nest and accesses =================================== */

typedef enum cg_strategy {
    CG_ELEMENTWISE,  /* one loop nest over the space; work = flat elements */
    CG_REDUCE_FULL,  /* every axis reduced: blocks of the outermost axis give
                        partial results, combined in block order */
    CG_REDUCE_INNER, /* innermost axis reduced: work = output elements, each
                        folds its reduced positions with CG_LANES lanes */
    CG_REDUCE_OUTER, /* innermost axis kept: work = (outer output, block of
                        CG_OUTER_BLOCK innermost outputs); the innermost loop
                        runs over outputs, accumulators are arrays */
    CG_SCAN          /* a scan kernel (FUSE_KERNEL_SCAN): kept axes, then the
                        scanned axis innermost; work = rows (out_numel),
                        count = the row length; the epilogue and the stores
                        run at every position of the row */
} cg_strategy;

enum {
    CG_LANES = 16,          /* independent accumulators of an inner reduction */
    CG_OUTER_BLOCK = 256,   /* innermost outputs per work item (outer reductions) */
    CG_FULL_BLOCK = 16384,  /* reduced positions per partial (full reductions) */
    CG_KEEP_BYTES = 65536,  /* row buffer of one row keep (fuse_keep) in the C
                               dialect: rows up to this many bytes of the kept
                               value use it, longer ones compute it again */
    CG_STREAM_TILE = 256,   /* elements of a streaming elementwise kernel's
                               tile: computed into a stack buffer per store,
                               then written with non-temporal stores */
    CG_SMALL_STRIDE = 16,   /* an innermost-loop stride of at most this (in
                               elements, either sign) is printed as a literal
                               (part of the kernel's structure) so the compiler
                               can vectorize the strided load; larger ones are
                               run-time parameters */
    /* every fn's loads (GRAPH_MAX_PARAMS each: passes, epilogue, row pass)
       and the stores */
    CG_MAX_ACCESSES = GRAPH_MAX_PARAMS * (FUSE_MAX_PASSES + 2) + FUSE_MAX_STORES,
    /* distinct slots: LF_MAX_ARGS buffers a fn (fusion.h), the stores, and
       the index-error flag and a scatter's partials */
    CG_MAX_BUFS = LF_MAX_ARGS * (FUSE_MAX_PASSES + 2) + FUSE_MAX_STORES + 2
};

/* Where an access's innermost-loop stride puts it. */
typedef enum cg_inner {
    CG_INNER_INVARIANT,  /* stride 0: loaded once per innermost loop */
    CG_INNER_CONTIGUOUS, /* stride 1 */
    CG_INNER_STRIDED     /* any other stride (a runtime parameter) */
} cg_inner;

/* One load or store, affine over the loop nest. */
typedef struct cg_access {
    int fn;                        /* loads: fn index (fuse_kernel_fn_loads); stores: -1 */
    int index;                     /* load index in that fn, or store index */
    const fuse_load *load;         /* the load (NULL for stores) */
    int buf;                       /* kernel buffer (B[buf]); -1 for an iota */
    lf_dtype dtype;                /* element type */
    int64_t offset;                /* element offset at loop index 0 */
    int64_t strides[LF_MAX_DIMS];  /* per loop axis, in elements */
    cg_inner inner;                /* class of the innermost loop axis */
    int param_offset;              /* P index of offset; strides follow (one
                                      per loop axis) */
    int param_steps;               /* P index of the extra map steps, or -1 */
    int param_split;               /* P index of a split remapped read, or -1:
                                      the map is step 0 then one remapped step
                                      (lf_pad, lf_concat), the innermost loop
                                      axis moves one axis of the view (split_axis)
                                      by split_k per element and no other, for
                                      every row (cg_layout checks it); the C
                                      elementwise loop then reads it as a plain
                                      shifted load inside the row's interior
                                      and clamps or reflects only at the border
                                      (lf_remap_row). P holds split_axis,
                                      split_k, the interior's element stride */
    int split_axis;                /* param_split: the view axis moved */
    int64_t split_k;               /* param_split: its coordinate step per element */
    bool split_contiguous;         /* param_split: interior stride is 1 */
    int param_iota;                /* iota: P index of start, step (int64 when
                                      iota_exact, else double bits); random:
                                      P index of the seed (uint64 bits); or -1 */
    bool iota_exact;               /* iota computed in wrapping int64 */
    bool iota_unit;                /* iota_exact with step 1 (structure, as a
                                      stride of 1 is): start + index, no
                                      multiply (a 64-bit multiply is not a
                                      vector instruction before AVX-512) */
    int param_gather;              /* FUSE_SRC_GATHER: P index of x's extent and
                                      stride on the gathered axis (the access is
                                      x's base, always CG_INNER_STRIDED); -1 */
} cg_access;

/* The most distinct library functions (lf_fn_from_library) one kernel
 * calls; a kernel calling more prints an #error (it does not compile). */
enum { CG_MAX_UFN = 16 };
typedef struct cg_layout {
    const fuse_kernel *kernel;     /* the kernel laid out */
    cg_strategy strategy;
    int ndim;                      /* loop axes, outermost first */
    int64_t extent[LF_MAX_DIMS];   /* their extents */
    int nkept;                     /* axes [0, nkept) are kept (output) axes;
                                      OUTER: plus the last axis */
    int nred;                      /* reduced axes after them (0 elementwise) */
    int64_t count;                 /* reduced positions per output element */
    int64_t out_numel;             /* output elements (1 elementwise) */
    int64_t work;                  /* work items the kernel's range splits:
                                      elements, outputs, (outer, block) pairs,
                                      or blocks of a full reduction */
    int64_t full_block;            /* FULL: outermost-axis positions per block */
    int naccess;                   /* accesses: loads by fn, then stores (in
                                      access[], the last member) */
    int nbufs;                     /* distinct slots the kernel touches */
    int buf_slot[CG_MAX_BUFS];     /* schedule slot of each buffer */
    bool buf_written[CG_MAX_BUFS]; /* stored by this kernel */
    int nparams;                   /* length of P */
    int param_extent;              /* P index of extent[0] (others follow) */
    int param_count;               /* P index of count */
    int param_full_block;          /* P index of full_block */
    int param_scalar;              /* P index of the kernel's scalars (values of
                                      kernel->scalars, cg_fill_scalars) */
    int param_ufn;                 /* P index of the addresses of the library
                                      functions the kernel calls (ufn[], one
                                      each; lf_fn_from_library) */
    int nufn;                      /* 0..CG_MAX_UFN */
    const graph_ufn *ufn[CG_MAX_UFN];
    int err_buf;                   /* kernels with gather loads: the buffer (its
                                      buf_slot is -1) of the int32 index-error
                                      flag, which the kernel sets to 1 when an
                                      index is out of range; -1 otherwise */
    /* scatter kernels (kernel->scatter): strategy ELEMENTWISE over the
       positions, but work = blocks (lf_k_run folds block b into partials
       part_buf[b * DN ..]) and lf_k_row combines dst with the partials over
       the DN destination elements (begin, end: element range; R unused) */
    int part_buf;                  /* buffer of the partials (cg_partial, buf_slot
                                      -2; part_entries of them), -1 */
    int64_t part_entries;          /* nblocks * DN */
    int param_scatter;             /* P index of block, positions, DN, nblocks */
    int param_stream;              /* ELEMENTWISE with a contiguous store: P
                                      index of the streaming switch (the C
                                      dialect's stores go through tiles and
                                      non-temporal stores when it is non-zero;
                                      cg_fill_params writes 0, the CPU backend
                                      sets it from cg_stream_bytes); -1 */
    int dst_buf;                   /* dst's buffer (dense), -1: a constant */
    /* contraction kernels printed as a packed GEMM (cg_contract_layout):
       the loop axes of M (y does not move along it), N (x does not), K
       (reduced); work = batch x blocks of M x blocks of N. -1: not one */
    int gemm_m, gemm_n, gemm_k;
    cg_access access[];            /* naccess of them (at most CG_MAX_ACCESSES:
                                      64 loads in each of 10 fns and 16 stores,
                                      about 80 KB; cg_layout_new sizes a
                                      layout to what it uses) */
} cg_layout;

/* Whether a reduction of kn is a contraction (emit_contract.c): its fold is
 * one chain per output element, so a full reduction is one block, one
 * thread on CUDA. */
bool cg_kernel_contracts(const fuse_kernel *kn);
/* Sets lay->gemm_* (and work) when lay's kernel is printed as a packed GEMM
 * on the CPU (emit_contract.c); gemm_m = -1 otherwise. */
void cg_contract_layout(cg_layout *lay);
/* Lays out kernel k of s: a graph_malloc'd layout with room for exactly its
 * accesses (free with graph_free), or NULL when out of memory. */
cg_layout *cg_layout_new(const fuse_schedule *s, int k);
/* The bytes an ELEMENTWISE kernel moves in one run: each contiguous or
 * strided access's elements times its dtype's size (loads invariant in the
 * inner loop count nothing). The CPU backend streams the stores of kernels
 * that move more than its last-level cache holds (lazyfuse.h, "CPU backend"). */
int64_t cg_stream_bytes(const cg_layout *lay);
/* Whether access a is a store that a streaming run writes through a tile
 * (ELEMENTWISE, not a scatter or sort, a buffer stored at unit stride). */
bool cg_access_streams(const cg_layout *lay, const cg_access *a);
/* Writes P (lay->nparams int64 values) for the layout, scalars included. */
void cg_fill_params(const cg_layout *lay, int64_t *P);
/* Writes only the scalars' entries of P: the current values of the kernel's
 * constant nodes (float dtypes as the bits of a double, others as int64).
 * A backend calls it before each run, so lf_scalar_set reaches a cached
 * program; the source reads them (cg_scalar_value) and never bakes them in. */
void cg_fill_scalars(const cg_layout *lay, int64_t *P);
/* The access of fn f's load j (loads come first in access[]). */
const cg_access *cg_load_access(const cg_layout *lay, int f, int j);

/* P index of library function u's address in lay, or -1 (none left). */
int cg_ufn_param(const cg_layout *lay, const graph_ufn *u);

/* ==== dialect ============================================================ */

struct cg_emitter;
struct cg_text;

/* A skeleton: prints the loops of one kernel kind (fuse_kernel_kind) in one
 * dialect, calling emit.c's walker for everything inside them. */
typedef void cg_skeleton(struct cg_emitter *e);

typedef struct cg_dialect {
    const char *name;              /* "c" */
    const char *prelude;           /* helper functions every kernel includes */
    const char *type[LF_NDTYPES];  /* storage type per dtype */
    const char *value_type[LF_NDTYPES]; /* type of expression values */
    const char *entry;             /* qualifier of exported kernel functions */
    const char *restrict_kw;       /* "restrict" (C) or "__restrict__" (CUDA) */
    const char *value_attr;        /* before expression values: "" (C) or
                                      "[[maybe_unused]] " (CUDA: a value only an
                                      unused output needs would warn) */
    bool vector_math;              /* math calls go to a vector library */
    bool host_code;                /* kernels run on the host: user functions'
                                      C bodies, and library functions called
                                      through a pointer (lf_fn_from_library);
                                      else their CUDA bodies, and a library
                                      function is an #error */
    bool shift_loads;              /* loads of one buffer at constant offsets
                                      from an earlier load read through its
                                      pointer (emit.c's shift_base: C keeps a
                                      stencil's taps in registers) */
    /* hooks (codegen/kernel.c calls them in this order; NULL: nothing) */
    void (*kernel_defs)(struct cg_text *out, const fuse_kernel *kn); /* after the
                                      prelude and the shared helpers */
    void (*kernel_head)(struct cg_emitter *e); /* after the kernel's comment */
    cg_skeleton *const *skeleton;  /* the skeleton of each kernel kind,
                                      FUSE_KERNEL_NKINDS entries */
    /* a sort kernel's store 0 at position idx: key is the value x (dtype
       from) as its unsigned sort key, order flip included (emit.c) */
    void (*sort_store)(struct cg_emitter *e, const char *idx, const char *key, const char *x, lf_dtype from);
} cg_dialect;

/* Helper functions carrying graph/scalar.c's semantics, printed after every
 * dialect's prelude (which defines the integer types, NAN, INFINITY, lf_idx,
 * LF_INLINE and LF_FUNC). */
extern const char cg_prelude_helpers[];

/* The C dialect; vector_math says whether libmvec is used (declared simd). */
const cg_dialect *cg_dialect_c(bool vector_math);

/* The C source of lf_random_normal, which C kernels only declare (the C
 * dialect's prelude defines LF_RANDOM_NORMAL_EXTERN; the CUDA dialect's
 * kernels keep the definition): compiled with -c and the kernels' flags
 * once per disk cache, and linked into every C kernel whose text calls it
 * (CG_C_RANDOM_NORMAL_CALL after the prelude). */
extern const char cg_c_random_object[];
#define CG_C_RANDOM_NORMAL_CALL "lf_random_normal("

/* ==== emit.c, kernel.c: source text ===================================== */

/* A growing string (graph_malloc'd). */
typedef struct cg_text {
    char *s;
    size_t len, cap;
    bool nomem;                    /* an append failed: s is incomplete */
} cg_text;

void cg_text_free(cg_text *t);
void cg_printf(cg_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The definitions of the vector math functions kernel kn calls (lf_exp,
 * lf_sinf, ...: every vector width through one libmvec variant, so that an
 * element's result does not depend on its position; dialect_c.c), each
 * guarded so that a unit of several kernels defines it once. Printed after
 * the C vector dialect's prelude and the shared helpers. */
void cg_c_vmath_defs(cg_text *out, const fuse_kernel *kn);
/* The definitions of the user functions (lf_fn_c) kernel kn calls, each
 * guarded (#ifndef LF_UFN_<name>) so that a unit of several kernels defines
 * it once, the body under "#line 1 \"<name>\"" (a compiler's message counts
 * the user's lines) and the generated text's numbering restored after it.
 * Printed after the prelude; the body is the dialect's (c_body or
 * cuda_body), the head "LF_FUNC <ret> name(<type> <param>, ...)" in the
 * dialect's value types. A library function (lf_fn_from_library) has no
 * definition: the C kernels call it through its address in P (param_ufn);
 * for CUDA an #error says that it cannot be called there. */
void cg_emit_ufn_defs(cg_text *out, const cg_layout *lay, const cg_dialect *d);
/* The head (without body) of u with these value type names and qualifier,
 * and the body in braces under its #line: the pieces of the definitions
 * above, which backends/cpu/hostfn.c also prints for the host function. */
void cg_emit_ufn_head(cg_text *out, const graph_ufn *u, const char *const *value_type, const char *qual);
void cg_emit_ufn_body(cg_text *out, const graph_ufn *u, const char *body);

/* Each dialect's skeletons and hooks (emit_c.c, emit_cuda.c), which the
 * dialects' tables (dialect_c.c, dialect_cuda.c) point to. */
extern cg_skeleton *const cg_c_skeletons[FUSE_KERNEL_NKINDS];
extern cg_skeleton *const cg_cuda_skeletons[FUSE_KERNEL_NKINDS];
void cg_c_sort_store(struct cg_emitter *e, const char *idx, const char *key, const char *x, lf_dtype from);
void cg_cuda_sort_store(struct cg_emitter *e, const char *idx, const char *key, const char *x, lf_dtype from);
void cg_cuda_kernel_head(struct cg_emitter *e); /* the kernels' argument struct */

/* Names of the generated functions of a kernel (kernel prefix "lf_k"):
 *   ELEMENTWISE, INNER, OUTER: void lf_k_run(B, P, begin, end)
 *   FULL: void lf_k_pass<q>(B, P, R, begin, end, part) per pass q,
 *         void lf_k_fin<q>(P, R, part, nblocks),
 *         void lf_k_epi(B, P, R), void lf_k_row(B, P, R, begin, end) if a row pass
 *   scatter kernels (kernel->scatter): lf_k_run(B, P, begin, end) over blocks
 *         of positions, then lf_k_row(B, P, R, begin, end) over dst's elements
 * with B the buffers, P the parameters, R the finished reduction values
 * (cg_value, one per reduction), part the partials (cg_partial, one per
 * reduction of the pass per block). */
typedef union cg_value {
    double f;
    int64_t i;
} cg_value;
typedef struct cg_partial {
    cg_value v;
    int64_t arg;
} cg_partial;

/* Scan kernels (CG_SCAN) print lf_k_run (rows [begin, end), each in one
 * pass) and, for a single long row split over threads, three functions over
 * the row's LF_SCAN_BLOCK blocks: lf_k_pass0(B, P, R, begin, end, part)
 * writes each block's total (folded from the identity) into part[blk].v,
 * lf_k_fin0(P, R, part, nblocks) turns the totals into the blocks' offsets in
 * block order (in place), starting from the carry R[0] when R[1].i is 1
 * (else, or R NULL, from the identity) and leaving the fold of them all in
 * R[0] (R not NULL), so that consecutive groups of blocks chain; and
 * lf_k_scan(B, P, R, begin, end, part), a
 * cg_pass_fn, scans each block from its offset and runs the epilogue and the
 * stores. Both ways give the order of lazyfuse.h. */
int64_t cg_scan_blocks(const cg_layout *lay);

/* Reductions folded in pass q of kn: a FULL kernel's partials hold that many
 * entries per block, in reduction order. */
int cg_pass_reductions(const fuse_kernel *kn, int q);

typedef void (*cg_run_fn)(void *const *B, const int64_t *P, int64_t begin, int64_t end);
/* A sort kernel's lf_k_run: keys into the work array; returns whether a value
 * of the range is one its key does not give back (emit_c.c, emit_sort). */
typedef int (*cg_sort_fn)(void *const *B, const int64_t *P, int64_t begin, int64_t end);
typedef void (*cg_pass_fn)(void *const *B, const int64_t *P, cg_value *R, int64_t begin,
                           int64_t end, cg_partial *part);
typedef void (*cg_fin_fn)(const int64_t *P, cg_value *R, cg_partial *part, int64_t nblocks); /* scans write part */
typedef void (*cg_epi_fn)(void *const *B, const int64_t *P, cg_value *R);
typedef void (*cg_row_fn)(void *const *B, const int64_t *P, cg_value *R, int64_t begin,
                          int64_t end);

/* Appends the whole translation unit for the layout (prelude, then the
 * kernel's functions) to out. Node ids go in comments only. */
void cg_emit_kernel(const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d,
                    cg_text *out);
/* text without its comments (graph_malloc'd; NULL when out of memory): the
 * kernel's structure, since node ids appear only in comments. */
char *cg_strip_comments(const char *text);
/* 64-bit FNV-1a hash of text (the structural key when given the stripped
 * source). */
uint64_t cg_source_hash(const char *text);

/* ==== emit_cuda.c: the CUDA kernels and their launches ==================
 *
 * The CUDA dialect (cg_dialect_cuda) prints one translation unit per kernel
 * for NVRTC: no #include, every entry point `extern "C" __global__` taking
 * ONE parameter by value, `lf_args`, a run of 8-byte words:
 *
 *     words[0 .. NB)            B: device address of each kernel buffer
 *                                  (NB = max(lay->nbufs, 1))
 *     words[NB]                 R: scratch + scratch_R
 *     words[NB + 1]             part: scratch + scratch_part
 *     words[NB + 2]             ticket: scratch + scratch_ticket
 *     words[NB + 3 .. nwords)   P: the layout's parameters (int64)
 *
 * The host compiles the source with every entry (emit_cuda.c's LF_VARIANT guards
 * would let a module hold one index width only; the backend does not use them),
 * then launches plan.launch[0 .. nlaunches) in order on one stream, each
 * with kernelParams = {words} (cuLaunchKernel copies them at launch). The
 * scratch (scratch_bytes, 0 when none) holds finished reductions, per-block
 * partials and one uint32 ticket per pass; its tickets must be zero before
 * the first launch that uses it (zero the scratch once when allocating it:
 * every kernel leaves its ticket zero when it finishes). A scratch must not
 * be shared by two launches in flight on different streams.
 */
enum { CG_CUDA_MAX_LAUNCHES = FUSE_MAX_PASSES + 1 };

typedef struct cg_cuda_launch {
    const char *entry;             /* kernel name in the module (static string) */
    unsigned grid[3];              /* blocks */
    unsigned block[3];             /* threads per block */
} cg_cuda_launch;

typedef struct cg_cuda_plan {
    int nlaunches;                 /* 0 when the kernel has nothing to do */
    cg_cuda_launch launch[CG_CUDA_MAX_LAUNCHES];
    size_t scratch_bytes;          /* device scratch needed (0: none) */
    size_t scratch_R, scratch_part, scratch_ticket; /* byte offsets in it */
    int nwords;                    /* 8-byte words of lf_args */
} cg_cuda_plan;

/* The CUDA dialect: CUDA C++ for NVRTC, IEEE semantics as the C dialect
 * except the device math library's accuracy (stated in lazyfuse.h). */
const cg_dialect *cg_dialect_cuda(void);
/* Plans the launches of laid-out kernel lay for parameters P and the device
 * addresses of its buffers (buf_addr[0 .. lay->nbufs); their alignment picks
 * the 16-byte vector variant). sm_count: the device's multiprocessors. */
void cg_cuda_plan_kernel(const cg_layout *lay, const int64_t *P, const uint64_t *buf_addr,
                         int sm_count, cg_cuda_plan *plan);
/* Whether an ELEMENTWISE kernel also gets the 4-element `vec` entries (one
 * loop axis, every access contiguous or invariant, no index map steps, at
 * most 3 calls to the device math library). */
bool cg_cuda_vectorizable(const cg_layout *lay);
/* Writes plan->nwords argument words (layout above). */
void cg_cuda_fill_args(const cg_layout *lay, const cg_cuda_plan *plan, const int64_t *P,
                       const uint64_t *buf_addr, uint64_t scratch, uint64_t *words);
/* Copies only the scalars' entries of P (cg_fill_scalars) into words made by
 * cg_cuda_fill_args: a new constant value needs no new launch plan. */
void cg_cuda_fill_scalar_args(const cg_layout *lay, const int64_t *P, uint64_t *words);

/* ==== sort_cuda.c: the CUDA sort module and its launches =================
 *
 * One fixed module (not per graph) sorts the rows of a dense device array
 * of keys K[nrows][n] (uint32, or uint64 when wide: graph_sort_key's order-
 * preserving keys, descending already folded in) stably ascending, equal
 * keys in position order, and writes each row's first k entries:
 * keys_out[r*k + j] (K's width) and pos_out[r*k + j] (int64 position in
 * the row), either optional. Paths (sort_cuda.c's top says more): BLOCK (a
 * row fits a block's shared memory), SELECT (k <= LF_TOPK_SELECT: one read
 * of each row), RADIX (a segmented global LSD radix sort, three launches a
 * pass, with a device scratch). Every entry takes ONE by-value parameter of
 * CG_CUDA_SORT_WORDS 8-byte words; launch l of a plan reads its own words,
 * words[l * nwords ..] (cg_cuda_sort_fill_args). The backend launches
 * launch[0 .. nlaunches) in order on one stream, with kernelParams =
 * {words + l * nwords}, gridDim grid, blockDim block, shared_bytes dynamic
 * shared memory (always 0). The scratch needs no initialisation; it must
 * not be shared by two plans in flight. Results never depend on the device:
 * grids come from the shape alone.
 */
enum { CG_CUDA_SORT_WORDS = 13, CG_CUDA_SORT_MAX_LAUNCHES = 24 };

typedef enum cg_cuda_sort_path {
    CG_SORT_AUTO,                  /* the plan picks (as listed below) */
    CG_SORT_BLOCK,                 /* n <= 16 * threads: a block sorts a row */
    CG_SORT_SELECT,                /* k <= LF_TOPK_SELECT: per-thread candidates, merged */
    CG_SORT_RADIX                  /* global LSD radix sort, 8-bit digits */
} cg_cuda_sort_path;

typedef struct cg_cuda_sort_launch {
    const char *entry;             /* kernel name in the module (static string) */
    unsigned grid[3];              /* blocks */
    unsigned block[3];             /* threads per block */
    unsigned shared_bytes;         /* dynamic shared memory (0) */
    int pass;                      /* RADIX: the digit pass (bits 8*pass ..); -1 */
} cg_cuda_sort_launch;

typedef struct cg_cuda_sort_plan {
    cg_cuda_sort_path path;        /* the path taken */
    int threads;                   /* threads per block of its launches */
    int64_t nrows, n, k;           /* the shape planned */
    bool wide, want_keys, want_pos;
    int nlaunches;                 /* 0 when there is nothing to do (no rows,
                                      k = 0, neither output wanted) */
    cg_cuda_sort_launch launch[CG_CUDA_SORT_MAX_LAUNCHES];
    int nwords;                    /* words of each launch's lf_args */
    size_t scratch_bytes;          /* device scratch needed (0: none) */
    size_t scratch_keys[2], scratch_pos[2], scratch_hist; /* RADIX: byte
                                      offsets of the ping-pong keys and
                                      positions and of the digit counts */
    int64_t tiles;                 /* RADIX: tiles a row (16 * threads keys) */
} cg_cuda_sort_plan;

/* The module's CUDA C++ text (static; compile it once per context with the
 * backend's NVRTC options). Entries: lf_sort_block32/64, lf_sort_select32/64,
 * lf_sort_hist32/64, lf_sort_scan, lf_sort_scatter32/64, and the output
 * pass lf_sort_write. */
const char *cg_cuda_sort_source(void);
/* Plans the sort of nrows rows of n keys keeping the first k (0 <= k <= n),
 * 64-bit keys when wide; the path the shape picks and 256 threads. */
void cg_cuda_plan_sort(int64_t nrows, int64_t n, int64_t k, bool wide, bool want_keys, bool want_pos,
                       cg_cuda_sort_plan *plan);
/* The same with a path forced (or CG_SORT_AUTO) and threads per block (0:
 * 256; else a power of two from 32 to 256; tests run small blocks on the
 * emulator). Returns false, and plans nothing, when the path cannot take
 * the shape (BLOCK with n > 16 * threads, SELECT with k > LF_TOPK_SELECT)
 * or an argument is out of range. */
bool cg_cuda_plan_sort_with(int64_t nrows, int64_t n, int64_t k, bool wide, bool want_keys, bool want_pos,
                            cg_cuda_sort_path path, int threads, cg_cuda_sort_plan *plan);
/* Writes plan->nlaunches * plan->nwords words: launch l's at words[l *
 * nwords]. Device addresses: keys (K), keys_out and pos_out (ignored unless
 * wanted), scratch (plan->scratch_bytes, 0 when none). */
void cg_cuda_sort_fill_args(const cg_cuda_sort_plan *plan, uint64_t keys, uint64_t keys_out, uint64_t pos_out,
                            uint64_t scratch, uint64_t *words);

/* A sort kernel's work area on the device (emit_cuda.c's key pass, bound as
 * the buffer of the kernel's store 0): the keys K[numel] (uint32, or uint64
 * when wide) at its start, then, when value_size > 0, the values V[numel]
 * (value_size bytes each) at cg_cuda_sort_values_offset (256-byte aligned,
 * the offset the key pass computes from its own extents). numel: the
 * kernel's space (nrows * n). */
size_t cg_cuda_sort_values_offset(int64_t numel, bool wide);
size_t cg_cuda_sort_work_bytes(int64_t numel, bool wide, size_t value_size);
/* The output pass (lf_sort_write, after the plan's launches): a thread per
 * entry of the nrows * k sorted positions (grid-stride; threads per block
 * as cg_cuda_plan_sort_with, 0: 256; the grid from the shape alone). False,
 * and nothing to launch, when nrows * k is 0. */
bool cg_cuda_plan_sort_write(int64_t nrows, int64_t k, int threads, cg_cuda_sort_launch *l);
/* Its CG_CUDA_SORT_WORDS words: per row r (o = r / inner, i = r % inner)
 * and j < k, at = o*k*inner + i + j*inner (graph_sort_row_base),
 * indices_out[at] = pos[r*k + j] (int64) and values_out[at] =
 * values[r*n + pos[r*k + j]] (value_size bytes: 1, 4 or 8); either output
 * address may be 0 (not written). pos: the plan's pos_out; values: V. */
void cg_cuda_sort_write_args(int64_t nrows, int64_t n, int64_t k, int64_t inner, size_t value_size, uint64_t values,
                             uint64_t pos, uint64_t values_out, uint64_t indices_out, uint64_t *words);

#endif /* LF_CODEGEN_H */
