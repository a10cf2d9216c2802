/* fusion/fusion.h: internal interface of the fusion stage.
 *
 * The fusion stage turns a deferred graph, with the outputs being evaluated,
 * into a schedule: an ordered list of kernels and a buffer plan. Later stages
 * (the schedule interpreter here, codegen and backends) see only this header,
 * graph/graph.h and lazyfuse.h. Nothing in graph/ includes this header.
 *
 * The model. A kernel is one loop nest over an iteration space (a shape;
 * for a reduction, the shape of the reduction's input, with a bit mask of
 * the reduced axes). Every value the kernel needs from memory is a load: a
 * source (a slot of the buffer plan, or an iota or random node computed from
 * its index) and an index map from the loop's multi-index to the source's
 * element. Views
 * and broadcasting never materialize: they become index maps. The kernel's
 * arithmetic is composed lf_fns whose parameters are the loads; composing
 * the graph's fns by hash-consing gives CSE across them.
 *
 * Three shapes of kernel:
 *  - elementwise: one fn (the body) evaluated at every point of the space;
 *    its stores write body expressions (one store per output it computes:
 *    horizontal siblings merged into it add stores, not passes);
 *  - reduction: for each output element (an "outer" index: the non-reduced
 *    axes), one or more passes over the reduced ("inner") positions, each
 *    pass an fn folding one or more reductions (horizontal reductions share
 *    a pass); a later pass may read earlier passes' finished results as
 *    FUSE_SRC_ACC loads (max, then sum(exp(x - max))). Then the epilogue fn
 *    runs once per output element (its loads include the finished results)
 *    and its stores write per-output-element values;
 *  - row kernel: a reduction kernel that also has a row pass: after the
 *    epilogue, one more loop over the same inner positions evaluates the row
 *    fn (loads over the full space, plus the finished results broadcast over
 *    the row) and its stores write full-size values (softmax, layer norm).
 *    Only per-row values live between passes; nothing full-size is stored
 *    except the row pass's outputs. When a row fits in cache, a row kernel
 *    reads memory once and writes once. An expensive value computed both
 *    in a pass and in the row pass may be kept in a row buffer instead of
 *    computed twice (fuse_keep). A reduction kernel's pass 0 may also store
 *    elementwise outputs over the iteration space (fuse_store.pos).
 *
 * Invariants a consumer of a schedule may rely on:
 *  - kernels are in execution order: a kernel loads only slots that are graph
 *    inputs or are stored by an earlier kernel;
 *  - every temporary slot is stored by exactly one kernel; slots that share a
 *    memory block have disjoint lifetimes (def .. last_use);
 *  - a store's expression has exactly its slot's dtype; a load parameter has
 *    exactly its load's dtype, so evaluating each fn with the parameter
 *    dtypes of its loads (the stored etype/ctype arrays) is bit-identical to
 *    the node-by-node reference evaluator; a FUSE_SRC_ACC load has the
 *    reduce node's dtype (the result rounded once, as the reference stores);
 *  - a pass's ACC loads name only reductions of earlier passes; the
 *    epilogue and the row pass may name any reduction of the kernel;
 *  - each fn reads at most LF_MAX_ARGS distinct buffers and has at most
 *    GRAPH_MAX_PARAMS parameters (kernels are split to fit): a slot counts
 *    once however many index maps read it (the taps of a stencil), every
 *    other source once per distinct load (an iota or random at each map, an
 *    in-place gather, a reduction's ACC); a kernel has at most
 *    FUSE_MAX_PASSES passes and LF_MAX_ARGS reductions,
 *    and a kernel that roots joined has at most FUSE_MAX_STORES stores;
 *  - a kernel has at most FUSE_MAX_OPS operations (kernels are split to fit;
 *    only a single node whose own fn is larger exceeds it, alone).
 */
#ifndef LF_FUSION_H
#define LF_FUSION_H

#include "graph/graph.h"

/* ==== plan.c: the planner, index maps, the schedule ====================== */

