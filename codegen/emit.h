/* codegen/emit.h: the emitter's shared walker, for the files that print a
 * kernel's skeleton (private to codegen/).
 *
 *   emit.c       the walker: text, lines and blocks, loads and stores
 *                (accesses), fns, reductions (fold, combine, finish), loop
 *                levels and the reduced nests both dialects open
 *   emit_c.c     the C skeletons of each kernel kind (cg_c_skeletons) and
 *                the C dialect's hooks
 *   emit_cuda.c  the CUDA skeletons (cg_cuda_skeletons; helpers skel_*),
 *                the CUDA dialect's hooks and the launch plans
 *   kernel.c     cg_emit_kernel: the prelude, then the skeleton the
 *                dialect's table gives for the kernel's kind
 *
 * A skeleton prints the loops of its kernel kind with cg_line/cg_open_block
 * and calls the walker for everything inside them, so both dialects print
 * the same expressions, loads, stores and folds.
 */
#ifndef LF_CODEGEN_EMIT_H
#define LF_CODEGEN_EMIT_H

#include "codegen/codegen.h"

/* The state of printing one kernel. */
typedef struct cg_emitter {
    cg_text *t;                    /* the output */
    const fuse_schedule *s;
    const cg_layout *lay;
    const fuse_kernel *kn;         /* lay->kernel */
    const cg_dialect *d;
    int depth;                     /* indentation */
    int level;                     /* current loop level (names o<a>_<level>) */
    bool vec;                      /* CUDA vector body: contiguous loads and stores go
                                      through the 4-element registers w<a>.x[l] */
    bool sort_raw;                 /* sort kernels: store 0 writes the value itself
                                      (lf_k_raw), else its sort key (lf_k_run) */
    bool keep;                     /* row keeps on (C REDUCE_INNER, one reduced
                                      axis): a pass stores each kept value into
                                      lf_keep<t>[jj], the row pass reads it there */
    bool scalars_local;            /* cg_declare_buffers declared the kernel's
                                      scalars as locals lf_sc<j> at its top:
                                      fns read those (loop-invariant to the
                                      compiler) instead of P inside loops */
    int split;                     /* C ELEMENTWISE row loops with split
                                      remapped reads (cg_access.param_split):
                                      0 none (lf_steps), 1 a border range
                                      (lf_remap_at), 2 the interior (a plain
                                      shifted load from ri<a>) */
    bool contract_rows;            /* C REDUCE_INNER contraction rows
                                      (emit_contract.c, cg_emit_contract_rows):
                                      a contraction folds into cp<j>_<slot>
                                      with no block count (the loop nest
                                      closes each block) */
    bool stream;                   /* C ELEMENTWISE tiled body: stores that
                                      cg_access_streams go to lf_w<a>[j - jt]
                                      (cg_emit_stream_targets) */
} cg_emitter;

/* One expression piece of generated text. */
typedef char expr_buf[768];

/* How ACC loads read finished reductions: res<r> (SCALAR), res<r>[j]
 * (ARRAY) or R[r] (R). */
typedef enum acc_form { ACC_SCALAR, ACC_ARRAY, ACC_R } acc_form;

/* ---- lines ---- */
/* snprintf for expression pieces; a piece that does not fit becomes a line
 * that stops the compile, never silently wrong code. */