/* One affine step of an index map. Step 0 reads the loop's multi-index; step
 * k > 0 reads the previous step's linear result unravelled (row-major) by its
 * own shape. The last step's result is the element index into the source's
 * dense row-major layout. Strides of extent-1 axes are kept 0 (canonical). */
typedef struct fuse_step {
    int ndim;                      /* axes of the multi-index read */
    int64_t shape[LF_MAX_DIMS];    /* their extents */
    int64_t offset;                /* linear = offset + sum idx[d] * strides[d] */
    int64_t strides[LF_MAX_DIMS];  /* per axis; 0 or negative allowed */
    bool remap;                    /* a remapped view's step (lf_pad, lf_concat;
                                      never step 0, never folded): idx[d] is
                                      first graph_remap_coord(mode[d], idx[d],
                                      shift[d], ext[d]) */
    uint8_t mode[LF_MAX_DIMS];     /* remap: GRAPH_REMAP_* per axis, else 0 */
    int64_t shift[LF_MAX_DIMS];    /* remap: per axis, else 0 */
    int64_t ext[LF_MAX_DIMS];      /* remap: per axis, else 0 */
} fuse_step;

/* An index map: a chain of steps, folded to one step whenever that is exact
 * (always for broadcasts, transposes, slices and expand_dims; a reshape of a
 * non-contiguous view may need two; a remapped view, lf_pad or lf_concat,
 * is a step of its own after step 0). */
typedef struct fuse_map {
    int nsteps;                    /* >= 1 */
    fuse_step *steps;              /* graph_malloc'd */
} fuse_map;

typedef enum fuse_src {
    FUSE_SRC_SLOT,  /* element of a slot of the buffer plan */
    FUSE_SRC_IOTA,  /* computed from its element index, never stored: start +
                       i*step of an iota node, or Philox of a random node (the
                       node's kind says which) */
    FUSE_SRC_ACC,   /* a finished reduction of this kernel (reds[red]) for the
                       current output element; no map. Epilogue, row pass,
                       and passes after the reduction's own */
    FUSE_SRC_GATHER /* a gather node's element: slot (x's) at map (x's element
                       with the gathered coordinate 0) plus the index times
                       gstride, the index being the value of load gidx of the
                       same fn (idx's slot), wrapped; out of range: the value
                       is 0 and the kernel flags an index error (plan_gather.c) */
} fuse_src;

typedef struct fuse_load {
    fuse_src src;                  /* where the value comes from */
    int slot;                      /* FUSE_SRC_SLOT: slot index, else -1 */
    const lf_node *node;           /* node whose value this is (slot's node,
                                      the iota, or the reduction) */
    lf_dtype dtype;                /* element type = the fn parameter's dtype */
    fuse_map map;                  /* loop multi-index -> element (SLOT, IOTA) */
    int red;                       /* FUSE_SRC_ACC: index into the kernel's reds */
    int gidx;                      /* FUSE_SRC_GATHER only: the index load (same fn) */
    int64_t gextent, gstride;      /* FUSE_SRC_GATHER: x's extent and dense stride
                                      on the gathered axis */
} fuse_load;

typedef struct fuse_store {
    int slot;                      /* slot written */
    int expr;                      /* expression id in the body (elementwise
                                      kernel), the epilogue (reduction, row
                                      false) or the row fn (row true) */
    bool row;                      /* row pass: written at the element's
                                      row-major position in the iteration
                                      space; else at the output element (or,
                                      elementwise, the loop position) */
    bool pos;                      /* reduction kernels: an expression of pass
                                      0's fn, written during pass 0 at the
                                      element's row-major position in the
                                      iteration space (an elementwise output
                                      over the reduction's input space, read
                                      in the same pass: plan_merge.c) */
} fuse_store;

enum {
    FUSE_MAX_PASSES = 8,           /* most reduction passes of one kernel */
    FUSE_MAX_STORES = 16,          /* most stores a merge makes a kernel have (a
                                      kernel's buffers: its loads' slots, at most
                                      LF_MAX_ARGS per fn, and its stores) */
    FUSE_MAX_OPS = 500,            /* most operations (ops and casts of the
                                      inlined nodes' fns) of one kernel, so that
                                      compile time grows linearly (plan.c) */
    FUSE_MAX_KEEPS = 2             /* most row keeps of one kernel (plan_keep.c) */
};

/* A row keep (plan_keep.c): expression pass_expr of pass `pass`'s fn and
 * expression row_expr of the row fn are the same node's value at the same
 * element; a backend may store the first into a row buffer and read it back
 * as the second instead of computing it again (same bits either way). */
typedef struct fuse_keep {
    int pass;                      /* the pass computing it first */
    int pass_expr;                 /* its expression in that pass's fn */
    int row_expr;                  /* its expression in the row fn */
    lf_dtype dtype;                /* the value's dtype (the node's) */
    const lf_node *node;           /* the node (for dumps) */
} fuse_keep;

/* One reduction folded by a reduction kernel. */
typedef struct fuse_red {
    lf_reduce_op op;               /* the reduction */
    int pass;                      /* the pass whose fn computes its input */
    int expr;                      /* that fn's expression folded (dtype in) */
    lf_dtype in;                   /* dtype of the reduce node's input */
    const lf_node *node;           /* the reduce node (result dtype, slot) */
} fuse_red;

/* One loop over the iteration space (elementwise) or over one output
 * element's reduced positions (reduction kernels): an fn and its loads. */
typedef struct fuse_pass {
    int nloads;                    /* loads = fn parameters, in order
                                      (0..GRAPH_MAX_PARAMS) */
    fuse_load *loads;
    lf_fn *fn;                     /* the pass's fn (owned by the schedule) */
    lf_dtype *etype;               /* graph_fn_types of fn for the load dtypes */
    lf_dtype *ctype;
} fuse_pass;

/* What a kernel does, set by the planner (plan_build.c) from its root and its
 * axes; codegen picks each dialect's skeleton by it (codegen/kernel.c) and
 * the evaluators dispatch on it. The reductions' three kinds are their loop
 * nests: axes of extent 1 do not count, and the innermost remaining axis
 * decides between INNER (reduced) and OUTER (kept). A row pass (kn->row),
 * several passes, or a fold that is a contraction (plan_contract.c) are
 * properties of a reduction kernel, not kinds of their own: the same
 * skeleton runs them. */
typedef enum fuse_kernel_kind {
    FUSE_KERNEL_ELEMENTWISE,       /* no fold: one loop over the space */
    FUSE_KERNEL_REDUCE_FULL,       /* every non-unit axis reduced */
    FUSE_KERNEL_REDUCE_INNER,      /* the innermost non-unit axis reduced
                                      (or no non-unit axis is reduced) */
    FUSE_KERNEL_REDUCE_OUTER,      /* the innermost non-unit axis kept */
    FUSE_KERNEL_SCAN,              /* a scan along its one reduced axis */
    FUSE_KERNEL_SCATTER,           /* a store whose index is data (kn->scatter) */
    FUSE_KERNEL_SORT,              /* keys for a backend's sort (kn->sort) */
    FUSE_KERNEL_NKINDS
} fuse_kernel_kind;