void cg_fmt(char *out, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
/* One indented line. */
void cg_line(cg_emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line ending in "{"; what follows is indented until cg_close_block. */
void cg_open_block(cg_emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_close_block(cg_emitter *e);
/* The dialect's value type of dtype t. */
const char *cg_vtype(const cg_emitter *e, lf_dtype t);

/* ---- accesses and loop levels ---- */
/* Whether access a belongs to region reg (an fn index; stores: the
 * elementwise body, the epilogue's or the row pass's). */
bool cg_in_region(const cg_emitter *e, const cg_access *a, int reg);
/* Per row of a split elementwise row (after jl, jh): the check that the
 * compares of the position with a constant hold over the whole interior
 * (the interior loop reads 1 for them), shrinking the interior to nothing
 * where one does not (emit.c explains the rule). */
void cg_declare_row_true_compares(cg_emitter *e);
/* Loads of region reg invariant in the innermost loop, as h<a> locals. */
void cg_hoist_invariants(cg_emitter *e, int reg);
/* Unravels flat index `flat` over loop axes first .. first+n-1. */
void cg_unravel(cg_emitter *e, const char *flat, int first, int n);
/* Opens the loop over axis ax (region reg's offsets follow it); lo/hi bound
 * it (NULL: the whole extent); track_pos keeps the reduced position. */
void cg_open_level(cg_emitter *e, int ax, int reg, const char *lo, const char *hi, bool track_pos);
void cg_close_level(cg_emitter *e);
/* Opens the reduced nest of region reg (INNER and FULL) and writes the
 * innermost range into jlo/jhi; returns the levels opened, which
 * cg_close_reduced_nest takes. */
int cg_open_reduced_nest(cg_emitter *e, int reg, const char *lo, const char *hi, bool track_pos,
                         char jlo[32], char jhi[32]);
void cg_close_reduced_nest(cg_emitter *e, int opened);

/* ---- fns and stores ---- */
/* Region reg's fn at innermost index jv, then its stores. */
void cg_emit_body(cg_emitter *e, int reg, const char *jv, acc_form form, const char *prefix);
/* Streaming stores (e->stream, a tile of elements from innermost index
 * `from`): the tile lf_s<a>[CG_STREAM_TILE] of each streamable store; the
 * pointer lf_w<a> the body stores element j at [j - from] of: the tile when
 * lf_nt (the run streams), else the output itself; and the lines writing
 * `count` elements of each tile to its buffer (lf_stream: non-temporal). */
void cg_declare_stream_tiles(cg_emitter *e);
void cg_emit_stream_targets(cg_emitter *e, const char *from);
void cg_emit_stream_flush(cg_emitter *e, const char *from, const char *count);
/* The body of pass q at innermost index jv, folding into lane/element slot
 * at position pos. */
void cg_emit_pass_body(cg_emitter *e, int q, const char *jv, acc_form form, const char *slot,
                       const char *pos);

/* ---- contractions (emit_contract.c) ---- */
/* Folds contraction j's operands v<cx>, v<cy> into its float partial
 * cp<j>[slot] with fmaf, flushing it into acc<j>[slot] after every
 * LF_CONTRACT_BLOCK steps and after the last (cn<j> counts them against the
 * reduced count): graph_contract_fold's order. A lane slot ("l") folds into
 * slot 0, every position in order. */
void cg_emit_contract_fold(cg_emitter *e, int j, int cx, int cy, const char *slot);
/* A contraction kernel the layout marked (lay->gemm_m >= 0) printed as a
 * packed, cache-blocked GEMM (C dialect); false: not one, nothing printed. */
bool cg_emit_contract_gemm(cg_emitter *e);
/* A C REDUCE_INNER kernel whose reductions are all contractions over one
 * reduced axis (no row pass, gather, split read or position store) printed
 * as groups of outputs (16 as two 8-lane vector chains for a plain matrix
 * times vector, 8 scalar chains otherwise, then one): each output's own fmaf
 * chain in graph_contract_fold's order, the chains of a group interleaved in
 * one loop so that they hide the FMA latency (emit_contract.c). Returns false,
 * printing nothing, for any other kernel. */
bool cg_emit_contract_rows(cg_emitter *e);

/* ---- reductions ---- */
bool cg_red_float(const fuse_red *r);  /* accumulates in double */
/* The C type of r's lane accumulators: double for float reductions but
 * min/max (no arg) of f32, which are exact in float and kept there (half
 * the vector work of a row max: the class of softmax-like kernels);
 * int64_t for the others. */
const char *cg_acc_type(const fuse_red *r);
bool cg_red_arg(const fuse_red *r);    /* argmin / argmax */
const char *cg_red_init(const fuse_red *r);
/* Combines accumulator b/bg into a/g. */
void cg_emit_combine(cg_emitter *e, const fuse_red *r, const char *a, const char *g, const char *b,
                     const char *bg);
/* The finished value (the reduce node's dtype) of accumulator a/g. */
void cg_finish_value(const cg_emitter *e, const fuse_red *r, const char *a, const char *g, char *out,
                     size_t cap);
/* Whether pass q folds an argmin/argmax (positions are tracked). */
bool cg_pass_tracks_pos(const fuse_kernel *kn, int q);
/* Declares lane accumulators acc<r>[n], arg<r>[n] of pass q's reductions. */
void cg_declare_accs(cg_emitter *e, int q, const char *n, const char *count);
/* Declares b<k> for every buffer and s<a> for strided accesses. */
void cg_declare_buffers(cg_emitter *e);
/* Declares res<r> for every reduction (n: array length or NULL). */
void cg_declare_results(cg_emitter *e, const char *n);
/* res<r> (or res<r>[dst_fmt_prefix]) = the finished acc<r>[slot] of pass q. */
void cg_finish_into(cg_emitter *e, int q, const char *slot, const char *dst_fmt_prefix);

/* ---- scans (CG_SCAN) ---- */
/* The scan's identity in its accumulator type (graph_scan_identity): a
 * literal, or the text printed into buf (an integer extreme). */
const char *cg_scan_identity(const fuse_red *r, char *buf, size_t cap);
/* Folds accumulator b into accumulator a as if it were an element (a block
 * total into an offset: graph_scan_step's O[b+1] = O[b] (+) T[b]). */
void cg_emit_scan_fold_acc(cg_emitter *e, const fuse_red *r, const char *a, const char *b);

/* One element of a scan at innermost index jv: the body, its value folded
 * into acc0[slot] (and into tot[slot] when tot); with epi, res0 (declared
 * here) is the running value (before the fold when exclusive) and the
 * epilogue and its stores follow. */
void cg_emit_scan_element(cg_emitter *e, const char *jv, const char *slot, bool tot, bool epi);
/* ---- scatter kernels (plan_scatter.c) ---- */
/* Sets partial lvalue q to the identity of the scatter's op. */
void cg_emit_scatter_init(cg_emitter *e, const char *q);
/* Element t of the output: dst (+) the partials sp[b * dn + t] of blocks
 * b < nblocks, stored (expressions of the skeleton). */
void cg_emit_scatter_finish(cg_emitter *e, const char *t, const char *nblocks, const char *dn);

/* ---- sort kernels (plan_sort.c) ---- */
/* The key helpers (lf_skey_<dtype>: graph_sort_key's order), guarded so
 * that a unit of several kernels defines them once. */
void cg_emit_sort_key_defs(cg_emitter *e);

#endif /* LF_CODEGEN_EMIT_H */