typedef struct fuse_kernel {
    fuse_kernel_kind kind;         /* see above */
    int root;                      /* id of the node that defines the kernel */
    int ndim;                      /* iteration space rank */
    int64_t shape[LF_MAX_DIMS];    /* iteration space (reduction: its input's shape) */
    int64_t numel;                 /* product of shape */
    uint32_t redmask;              /* bit d: axis d is reduced (0: elementwise) */
    /* pass 0: the body (elementwise kernels: the only fn but the stores') */
    int nloads;                    /* body loads = body parameters, in order */
    fuse_load *loads;
    lf_fn *body;                   /* composed body (owned by the schedule) */
    lf_dtype *body_etype;          /* graph_fn_types of body for the load dtypes */
    lf_dtype *body_ctype;
    /* all passes, in order: passes[0] is the body (the same pointers as the
       five fields above, owned through them); elementwise kernels have one */
    int npasses;                   /* 1..FUSE_MAX_PASSES */
    fuse_pass *passes;
    /* reduction kernels only */
    lf_reduce_op red_op;           /* reds[0]: the root's reduction */
    int red_expr;                  /* body expression folded (dtype red_in) */
    lf_dtype red_in;               /* dtype of the reduction's input node */
    const lf_node *red_node;       /* the reduce node (output space = its shape) */
    int nreds;                     /* reductions, by pass then node id; >= 1 */
    fuse_red *reds;                /* reds[0] repeats red_op .. red_node */
    int out_ndim;                  /* output space: the root reduce node's shape */
    int64_t out_shape[LF_MAX_DIMS];
    int64_t out_numel;
    int nepi_loads;                /* epilogue loads; load 0 is ACC of reds[0] */
    fuse_load *epi_loads;
    lf_fn *epi;                    /* epilogue fn, NULL for elementwise kernels */
    lf_dtype *epi_etype;
    lf_dtype *epi_ctype;
    /* row kernels only (reduce -> broadcast -> map): the row pass */
    int nrow_loads;                /* row loads over the full space, and ACC */
    fuse_load *row_loads;
    lf_fn *row;                    /* row fn, NULL when there is no row pass */
    lf_dtype *row_etype;
    lf_dtype *row_ctype;
    int nkeeps;                    /* row keeps (plan_keep.c), 0..FUSE_MAX_KEEPS */
    fuse_keep keeps[FUSE_MAX_KEEPS];
    /* all kinds */
    int nstores;                   /* stores, at least one */
    fuse_store *stores;
    int nnodes;                    /* graph nodes computed in this kernel */
    int *nodes;                    /* their ids, ascending (for dumps) */
    /* scan kernels only (FUSE_KERNEL_SCAN, fusion/plan_scan.c): a reduction kernel whose one
       reduction reds[0] is a scan along its one reduced axis (redmask);
       out_shape is the whole space, and the epilogue runs at every element,
       right after that element's fold, with the scan's running value (the
       blocked order of lazyfuse.h) as its ACC load; its loads' maps and its
       stores are over the whole space. One pass, no row pass. */
    bool scan_exclusive;           /* the value before the element's fold */
    /* scatter kernels only (plan_scatter.c): an elementwise kernel over the
       scatter's positions S whose one store (the values, in dst's dtype) is
       combined into its slot at the target of each position, in the order of
       lazyfuse.h (graph_scatter_geom: blocks, then dst (+) partials) */
    const lf_node *scatter;        /* the scatter node, else NULL */
    int scat_idx_expr;             /* body expression of the index */
    int scat_dst_slot;             /* slot of dst, or -1: dst is a constant */
    int scat_dst_scalar;           /* that constant's index in scalars, else -1 */
    /* sort kernels only (plan_sort.c): an elementwise kernel over the sort
       input's space with the sorted axis moved last (fuse_sort_space: each
       row of the space is one row to sort, contiguous in row-major order);
       the body computes the sorted value; its stores name the sort nodes'
       slots but are not written at the loop position: a backend writes the
       value (store 0's expression) as a key into its own work array, sorts
       each row, and writes the first k entries of each row into the slots
       of sort_values and sort_indices (either may be NULL, not both) */
    const lf_node *sort;           /* the kernel's root sort node, else NULL */
    const lf_node *sort_values;    /* its node giving values, or NULL */
    const lf_node *sort_indices;   /* its node giving positions, or NULL */
    /* all kinds: the constant nodes (lf_const, lf_fill) the kernel reads, in
       order of first use (fns in fuse_kernel_fn_loads order, then a scatter's
       dst). Their values are not part of the kernel: an fn reads scalars[j]
       through its EXPR_SCALAR expressions with param j, codegen passes the
       values as run-time parameters (cg_fill_scalars), the interpreter reads
       the nodes; so a new value (lf_scalar_set) reuses the compiled kernel */
    int nscalars;
    const lf_node **scalars;       /* graph_malloc'd, NULL when none */
} fuse_kernel;

typedef enum fuse_slot_kind {
    FUSE_SLOT_INPUT,   /* a graph input buffer, read in place */
    FUSE_SLOT_OUTPUT,  /* result of output `output` (fresh memory) */
    FUSE_SLOT_TEMP     /* materialized intermediate (lives in a memory block) */
} fuse_slot_kind;

typedef struct fuse_slot {
    fuse_slot_kind kind;           /* see above */
    const lf_node *node;           /* node whose value it holds (INPUT: the
                                      input node; its buffer is read at each
                                      eval with fuse_slot_buffer, so
                                      lf_input_rebind needs no replan) */
    int output;                    /* OUTPUT: first index into outs, else -1 */
    lf_dtype dtype;                /* element type */
    int64_t numel;                 /* elements (dense row-major) */
    size_t bytes;                  /* numel * dtype size */
    int def;                       /* kernel that stores it, -1 for inputs */
    int last_use;                  /* last kernel that loads it, -1 if none */
    int block;                     /* TEMP: memory block, else -1 */
    bool may_alias;                /* INPUT or OUTPUT: one side of a pair that
                                      may share memory (plan_inplace.c); its
                                      pointer is declared without restrict */
} fuse_slot;

/* The buffer an INPUT slot reads now: its node's (lf_input_rebind may have
 * changed it since planning; it keeps dtype, shape and layout). */
static inline lf_buffer *fuse_slot_buffer(const fuse_slot *sl) { return sl->node->u.buffer; }

typedef struct fuse_schedule {
    lf_graph *graph;               /* the planned graph */
    lf_graph *arena;               /* private graph owning the kernels' fns */
    int nkernels;                  /* kernels, in execution order */
    fuse_kernel *kernels;
    int nslots;                    /* slots of the buffer plan */
    fuse_slot *slots;
    int nouts;                     /* outputs of the eval */
    int *out_slot;                 /* slot holding output i */
    int nblocks;                   /* memory blocks shared by TEMP slots */
    size_t *block_bytes;           /* size of each (the largest slot in it) */
    bool fused;                    /* planned with fusion on */
    size_t unfused_temp_bytes;     /* intermediates the unfused baseline stores */
    size_t bytes_read;             /* lf_eval_stats' traffic figures, computed */
    size_t bytes_written;          /* by fuse_plan (one walk over the loads) */
    size_t bytes_materialized;
    double plan_seconds;           /* time fuse_plan took (the above included) */
    uint64_t scan_work;            /* instances and loads that the merges'
                                      scans of roots visited, all rounds (a
                                      deterministic measure of planning work
                                      for tests, plan_merge.c) */
    int rounds;                    /* planning rounds (plan.c: a round that
                                      adds a root is redone) */
    uint64_t scan_max;             /* the most that one scan of a root for
                                      one kernel visited (bounded by a
                                      constant, not by the root's instances) */
    uint64_t inst_work;            /* instances the rounds' pass 1 processed
                                      (made, kept or taken back), all rounds:
                                      what each round re-derives (plan_vertical.c) */
    uint64_t merge_work;           /* roots the rounds' merges processed, all
                                      rounds: what each round forms again
                                      (resumed from the lowest changed root,
                                      plan_merge.c) */
    uint64_t victim_work;          /* instances whose victim counts were
                                      computed, plus the candidates and
                                      instances the victim search read, all
                                      rounds (the counts are kept with the
                                      lists, plan_merge.c) */
    uint64_t shared_work;          /* nodes the multiple-consumer rule
                                      evaluated plus the nodes its walks
                                      for a candidate beneath visited, all
                                      rounds (plan_vertical.c) */
    uint64_t maps_stored;          /* index maps pass 1 stored for its
                                      instances, all rounds: one per distinct
                                      map (a map read in many kernels is
                                      stored once, plan_vertical.c) */
} fuse_schedule;

/* Plans outs[0..n) of g (checked by graph_check_outputs). fusion false gives
 * the unfused baseline: every needed node except inputs and views is its own
 * kernel and is stored. On failure (only LF_ERR_NOMEM) records the message in
 * g's context, frees everything and sets *out to NULL. */
lf_status fuse_plan(lf_graph *g, int n, lf_node *const *outs, bool fusion, fuse_schedule **out);
/* Frees a schedule (NULL is a no-op). */
void fuse_schedule_free(fuse_schedule *s);
/* Fills the statistics of lazyfuse.h for s (plan_seconds included): a copy
 * of what fuse_plan computed, O(1). */
void fuse_schedule_stats(const fuse_schedule *s, lf_eval_stats *st);
/* Element index into the source of map m at loop multi-index idx. */
int64_t fuse_map_apply(const fuse_map *m, const int64_t *idx);
/* The loads of fn f of kernel kn, for f in 0 .. kn->npasses + 1: the passes
 * (0 .. npasses-1; pass 0 is the body), then the epilogue, then the row
 * pass; *n is 0 for an fn the kernel lacks. *iters (if non-NULL) is how many
 * times that fn's loop runs in all (numel, or out_numel for the epilogue). */
const fuse_load *fuse_kernel_fn_loads(const fuse_kernel *kn, int f, int *n, int64_t *iters);
/* Prints a one-line-per-kernel summary of s (LF_DEBUG=fusion). */
void fuse_schedule_print(const fuse_schedule *s, FILE *fp);

/* ==== plan_gather.c: gather loads ======================================== */

/* After kernel k of s flagged an index error: finds the first bad index of
 * its gather nodes (lowest node id, then lowest position) in the host
 * arrays data[slot] and records the message (graph_gather_check). Returns
 * LF_ERR_INDEX. */
lf_status fuse_report_index_error(const fuse_schedule *s, int k, void *const *data);

/* ==== plan_inplace.c: outputs written into their own inputs ============== */

/* Whether output slot o may be written into the memory of input slot j (the
 * rule of plan_inplace.c's top comment). */
bool fuse_in_place_ok(const fuse_schedule *s, int o, int j);
/* Marks output i's slot and every input slot bound to dst that
 * fuse_in_place_ok allows may_alias (a backend asked to write output i into
 * dst, before codegen reads the flags); returns fuse_in_place_target(s, dst),
 * what the backend keys the program by. */
const lf_buffer *fuse_plan_in_place(fuse_schedule *s, int i, const lf_buffer *dst);
/* dst when s reads dst (an input slot is bound to it), else NULL: what a
 * backend asks fuse_plan_in_place for, and keys its programs by (an eval of
 * x = f(x) and one of y = f(x) are two programs; only the first drops
 * restrict on x). */
const lf_buffer *fuse_in_place_target(const fuse_schedule *s, const lf_buffer *dst);
/* Whether output i of s may be written straight into dst, a buffer some of
 * s's input slots read: every input slot bound to dst allows it, and the
 * plan marked the pair (so the compiled kernels declare no restrict). The
 * backend still checks the rest (no other output names dst, no partial
 * overlap, no index check before the store). */
bool fuse_output_in_place(const fuse_schedule *s, int i, const lf_buffer *dst);

/* ==== plan_contract.c: contractions ======================================= */

/* Whether reduction j of kn is a contraction (graph_contraction); then its
 * expression is a float32 multiply in its pass fn and *x, *y are that
 * multiply's operands (expression ids of the pass fn). */
bool fuse_red_contraction(const fuse_kernel *kn, int j, int *x, int *y);

/* ==== interp.c: the schedule interpreter ================================= */

/* Runs s kernel by kernel, element by element, each fn evaluated by
 * graph_fn_eval (a reduction kernel: per output element its passes in order,
 * the epilogue, then the row pass), reductions accumulated exactly as
 * graph/eval_ref.c does.
 * Contract as graph_eval_reference: on success results[i] is a graph_malloc'd
 * dense array of output i (NULL for zero bytes) that the caller frees; on
 * failure (LF_ERR_NOMEM) nothing is allocated and the message is recorded. */
lf_status fuse_interpret(const fuse_schedule *s, void **results);

#endif /* LF_FUSION_H */
