/* graph/graph.c: graphs and node constructors (lf_eval is backends/driver.c's).
 *
 * Every constructor checks its arguments completely before it allocates, so
 * a node that exists is valid (graph.h lists the invariants). Errors are
 * sticky: the first failure of a graph is kept in the graph, and every later
 * builder call on it returns NULL without touching the message, so a chain
 * of calls can be checked once at the end.
 *
 * Views (reshape, permute, broadcast_to, expand_dims, slice) are one node
 * kind: an offset and per-axis strides into the dense row-major layout of
 * their input. Elementwise nodes (map, zipwith, select, cast, apply) are one
 * node kind: an fn applied to broadcast inputs, typed for those inputs.
 */
#include "graph/graph.h"

#include <stdatomic.h>
#include <ctype.h>
#include <math.h>
#include <string.h>

/* ---- graphs and errors --------------------------------------------------- */

lf_status graph_fail(lf_graph *g, lf_status st, const char *fmt, ...) {
    if (g->status != LF_OK) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
    va_end(ap);
    g->status = st;
    memcpy(g->ctx->errmsg, g->errmsg, sizeof g->errmsg);
    return st;
}

bool graph_check_args(lf_graph *g, const char *what, int n, lf_node *const *nodes) {
    if (!g) {
        graph_error(NULL, LF_ERR_NULL, "%s: graph is NULL", what);
        return false;
    }
    if (g->status != LF_OK) return false;
    for (int i = 0; i < n; i++) {
        if (!nodes[i]) {
            graph_fail(g, LF_ERR_NULL, "%s: input %d is NULL", what, i);
            return false;
        }
        if (!graph_owns(g, nodes[i])) {
            graph_fail(g, LF_ERR_STATE, "%s: input %d belongs to another graph (or to a freed one)",
                       what, i);
            return false;
        }
    }
    return true;
}

lf_graph *lf_graph_new(lf_ctx *ctx) {
    if (!ctx) {
        graph_error(NULL, LF_ERR_NULL, "graph_new: ctx is NULL");
        return NULL;
    }
    lf_graph *g = graph_calloc(1, sizeof *g);
    if (!g) {
        graph_error(ctx, LF_ERR_NOMEM, "graph_new: out of memory");
        return NULL;
    }
    static atomic_uint_fast64_t last_serial;
    g->serial = (uint64_t)atomic_fetch_add(&last_serial, 1) + 1;
    g->ctx = ctx;
    g->next = ctx->graphs;
    if (ctx->graphs) ctx->graphs->prev = g;
    ctx->graphs = g;
    return g;
}

void *graph_program_use(lf_graph *g, int i) {
    graph_program hit = g->programs[i];
    memmove(&g->programs[1], &g->programs[0], (size_t)i * sizeof hit);
    g->programs[0] = hit;
    return hit.p;
}

void graph_program_put(lf_graph *g, void *p, void (*free_fn)(void *)) {
    graph_program *last = &g->programs[GRAPH_PROGRAMS - 1];
    if (last->p) last->free(last->p);
    memmove(&g->programs[1], &g->programs[0], (GRAPH_PROGRAMS - 1) * sizeof *last);
    g->programs[0] = (graph_program){p, free_fn};
}

void graph_programs_clear(lf_graph *g) {
    for (int i = 0; i < GRAPH_PROGRAMS; i++) {
        if (g->programs[i].p) g->programs[i].free(g->programs[i].p);
        g->programs[i] = (graph_program){NULL, NULL};
    }
}

void graph_destroy(lf_graph *g) {
    graph_programs_clear(g);
    for (int i = 0; i < g->nnodes; i++) {
        lf_node *n = g->nodes[i];
        if (n->kind == NODE_MAP) {
            graph_free(n->u.map.etype);
            graph_free(n->u.map.ctype);
        }
        n->serial = 0; /* a stale handle to this node fails graph_owns while the
                          memory is not reused */
        graph_free(n);
    }
    graph_free(g->nodes);
    while (g->fns) {
        lf_fn *f = g->fns;
        g->fns = f->next;
        graph_fn_destroy(f);
    }
    graph_ufns_destroy(g);
    graph_externs_destroy(g);
    for (int i = 0; i < g->nbound; i++) {
        g->bound[i]->graphs--;
        graph_buffer_release(g->bound[i]);
    }
    graph_free(g->bound);
    lf_ctx *ctx = g->ctx;
    if (g->prev) g->prev->next = g->next;
    else ctx->graphs = g->next;
    if (g->next) g->next->prev = g->prev;
    graph_free(g);
}

void lf_graph_free(lf_graph *g) {
    if (g) graph_destroy(g);
}

lf_status lf_graph_status(const lf_graph *g) { return g ? g->status : LF_ERR_NULL; }
const char *lf_graph_errmsg(const lf_graph *g) { return g ? g->errmsg : "graph is NULL"; }

lf_dtype lf_node_dtype(const lf_node *n) { return n ? n->dtype : LF_NDTYPES; }
int lf_node_ndim(const lf_node *n) { return n ? n->ndim : -1; }
int64_t lf_node_numel(const lf_node *n) { return n ? n->numel : -1; }
int64_t lf_node_dim(const lf_node *n, int axis) {
    if (!n) return -1;
    if (axis < 0) axis += n->ndim;
    return (axis >= 0 && axis < n->ndim) ? n->shape[axis] : -1;
}

/* ---- node creation -------------------------------------------------------------- */

/* Checks a caller's shape (graph_shape_problem), recording a problem on g; the
 * product is checked by new_node. */
static bool check_shape(lf_graph *g, const char *what, int ndim, const int64_t *shape) {
    char msg[160];
    lf_status st = graph_shape_problem(what, ndim, shape, msg, sizeof msg);
    if (st != LF_OK) graph_fail(g, st, "%s", msg);
    return st == LF_OK;
}

/* Allocates a node of g and appends it. The shape must already be checked
 * for sign and rank; this checks the element count and byte size. */
static lf_node *new_node(lf_graph *g, const char *what, node_kind kind, lf_dtype t, int ndim,
                         const int64_t *shape, int nin, lf_node *const *in) {
    int64_t numel;
    char sbuf[160];
    if (!graph_shape_numel(ndim, shape, lf_dtype_size(t), &numel)) {
        graph_fail(g, LF_ERR_OVERFLOW, "%s: shape %s of %s overflows", what,
                   graph_shape_str(sbuf, sizeof sbuf, ndim, shape), lf_dtype_name(t));
        return NULL;
    }
    if (g->nnodes == g->capnodes) {
        int cap = g->capnodes ? 2 * g->capnodes : 16;
        lf_node **nodes = graph_realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) goto nomem;
        g->nodes = nodes;
        g->capnodes = cap;
    }
    lf_node *n = graph_calloc(1, sizeof *n);
    if (!n) goto nomem;
    n->graph = g;
    n->serial = g->serial;
    n->id = g->nnodes;
    n->kind = kind;
    n->dtype = t;
    n->ndim = ndim;
    if (ndim) memcpy(n->shape, shape, (size_t)ndim * sizeof *shape);
    n->numel = numel;
    n->ninputs = nin;
    for (int i = 0; i < nin; i++) n->inputs[i] = in[i];
    g->nodes[g->nnodes++] = n;
    return n;
nomem:
    graph_fail(g, LF_ERR_NOMEM, "%s: out of memory", what);
    return NULL;
}

static bool check_dtype(lf_graph *g, const char *what, lf_dtype t) {
    if ((unsigned)t < LF_NDTYPES) return true;
    graph_fail(g, LF_ERR_DTYPE, "%s: unknown dtype %d", what, (int)t);
    return false;
}

/* ---- sources ------------------------------------------------------------------------ */

static lf_node *new_view(lf_graph *g, const char *what, view_kind op, lf_node *x, int ndim,
                         const int64_t *shape, int64_t offset, const int64_t *strides);

lf_node *lf_input(lf_graph *g, lf_buffer *b) {
    if (!graph_check_args(g, "input", 0, NULL)) return NULL;
    if (!b) {
        graph_fail(g, LF_ERR_NULL, "input: buffer is NULL");
        return NULL;
    }
    if (b->ctx != g->ctx) {
        graph_fail(g, LF_ERR_STATE, "input: buffer belongs to another context");
        return NULL;
    }
    bool bound = false; /* a buffer in no graph's list is not in g's: no scan (inputs of a big graph) */
    for (int i = 0; b->graphs > 0 && i < g->nbound && !bound; i++) bound = g->bound[i] == b;
    if (!bound && g->nbound == g->capbound) {
        int cap = g->capbound ? 2 * g->capbound : 8;
        lf_buffer **nb = graph_realloc(g->bound, (size_t)cap * sizeof *nb);
        if (!nb) {
            graph_fail(g, LF_ERR_NOMEM, "input: out of memory");
            return NULL;
        }
        g->bound = nb;
        g->capbound = cap;
    }
    /* a strided wrap is read as a slice view of its storage, a 1-d input */
    int64_t span = (int64_t)(b->storage / lf_dtype_size(b->dtype));
    lf_node *n = b->strided ? new_node(g, "input", NODE_INPUT, b->dtype, 1, &span, 0, NULL)
                            : new_node(g, "input", NODE_INPUT, b->dtype, b->ndim, b->shape, 0, NULL);
    if (!n) return NULL;
    n->u.buffer = b;
    if (!bound) {
        g->bound[g->nbound++] = b;
        b->graphs++;
        b->refs++;
    }
    if (b->strided) return new_view(g, "input", VIEW_SLICE, n, b->ndim, b->shape, b->offset, b->strides);
    return n;
}

lf_node *lf_fill(lf_graph *g, lf_dtype t, double value, int ndim, const int64_t *shape) {
    if (!graph_check_args(g, "fill", 0, NULL) || !check_dtype(g, "fill", t) ||
        !check_shape(g, "fill", ndim, shape))
        return NULL;
    lf_node *n = new_node(g, "fill", NODE_CONST, t, ndim, shape, 0, NULL);
    if (n) n->u.value = graph_scalar_convert((lf_scalar){.f = value}, LF_F64, t);
    return n;
}

lf_node *lf_const(lf_graph *g, lf_dtype t, double value) {
    if (!graph_check_args(g, "const", 0, NULL) || !check_dtype(g, "const", t)) return NULL;
    lf_node *n = new_node(g, "const", NODE_CONST, t, 0, NULL, 0, NULL);
    if (n) n->u.value = graph_scalar_convert((lf_scalar){.f = value}, LF_F64, t);
    return n;
}

lf_status lf_scalar_set(lf_graph *g, lf_node *c, double value) {
    if (!g) return graph_error(NULL, LF_ERR_NULL, "scalar_set: graph is NULL");
    if (g->status != LF_OK) return g->status;
    if (!c) return graph_error(g->ctx, LF_ERR_NULL, "scalar_set: node is NULL");
    if (!graph_owns(g, c))
        return graph_error(g->ctx, LF_ERR_STATE, "scalar_set: node belongs to another graph (or to a freed one)");
    char ns[GRAPH_NODE_STR_CAP];
    if (c->kind != NODE_CONST)
        return graph_error(g->ctx, LF_ERR_INVALID,
                           "scalar_set: %s is not a constant (only lf_const and lf_fill nodes take a value)",
                           graph_node_str(c, ns, sizeof ns));
    /* programs read the value at each eval (fuse_kernel.scalars): nothing to
       replan, unless the value is an exponent whose cost class changed (its
       kernels may hold the old value as a literal) */
    lf_scalar v = graph_scalar_convert((lf_scalar){.f = value}, LF_F64, c->dtype);
    if (c->pow_exponent && graph_pow_exponent_class(v, c->dtype) != graph_pow_exponent_class(c->u.value, c->dtype)) {
        g->version++;
        graph_programs_clear(g);
    }
    c->u.value = v;
    return LF_OK;
}

/* The NODE_INPUT node behind what lf_input returned: the node itself, or for a
 * strided buffer the slice view lf_input made over it (a view with the
 * buffer's own shape, offset and strides); NULL for anything else. */
static lf_node *rebind_target(lf_node *n) {
    if (n->kind == NODE_INPUT) return n->ext ? NULL : n; /* an extern's buffer is the graph's */
    if (n->kind != NODE_VIEW || n->u.view.op != VIEW_SLICE || n->inputs[0]->kind != NODE_INPUT) return NULL;
    const lf_buffer *b = n->inputs[0]->u.buffer;
    if (!b->strided || n->ndim != b->ndim || n->u.view.offset != b->offset) return NULL;
    for (int d = 0; d < n->ndim; d++)
        if (n->shape[d] != b->shape[d] || n->u.view.strides[d] != b->strides[d]) return NULL;
    return n->inputs[0];
}

/* Input nodes of g other than `except` that read buffer b. */
static int inputs_reading(const lf_graph *g, const lf_buffer *b, const lf_node *except) {
    int count = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const lf_node *x = g->nodes[i];
        if (x != except && x->kind == NODE_INPUT && x->u.buffer == b) count++;
    }
    return count;
}

lf_status lf_input_rebind(lf_graph *g, lf_node *input, lf_buffer *b) {
    if (!g) return graph_error(NULL, LF_ERR_NULL, "input_rebind: graph is NULL");
    if (g->status != LF_OK) return g->status;
    if (!input) return graph_error(g->ctx, LF_ERR_NULL, "input_rebind: node is NULL");
    if (!b) return graph_error(g->ctx, LF_ERR_NULL, "input_rebind: buffer is NULL");
    if (!graph_owns(g, input))
        return graph_error(g->ctx, LF_ERR_STATE, "input_rebind: node belongs to another graph (or to a freed one)");
    if (b->ctx != g->ctx) return graph_error(g->ctx, LF_ERR_STATE, "input_rebind: buffer belongs to another context");
    char ns[GRAPH_NODE_STR_CAP];
    lf_node *in = rebind_target(input);
    if (!in)
        return graph_error(g->ctx, LF_ERR_INVALID, "input_rebind: %s is not an input (only nodes lf_input returned)",
                           graph_node_str(input, ns, sizeof ns));
    lf_buffer *old = in->u.buffer;
    if (b == old) return LF_OK;
    if (b->dtype != old->dtype)
        return graph_error(g->ctx, LF_ERR_DTYPE, "input_rebind: %s reads %s, the new buffer is %s",
                           graph_node_str(input, ns, sizeof ns), lf_dtype_name(old->dtype), lf_dtype_name(b->dtype));
    bool same_shape = b->ndim == old->ndim;
    for (int d = 0; same_shape && d < b->ndim; d++) same_shape = b->shape[d] == old->shape[d];
    if (!same_shape) {
        char s1[200], s2[200];
        graph_shape_str(s1, sizeof s1, old->ndim, old->shape);
        graph_shape_str(s2, sizeof s2, b->ndim, b->shape);
        return graph_error(g->ctx, LF_ERR_SHAPE, "input_rebind: %s has shape %s, the new buffer %s",
                           graph_node_str(input, ns, sizeof ns), s1, s2);
    }
    bool same_layout = b->strided == old->strided;
    if (same_layout && b->strided) {
        same_layout = b->offset == old->offset && b->storage == old->storage;
        for (int d = 0; same_layout && d < b->ndim; d++) same_layout = b->strides[d] == old->strides[d];
    }
    if (!same_layout)
        return graph_error(g->ctx, LF_ERR_INVALID,
                           "input_rebind: %s reads %s memory, the new buffer is laid out otherwise (strides, "
                           "offset or span differ; a graph reads one layout)",
                           graph_node_str(input, ns, sizeof ns), old->strided ? "strided" : "C-contiguous");
    bool bound = false;
    for (int i = 0; b->graphs > 0 && i < g->nbound && !bound; i++) bound = g->bound[i] == b;
    if (!bound && g->nbound == g->capbound) {
        int cap = g->capbound ? 2 * g->capbound : 8;
        lf_buffer **nb = graph_realloc(g->bound, (size_t)cap * sizeof *nb);
        if (!nb) return graph_error(g->ctx, LF_ERR_NOMEM, "input_rebind: out of memory");
        g->bound = nb;
        g->capbound = cap;
    }
    /* Cached programs read an input slot's buffer through its node
       (fuse_slot_buffer), so they stay valid, unless slots were shared: one
       slot serves every input node of one buffer. */
    if (inputs_reading(g, old, in) > 0 || inputs_reading(g, b, in) > 0) graph_programs_clear(g);
    if (!bound) {
        g->bound[g->nbound++] = b;
        b->graphs++;
        b->refs++;
    }
    in->u.buffer = b;
    if (inputs_reading(g, old, NULL) == 0) {
        for (int i = 0; i < g->nbound; i++) {
            if (g->bound[i] != old) continue;
            g->bound[i] = g->bound[--g->nbound];
            old->graphs--;
            graph_buffer_release(old);
            break;
        }
    }
    return LF_OK;
}

lf_node *lf_arange(lf_graph *g, lf_dtype t, double start, double stop, double step) {
    if (!graph_check_args(g, "arange", 0, NULL) || !check_dtype(g, "arange", t)) return NULL;
    if (t == LF_BOOL || graph_dtype_is_complex(t)) {
        graph_fail(g, LF_ERR_DTYPE, "arange: dtype %s is not allowed", lf_dtype_name(t));
        return NULL;
    }
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step)) {
        graph_fail(g, LF_ERR_RANGE, "arange: start, stop and step must be finite");
        return NULL;
    }
    if (step == 0) {
        graph_fail(g, LF_ERR_RANGE, "arange: step is 0");
        return NULL;
    }
    double count = ceil((stop - start) / step);
    if (!(count < 9.2e18)) {
        graph_fail(g, LF_ERR_OVERFLOW, "arange: %g elements overflow", count);
        return NULL;
    }
    int64_t len = count > 0 ? (int64_t)count : 0;
    lf_node *n = new_node(g, "arange", NODE_IOTA, t, 1, &len, 0, NULL);
    if (n) {
        n->u.iota.start = start;
        n->u.iota.step = step;
    }
    return n;
}

lf_node *lf_iota(lf_graph *g, lf_dtype t, int64_t len) {
    if (!graph_check_args(g, "iota", 0, NULL) || !check_dtype(g, "iota", t)) return NULL;
    if (t == LF_BOOL || graph_dtype_is_complex(t)) {
        graph_fail(g, LF_ERR_DTYPE, "iota: dtype %s is not allowed", lf_dtype_name(t));
        return NULL;
    }
    if (len < 0) {
        graph_fail(g, LF_ERR_SHAPE, "iota: length %lld is negative", (long long)len);
        return NULL;
    }
    lf_node *n = new_node(g, "iota", NODE_IOTA, t, 1, &len, 0, NULL);
    if (n) {
        n->u.iota.start = 0;
        n->u.iota.step = 1;
    }
    return n;
}

lf_node *lf_random(lf_graph *g, lf_dtype t, lf_random_dist dist, int ndim, const int64_t *shape,
                   uint64_t seed) {
    if (!graph_check_args(g, "random", 0, NULL) || !check_dtype(g, "random", t)) return NULL;
    static const char *const names[] = {"uniform", "normal", "bits"};
    if ((unsigned)dist > LF_RANDOM_BITS) {
        graph_fail(g, LF_ERR_INVALID, "random: unknown distribution %d", (int)dist);
        return NULL;
    }
    bool ok = dist == LF_RANDOM_BITS ? graph_dtype_is_int(t) : graph_dtype_is_float(t);
    if (!ok) {
        graph_fail(g, LF_ERR_DTYPE, "random: dtype %s makes no sense for the %s distribution (%s)",
                   lf_dtype_name(t), names[dist], dist == LF_RANDOM_BITS ? "i32 or i64" : "f32 or f64");
        return NULL;
    }
    if (!check_shape(g, "random", ndim, shape)) return NULL;
    lf_node *n = new_node(g, "random", NODE_RANDOM, t, ndim, shape, 0, NULL);
    if (n) {
        n->u.random.seed = seed;
        n->u.random.dist = dist;
    }
    return n;
}

/* A gather node (graph/gather.c checks the arguments and computes the shape). */
lf_node *graph_new_gather(lf_graph *g, lf_node *x, int axis, lf_node *idx, int ndim, const int64_t *shape,
                          bool take) {
    lf_node *in[2] = {x, idx};
    lf_node *n = new_node(g, take ? "take" : "gather", NODE_GATHER, x->dtype, ndim, shape, 2, in);
    if (n) {
        n->u.gather.axis = axis;
        n->u.gather.take = take;
    }
    return n;
}

/* A sort node (graph/sort.c checks the arguments): x's shape with extent k
 * on the axis, x's dtype or i64 positions. */
lf_node *graph_new_sort(lf_graph *g, const char *what, lf_node *x, int axis, int64_t k, bool descending,
                        bool indices) {
    if (graph_dtype_is_complex(x->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "%s: dtype %s has no order (complex numbers are not sorted)", what,
                   lf_dtype_name(x->dtype));
        return NULL;
    }
    if (x->dtype > LF_F64) { /* sort keys of the dtypes appended later are not written yet */
        graph_fail(g, LF_ERR_DTYPE, "%s: dtype %s is not supported (bool, i32, i64, f32, f64)", what,
                   lf_dtype_name(x->dtype));
        return NULL;
    }
    int64_t shape[LF_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = k;
    lf_node *n = new_node(g, what, NODE_SORT, indices ? LF_I64 : x->dtype, x->ndim, shape, 1, &x);
    if (n) {
        n->u.sort.axis = axis;
        n->u.sort.k = k;
        n->u.sort.descending = descending;
        n->u.sort.indices = indices;
    }
    return n;
}

/* A scatter node (graph/scatter.c checks the arguments). */
lf_node *graph_new_scatter(lf_graph *g, lf_scatter_op op, lf_node *dst, int axis, lf_node *idx, lf_node *values) {
    lf_node *in[3] = {dst, idx, values};
    lf_node *n = new_node(g, "scatter", NODE_SCATTER, dst->dtype, dst->ndim, dst->shape, 3, in);
    if (n) {
        n->u.scatter.axis = axis;
        n->u.scatter.op = op;
    }
    return n;
}

/* ---- views ---------------------------------------------------------------------------- */

static lf_node *new_view(lf_graph *g, const char *what, view_kind op, lf_node *x, int ndim,
                         const int64_t *shape, int64_t offset, const int64_t *strides) {
    lf_node *n = new_node(g, what, NODE_VIEW, x->dtype, ndim, shape, 1, &x);
    if (!n) return NULL;
    n->u.view.op = op;
    n->u.view.offset = offset;
    if (ndim) memcpy(n->u.view.strides, strides, (size_t)ndim * sizeof *strides);
    return n;
}

lf_node *lf_reshape(lf_graph *g, lf_node *x, int ndim, const int64_t *shape) {
    if (!graph_check_args(g, "reshape", 1, &x)) return NULL;
    if (ndim < 0 || ndim > LF_MAX_DIMS) {
        graph_fail(g, LF_ERR_SHAPE, "reshape: %d dimensions (at most %d)", ndim, LF_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        graph_fail(g, LF_ERR_NULL, "reshape: shape is NULL for %d dimensions", ndim);
        return NULL;
    }
    int64_t out[LF_MAX_DIMS], known = 1;
    int infer = -1;
    char sa[160], sb[160];
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                graph_fail(g, LF_ERR_SHAPE, "reshape: more than one extent is -1");
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            graph_fail(g, LF_ERR_SHAPE, "reshape: extent %lld of axis %d is negative",
                       (long long)shape[i], i);
            return NULL;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            graph_fail(g, LF_ERR_OVERFLOW, "reshape: shape product overflows");
            return NULL;
        }
    }
    if (infer >= 0) {
        if (known == 0 || x->numel % known != 0) {
            graph_fail(g, LF_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s",
                       graph_shape_str(sa, sizeof sa, x->ndim, x->shape), (long long)x->numel,
                       graph_shape_str(sb, sizeof sb, ndim, shape));
            return NULL;
        }
        out[infer] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel) {
        graph_fail(g, LF_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                   graph_shape_str(sa, sizeof sa, x->ndim, x->shape), (long long)x->numel,
                   graph_shape_str(sb, sizeof sb, ndim, shape), (long long)known);
        return NULL;
    }
    int64_t strides[LF_MAX_DIMS];
    graph_contiguous_strides(ndim, out, strides);
    return new_view(g, "reshape", VIEW_RESHAPE, x, ndim, out, 0, strides);
}

lf_node *lf_permute(lf_graph *g, lf_node *x, const int *perm) {
    if (!graph_check_args(g, "permute", 1, &x)) return NULL;
    if (x->ndim > 0 && !perm) {
        graph_fail(g, LF_ERR_NULL, "permute: perm is NULL");
        return NULL;
    }
    int64_t dense[LF_MAX_DIMS], shape[LF_MAX_DIMS], strides[LF_MAX_DIMS];
    bool seen[LF_MAX_DIMS] = {false};
    graph_contiguous_strides(x->ndim, x->shape, dense);
    for (int i = 0; i < x->ndim; i++) {
        int a = perm[i];
        if (a < 0 || a >= x->ndim) {
            graph_fail(g, LF_ERR_AXIS, "permute: axis %d out of range for %d dimensions", a,
                       x->ndim);
            return NULL;
        }
        if (seen[a]) {
            graph_fail(g, LF_ERR_AXIS, "permute: axis %d repeated", a);
            return NULL;
        }
        seen[a] = true;
        shape[i] = x->shape[a];
        strides[i] = dense[a];
    }
    return new_view(g, "permute", VIEW_PERMUTE, x, x->ndim, shape, 0, strides);
}

lf_node *lf_transpose(lf_graph *g, lf_node *x) {
    if (!graph_check_args(g, "transpose", 1, &x)) return NULL;
    int perm[LF_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = x->ndim - 1 - i;
    return lf_permute(g, x, perm);
}

lf_node *lf_broadcast_to(lf_graph *g, lf_node *x, int ndim, const int64_t *shape) {
    if (!graph_check_args(g, "broadcast_to", 1, &x) || !check_shape(g, "broadcast_to", ndim, shape))
        return NULL;
    bool ok = ndim >= x->ndim;
    for (int i = 0; ok && i < x->ndim; i++) {
        int64_t e = x->shape[i], t = shape[ndim - x->ndim + i];
        ok = e == t || e == 1;
    }
    if (!ok) {
        char sa[160], sb[160];
        graph_fail(g, LF_ERR_SHAPE, "broadcast_to: shape %s cannot broadcast to %s",
                   graph_shape_str(sa, sizeof sa, x->ndim, x->shape),
                   graph_shape_str(sb, sizeof sb, ndim, shape));
        return NULL;
    }
    int64_t strides[LF_MAX_DIMS];
    graph_broadcast_strides(x->ndim, x->shape, ndim, shape, strides);
    return new_view(g, "broadcast_to", VIEW_BROADCAST, x, ndim, shape, 0, strides);
}

lf_node *lf_expand_dims(lf_graph *g, lf_node *x, int axis) {
    if (!graph_check_args(g, "expand_dims", 1, &x)) return NULL;
    if (x->ndim + 1 > LF_MAX_DIMS) {
        graph_fail(g, LF_ERR_SHAPE, "expand_dims: result would have %d dimensions (at most %d)",
                   x->ndim + 1, LF_MAX_DIMS);
        return NULL;
    }
    int a = axis < 0 ? axis + x->ndim + 1 : axis;
    if (a < 0 || a > x->ndim) {
        graph_fail(g, LF_ERR_AXIS, "expand_dims: axis %d out of range for %d dimensions", axis,
                   x->ndim);
        return NULL;
    }
    int64_t dense[LF_MAX_DIMS], shape[LF_MAX_DIMS], strides[LF_MAX_DIMS];
    graph_contiguous_strides(x->ndim, x->shape, dense);
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i == a) {
            shape[i] = 1;
            strides[i] = 0;
        } else {
            shape[i] = x->shape[j];
            strides[i] = dense[j++];
        }
    }
    return new_view(g, "expand_dims", VIEW_EXPAND, x, x->ndim + 1, shape, 0, strides);
}

lf_node *lf_slice(lf_graph *g, lf_node *x, int axis, int64_t start, int64_t stop, int64_t step) {
    if (!graph_check_args(g, "slice", 1, &x)) return NULL;
    int a = axis < 0 ? axis + x->ndim : axis;
    if (a < 0 || a >= x->ndim) {
        graph_fail(g, LF_ERR_AXIS, "slice: axis %d out of range for %d dimensions", axis, x->ndim);
        return NULL;
    }
    if (step == 0 || step == INT64_MIN) {
        graph_fail(g, LF_ERR_RANGE, "slice: step %lld is not allowed", (long long)step);
        return NULL;
    }
    int64_t n = x->shape[a];
    int64_t s = start, e = stop;
    const char *bad = NULL;
    int64_t badv = 0;
    if (s != LF_NONE) {
        if (s < 0) s += n;
        if (s < 0 || s > n) bad = "start", badv = start;
    }
    if (!bad && e != LF_NONE) {
        if (e < 0) e += n;
        if (e < 0 || e > n) bad = "stop", badv = stop;
    }
    if (bad) {
        graph_fail(g, LF_ERR_RANGE, "slice: %s %lld out of range for axis %d of extent %lld", bad,
                   (long long)badv, a, (long long)n);
        return NULL;
    }
    /* ceil(span / |step|) as (span - 1) / |step| + 1: span <= n + 1 and
       |step| <= INT64_MAX, so nothing overflows at any step (INT64_MIN is
       refused above) */
    int64_t len;
    if (step > 0) {
        if (s == LF_NONE) s = 0;
        if (e == LF_NONE) e = n;
        len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
        /* walking backwards: start n means "from the last element", stop
           LF_NONE means "through element 0" (one before it, -1) */
        if (s == LF_NONE || s == n) s = n - 1;
        if (e == LF_NONE) e = -1;
        len = s > e ? (s - e - 1) / -step + 1 : 0;
    }
    int64_t dense[LF_MAX_DIMS], shape[LF_MAX_DIMS], strides[LF_MAX_DIMS];
    graph_contiguous_strides(x->ndim, x->shape, dense);
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, dense, sizeof strides);
    shape[a] = len;
    /* with two or more elements |step| * (len - 1) < n, so step * dense[a]
       stays inside the array's extent; with fewer the stride is never used
       and a huge step would overflow it */
    strides[a] = len > 1 ? step * dense[a] : dense[a];
    int64_t offset = len > 0 ? s * dense[a] : 0;
    return new_view(g, "slice", VIEW_SLICE, x, x->ndim, shape, offset, strides);
}

/* ---- pad and concatenate ---------------------------------------------------------------
 * Both are remapped views (VIEW_PAD, VIEW_CONCAT: graph_remap_coord per axis)
 * combined by selects on the position (a broadcast iota compared with
 * constants), so every evaluator reads them as loads through an index map
 * and a consumer fuses them like any view. A remapped view only ever reads
 * inside its input: an edge or reflect axis has ext >= 1, and a constant
 * border or a concat piece is a clamped read whose value the select drops. */

/* A view of x with output shape `shape`: axis d reads x at
 * graph_remap_coord(mode[d], c, shift[d], x's extent d). */
static lf_node *new_remap_view(lf_graph *g, const char *what, view_kind op, lf_node *x, const int64_t *shape,
                               const uint8_t *mode, const int64_t *shift) {
    int64_t dense[LF_MAX_DIMS];
    graph_contiguous_strides(x->ndim, x->shape, dense);
    lf_node *n = new_view(g, what, op, x, x->ndim, shape, 0, dense);
    if (!n) return NULL;
    n->u.view.remapped = true;
    for (int d = 0; d < x->ndim; d++) {
        n->u.view.remap[d] = mode[d];
        n->u.view.shift[d] = mode[d] == GRAPH_REMAP_NONE ? 0 : shift[d];
        n->u.view.ext[d] = x->shape[d];
    }
    return n;
}

/* The dtype of the coordinates of an axis of extent len: i32 where every
 * coordinate fits (the compares then run in the lanes of an f32 select in
 * compiled kernels, not in i64 ones), else i64. Exact either way. */
static lf_dtype coord_dtype(int64_t len) { return len <= INT32_MAX ? LF_I32 : LF_I64; }

/* A 0-d constant of dtype t (i32 or i64) holding v exactly (lf_const takes
 * a double). */
static lf_node *const_int(lf_graph *g, lf_dtype t, int64_t v) {
    lf_node *c = lf_const(g, t, 0.0);
    if (c) c->u.value.i = v;
    return c;
}

/* The coordinate along axis of an ndim-d array of extent len there: an
 * iota of coord_dtype(len) shaped [1, .., len, .., 1], which broadcasts
 * against the array. */
static lf_node *axis_coord(lf_graph *g, int ndim, int axis, int64_t len) {
    int64_t shape[LF_MAX_DIMS];
    for (int d = 0; d < ndim; d++) shape[d] = d == axis ? len : 1;
    lf_node *i = lf_iota(g, coord_dtype(len), len);
    return i ? lf_reshape(g, i, ndim, shape) : NULL;
}

lf_node *lf_pad(lf_graph *g, lf_node *x, const int64_t *before, const int64_t *after, lf_pad_mode mode,
                double value) {
    if (!graph_check_args(g, "pad", 1, &x)) return NULL;
    char ns[GRAPH_NODE_STR_CAP];
    if (mode != LF_PAD_CONSTANT && mode != LF_PAD_EDGE && mode != LF_PAD_REFLECT) {
        graph_fail(g, LF_ERR_INVALID, "pad: unknown mode %d (LF_PAD_CONSTANT, LF_PAD_EDGE or LF_PAD_REFLECT)",
                   (int)mode);
        return NULL;
    }
    if (x->ndim == 0) return x;
    if (!before || !after) {
        graph_fail(g, LF_ERR_NULL, "pad: %s is NULL for %s", !before ? "before" : "after",
                   graph_node_str(x, ns, sizeof ns));
        return NULL;
    }
    int64_t shape[LF_MAX_DIMS], shift[LF_MAX_DIMS];
    uint8_t remap[LF_MAX_DIMS];
    bool any = false;
    for (int d = 0; d < x->ndim; d++) {
        if (before[d] < 0 || after[d] < 0) {
            graph_fail(g, LF_ERR_SHAPE, "pad: negative width %lld %s axis %d of %s",
                       (long long)(before[d] < 0 ? before[d] : after[d]), before[d] < 0 ? "before" : "after", d,
                       graph_node_str(x, ns, sizeof ns));
            return NULL;
        }
        if (__builtin_add_overflow(x->shape[d], before[d], &shape[d]) ||
            __builtin_add_overflow(shape[d], after[d], &shape[d])) {
            graph_fail(g, LF_ERR_OVERFLOW, "pad: axis %d of %s padded by %lld and %lld overflows", d,
                       graph_node_str(x, ns, sizeof ns), (long long)before[d], (long long)after[d]);
            return NULL;
        }
        bool padded = before[d] > 0 || after[d] > 0;
        if (padded && x->shape[d] == 0 && mode != LF_PAD_CONSTANT) {
            graph_fail(g, LF_ERR_SHAPE, "pad: cannot %s-pad axis %d of %s: the axis is empty",
                       mode == LF_PAD_EDGE ? "edge" : "reflect", d, graph_node_str(x, ns, sizeof ns));
            return NULL;
        }
        any |= padded;
        remap[d] = !padded ? GRAPH_REMAP_NONE : mode == LF_PAD_REFLECT ? GRAPH_REMAP_REFLECT : GRAPH_REMAP_CLAMP;
        shift[d] = before[d];
    }
    if (!any) return x;
    if (mode == LF_PAD_CONSTANT && x->numel == 0) { /* nothing to read: all border */
        lf_node *f = new_node(g, "pad", NODE_CONST, x->dtype, x->ndim, shape, 0, NULL);
        if (f) f->u.value = graph_scalar_convert((lf_scalar){.f = value}, LF_F64, x->dtype);
        return f;
    }
    lf_node *v = new_remap_view(g, "pad", VIEW_PAD, x, shape, remap, shift);
    if (!v || mode != LF_PAD_CONSTANT) return v;
    lf_node *inside = NULL;
    for (int d = 0; d < x->ndim; d++) {
        if (remap[d] == GRAPH_REMAP_NONE) continue;
        lf_node *c = axis_coord(g, x->ndim, d, shape[d]);
        lf_dtype ct = coord_dtype(shape[d]);
        lf_node *lo = lf_apply(g, LF_OP_GE, c, const_int(g, ct, before[d]), NULL);
        lf_node *hi = lf_apply(g, LF_OP_LT, c, const_int(g, ct, before[d] + x->shape[d]), NULL);
        lf_node *in = lf_apply(g, LF_OP_AND, lo, hi, NULL);
        inside = inside ? lf_apply(g, LF_OP_AND, inside, in, NULL) : in;
    }
    return lf_select(g, inside, v, lf_const(g, x->dtype, value));
}

lf_node *lf_concat(lf_graph *g, int n, lf_node *const *xs, int axis) {
    if (!graph_check_args(g, "concat", 0, NULL)) return NULL;
    if (n < 1 || n > LF_CONCAT_MAX) {
        graph_fail(g, LF_ERR_SHAPE, "concat: %d pieces (1 to %d)", n, LF_CONCAT_MAX);
        return NULL;
    }
    if (!xs) {
        graph_fail(g, LF_ERR_NULL, "concat: xs is NULL");
        return NULL;
    }
    if (!graph_check_args(g, "concat", n, xs)) return NULL;
    char ns[GRAPH_NODE_STR_CAP], ns2[GRAPH_NODE_STR_CAP];
    const lf_node *x0 = xs[0];
    int ndim = x0->ndim;
    if (ndim == 0) {
        graph_fail(g, LF_ERR_SHAPE, "concat: piece 0 %s is 0-d (pieces need at least one axis)",
                   graph_node_str(x0, ns, sizeof ns));
        return NULL;
    }
    if (axis < -ndim || axis >= ndim) {
        graph_fail(g, LF_ERR_AXIS, "concat: axis %d out of range for %d dimensions", axis, ndim);
        return NULL;
    }
    int a = axis < 0 ? axis + ndim : axis;
    int64_t shape[LF_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[a] = 0;
    lf_dtype t = x0->dtype;
    for (int k = 0; k < n; k++) {
        const lf_node *x = xs[k];
        bool same = x->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) same = d == a || x->shape[d] == x0->shape[d];
        if (!same) {
            graph_fail(g, LF_ERR_SHAPE, "concat: piece %d %s does not match piece 0 %s except on axis %d", k,
                       graph_node_str(x, ns, sizeof ns), graph_node_str(x0, ns2, sizeof ns2), a);
            return NULL;
        }
        if (__builtin_add_overflow(shape[a], x->shape[a], &shape[a])) {
            graph_fail(g, LF_ERR_OVERFLOW, "concat: the joined extent of axis %d overflows at piece %d %s", a, k,
                       graph_node_str(x, ns, sizeof ns));
            return NULL;
        }
        t = lf_dtype_promote(t, x->dtype);
    }
    int64_t numel;
    if (!graph_shape_numel(ndim, shape, lf_dtype_size(t), &numel)) {
        graph_fail(g, LF_ERR_OVERFLOW, "concat: shape %s of %s overflows",
                   graph_shape_str(ns, sizeof ns, ndim, shape), lf_dtype_name(t));
        return NULL;
    }
    if (numel == 0) { /* nothing to read (every piece empty) */
        lf_node *f = new_node(g, "concat", NODE_CONST, t, ndim, shape, 0, NULL);
        if (f) f->u.value = graph_scalar_convert((lf_scalar){.i = 0}, LF_I64, t);
        return f;
    }
    int nonempty = 0, only = 0;
    for (int k = 0; k < n; k++)
        if (xs[k]->shape[a] > 0) nonempty++, only = k;
    if (nonempty == 1) /* the output is that piece */
        return xs[only]->dtype == t ? xs[only] : lf_cast(g, xs[only], t);
    /* the pieces with elements, each a clamped view at its offset; the
       output is the last one where the coordinate is past the one before */
    uint8_t remap[LF_MAX_DIMS] = {0};
    int64_t shift[LF_MAX_DIMS] = {0};
    remap[a] = GRAPH_REMAP_CLAMP;
    lf_node *views[LF_CONCAT_MAX];
    int64_t offsets[LF_CONCAT_MAX];
    int nv = 0;
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        lf_node *x = xs[k];
        if (x->shape[a] == 0) continue;
        if (x->dtype != t) x = lf_cast(g, x, t);
        shift[a] = off;
        if (!x || !(views[nv] = new_remap_view(g, "concat", VIEW_CONCAT, x, shape, remap, shift))) return NULL;
        offsets[nv++] = off;
        off += xs[k]->shape[a];
    }
    lf_node *out = views[nv - 1];
    lf_node *c = axis_coord(g, ndim, a, shape[a]);
    for (int k = nv - 2; k >= 0; k--)
        out = lf_select(g, lf_apply(g, LF_OP_LT, c, const_int(g, coord_dtype(shape[a]), offsets[k + 1]), NULL),
                        views[k], out);
    return out;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static lf_node *make_map(lf_graph *g, const char *what, lf_fn *f, int n, lf_node *const *xs) {
    if (!graph_check_args(g, what, 0, NULL)) return NULL;
    if (n < 0 || n > LF_MAX_ARGS) {
        graph_fail(g, LF_ERR_ARITY, "%s: %d inputs (0 to %d allowed)", what, n, LF_MAX_ARGS);
        return NULL;
    }
    if (!xs && n > 0) {
        graph_fail(g, LF_ERR_NULL, "%s: inputs array is NULL", what);
        return NULL;
    }
    if (!graph_check_args(g, what, n, xs)) return NULL;
    if (!f) {
        graph_fail(g, LF_ERR_NULL, "%s: fn is NULL", what);
        return NULL;
    }
    if (!graph_owns(g, f)) {
        graph_fail(g, LF_ERR_STATE, "%s: fn belongs to another graph (or to a freed one)", what);
        return NULL;
    }
    if (f->result < 0) {
        graph_fail(g, LF_ERR_STATE, "%s: fn has no result (call lf_fn_set_result)", what);
        return NULL;
    }
    if (f->nparams != n) {
        graph_fail(g, LF_ERR_ARITY, "%s: fn takes %d parameter%s, got %d input%s", what,
                   f->nparams, f->nparams == 1 ? "" : "s", n, n == 1 ? "" : "s");
        return NULL;
    }
    int ndim = 0; /* a fn of no parameters gives a 0-d value */
    int64_t shape[LF_MAX_DIMS] = {0};
    if (n > 0) {
        ndim = xs[0]->ndim;
        memcpy(shape, xs[0]->shape, sizeof shape);
    }
    for (int i = 1; i < n; i++) {
        if (!graph_broadcast_shapes(ndim, shape, xs[i]->ndim, xs[i]->shape, &ndim, shape)) {
            char sa[160], sb[160];
            graph_fail(g, LF_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", what,
                       graph_shape_str(sa, sizeof sa, ndim, shape),
                       graph_shape_str(sb, sizeof sb, xs[i]->ndim, xs[i]->shape));
            return NULL;
        }
    }
    lf_dtype params[LF_MAX_ARGS];
    for (int i = 0; i < n; i++) params[i] = xs[i]->dtype;
    lf_dtype *etype = graph_malloc((size_t)f->nexprs * sizeof *etype);
    lf_dtype *ctype = graph_malloc((size_t)f->nexprs * sizeof *ctype);
    graph_fn_literal lit = {.expr = -1, .lit = -1, .dtype = LF_I32};
    lf_dtype rt = (etype && ctype) ? graph_fn_types_checked(f, params, etype, ctype, &lit) : LF_NDTYPES;
    int bad_k, bad = rt != LF_NDTYPES ? graph_fn_bad_operand(f, etype, &bad_k) : -1;
    if (bad < 0 && lit.expr >= 0) { /* NEP 50: NumPy 2 raises OverflowError here */
        char num[48]; /* GRAPH_BEYOND_DIGITS digits and a sign fit */
        if (lit.lit >= 0) graph_fn_beyond_str(&f->exprs[lit.lit], num, sizeof num);
        else snprintf(num, sizeof num, "%lld", (long long)lit.value);
        graph_fail(g, LF_ERR_DTYPE, "%s: %s: integer literal %s is out of range for %s (write it as a float, "
                   "or cast the operand to a %s dtype)", what,
                   f->exprs[lit.expr].kind == EXPR_OP ? graph_ops[f->exprs[lit.expr].op].text
                   : f->exprs[lit.expr].kind == EXPR_CAST ? lf_dtype_name(f->exprs[lit.expr].cast_to)
                                                           : "result",
                   num,
                   lf_dtype_name(lit.dtype), lit.lit >= 0 ? "float" : "wider");
        graph_free(etype);
        graph_free(ctype);
        return NULL;
    }
    lf_fn *exact = rt != LF_NDTYPES && bad < 0 ? graph_fn_exact_compares(f, etype) : f;
    if (!exact) {
        graph_free(etype);
        graph_free(ctype);
        return NULL;
    }
    if (exact != f) { /* comparisons with a literal beyond int64: typed again, on the copy */
        f = exact;
        graph_free(etype);
        graph_free(ctype);
        etype = graph_malloc((size_t)f->nexprs * sizeof *etype);
        ctype = graph_malloc((size_t)f->nexprs * sizeof *ctype);
        rt = (etype && ctype) ? graph_fn_types(f, params, etype, ctype) : LF_NDTYPES;
    }
    if (bad >= 0) { /* a float operand of & | ^ ~ << >>, or a complex one of an operator without it */
        const fn_expr *e = &f->exprs[bad];
        const lf_op bop = e->op;
        if (bad_k < graph_ops[bop].arity && graph_dtype_is_complex(etype[e->arg[bad_k]]))
            graph_fail(g, LF_ERR_DTYPE, "%s: %s: not defined for complex operands (%s)%s", what, graph_ops[bop].text,
                       lf_dtype_name(etype[e->arg[bad_k]]), graph_ops[bop].typing == OPTY_CMP ? ": complex numbers have no order; == and != compare" : "");
        else if (bad_k == graph_ops[e->op].arity) /* integer operands, no common integer dtype (NumPy 2 refuses too) */
            graph_fail(g, LF_ERR_DTYPE, "%s: %s: operands %s and %s have no common integer dtype (they promote to %s); "
                       "cast one of them", what, graph_ops[e->op].text, lf_dtype_name(etype[e->arg[0]]),
                       lf_dtype_name(etype[e->arg[1]]), lf_dtype_name(etype[bad]));
        else if (graph_ops[e->op].arity == 1)
            graph_fail(g, LF_ERR_DTYPE, "%s: %s: operand must be an integer or bool, got %s", what,
                       graph_ops[e->op].text, lf_dtype_name(etype[e->arg[bad_k]]));
        else /* ^ on floats in a fn is most likely a power written the way other languages do */
            graph_fail(g, LF_ERR_DTYPE, "%s: %s: operands must be integers or bool, got %s%s", what,
                       graph_ops[e->op].text, lf_dtype_name(etype[e->arg[bad_k]]),
                       e->op == LF_OP_BITXOR && (!strcmp(what, "map") || !strcmp(what, "zipwith"))
                           ? " (use ** for powers; ^ is bitwise xor)"
                           : "");
        graph_free(etype);
        graph_free(ctype);
        return NULL;
    }
    lf_node *node = rt != LF_NDTYPES ? new_node(g, what, NODE_MAP, rt, ndim, shape, n, xs) : NULL;
    if (!node) {
        graph_free(etype);
        graph_free(ctype);
        graph_fail(g, LF_ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    node->u.map.fn = f;
    node->u.map.etype = etype;
    node->u.map.ctype = ctype;
    /* constants read directly as a float exponent (graph_pow_exponent_class) */
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *x = &f->exprs[i];
        if (x->kind != EXPR_OP || x->op != LF_OP_POW || !graph_dtype_is_float(ctype[i])) continue;
        const fn_expr *y = &f->exprs[x->arg[1]];
        if (y->kind == EXPR_PARAM && xs[y->param]->kind == NODE_CONST) xs[y->param]->pow_exponent = true;
    }
    return node;
}

lf_node *lf_map(lf_graph *g, lf_fn *f, lf_node *x) { return make_map(g, "map", f, 1, &x); }

lf_node *lf_zipwith(lf_graph *g, lf_fn *f, int n, lf_node *const *xs) {
    return make_map(g, "zipwith", f, n, xs);
}

/* The lower-case enum name of op ("add" for LF_OP_ADD), for messages. */
static const char *op_ident(lf_op op) {
    static const char *const ids[LF_NOPS] = {
#define LF_OP(ID, text, arity, syntax, typing, cname) [LF_OP_##ID] = #ID,
#include "lazyfuse_ops.def"
    };
    static _Thread_local char buf[16];
    size_t i = 0;
    for (; ids[op][i] && i + 1 < sizeof buf; i++) buf[i] = (char)tolower((unsigned char)ids[op][i]);
    buf[i] = 0;
    return buf;
}

lf_node *lf_apply(lf_graph *g, lf_op op, lf_node *a, lf_node *b, lf_node *c) {
    bool known = (unsigned)op < LF_NOPS;
    const char *what = known ? op_ident(op) : "apply"; /* "add: ..." for lf_add */
    if (!graph_check_args(g, what, 0, NULL)) return NULL;
    if (!known) {
        graph_fail(g, LF_ERR_INVALID, "apply: unknown operator %d", (int)op);
        return NULL;
    }
    lf_node *in[3] = {a, b, c};
    int arity = graph_ops[op].arity;
    for (int k = arity; k < 3; k++)
        if (in[k]) {
            graph_fail(g, LF_ERR_ARITY, "%s: takes %d input%s, got more", what, arity,
                       arity == 1 ? "" : "s");
            return NULL;
        }
    if (!graph_check_args(g, what, arity, in)) return NULL;
    if (!g->op_fns[op] && !(g->op_fns[op] = graph_fn_for_op(g, op))) return NULL;
    return make_map(g, what, g->op_fns[op], arity, in);
}

lf_node *lf_select(lf_graph *g, lf_node *c, lf_node *a, lf_node *b) {
    lf_node *in[3] = {c, a, b};
    if (!graph_check_args(g, "select", 3, in)) return NULL;
    if (!g->op_fns[LF_OP_WHERE] && !(g->op_fns[LF_OP_WHERE] = graph_fn_for_op(g, LF_OP_WHERE)))
        return NULL;
    return make_map(g, "select", g->op_fns[LF_OP_WHERE], 3, in);
}

lf_node *lf_cast(lf_graph *g, lf_node *x, lf_dtype t) {
    if (!graph_check_args(g, "cast", 1, &x) || !check_dtype(g, "cast", t)) return NULL;
    if (!g->cast_fns[t] && !(g->cast_fns[t] = graph_fn_for_cast(g, t))) return NULL;
    return make_map(g, "cast", g->cast_fns[t], 1, &x);
}

/* ---- reductions ------------------------------------------------------------------------------ */

static lf_dtype reduce_dtype(lf_reduce_op op, lf_dtype in) {
    switch (op) {
    case LF_RED_SUM:
    case LF_RED_PROD: /* NumPy: signed (and bool) to i64, unsigned to u64 */
        return graph_dtype_is_float(in) || graph_dtype_is_complex(in) ? in
               : graph_dtypes[in].kind == DTYPE_UINT                 ? LF_U64
                                                                     : LF_I64;
    case LF_RED_MEAN: return graph_dtype_is_float(in) || graph_dtype_is_complex(in) ? in : LF_F64;
    case LF_RED_ARGMIN:
    case LF_RED_ARGMAX: return LF_I64;
    default: return in;
    }
}

bool graph_red_dtype_ok(lf_graph *g, const char *what, lf_reduce_op op, lf_dtype t) {
    if (graph_dtype_is_complex(t) && op != LF_RED_SUM && op != LF_RED_PROD && op != LF_RED_MEAN) {
        graph_fail(g, LF_ERR_DTYPE, "%s %s: complex numbers have no order (%s: sum, prod and mean only)", what,
                   graph_reds[op].text, lf_dtype_name(t));
        return false;
    }
    if (t != LF_U64 || op == LF_RED_SUM || op == LF_RED_PROD || op == LF_RED_MEAN) return true;
    /* the kernels' integer accumulators compare as int64_t */
    graph_fail(g, LF_ERR_DTYPE, "%s %s: dtype u64 is not supported (sum, prod and mean are)", what,
               graph_reds[op].text);
    return false;
}

lf_node *lf_reduce(lf_graph *g, lf_reduce_op op, lf_node *x, int naxes, const int *axes,
                   bool keepdims) {
    if (!graph_check_args(g, "reduce", 1, &x)) return NULL;
    if ((unsigned)op >= LF_NREDS) {
        graph_fail(g, LF_ERR_INVALID, "reduce: unknown reduction %d", (int)op);
        return NULL;
    }
    const char *name = graph_reds[op].text;
    if (!graph_red_dtype_ok(g, "reduce", op, x->dtype)) return NULL;
    uint32_t mask = 0;
    if (!axes && naxes > 0) { /* a forgotten array would reduce everything */
        graph_fail(g, LF_ERR_NULL, "reduce %s: %d axes but the axes array is NULL (0 and NULL reduce all axes)",
                   name, naxes);
        return NULL;
    }
    if (!axes && naxes == 0) {
        mask = (1u << x->ndim) - 1;
    } else {
        if (naxes < 0 || naxes > x->ndim) {
            graph_fail(g, LF_ERR_AXIS, "reduce %s: %d axes for %d dimensions", name, naxes,
                       x->ndim);
            return NULL;
        }
        for (int i = 0; i < naxes; i++) {
            int a = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
            if (a < 0 || a >= x->ndim) {
                graph_fail(g, LF_ERR_AXIS, "reduce %s: axis %d out of range for %d dimensions",
                           name, axes[i], x->ndim);
                return NULL;
            }
            if (mask & (1u << a)) {
                graph_fail(g, LF_ERR_AXIS, "reduce %s: axis %d repeated", name, axes[i]);
                return NULL;
            }
            mask |= 1u << a;
        }
    }
    int64_t shape[LF_MAX_DIMS], count = 1;
    int ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            count *= x->shape[d]; /* a factor of numel, so no overflow */
            if (keepdims) shape[ndim++] = 1;
        } else {
            shape[ndim++] = x->shape[d];
        }
    }
    bool needs_element = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN ||
                         op == LF_RED_ARGMAX;
    if (needs_element && count == 0) {
        /* empty outputs are fine (nothing to compute); empty sets are not */
        int64_t outn = 1;
        for (int d = 0; d < ndim; d++) outn = shape[d] ? outn : 0;
        if (outn != 0) {
            char sa[160];
            graph_fail(g, LF_ERR_SHAPE, "reduce %s: empty set (input shape %s)", name,
                       graph_shape_str(sa, sizeof sa, x->ndim, x->shape));
            return NULL;
        }
    }
    lf_node *n = new_node(g, "reduce", NODE_REDUCE, reduce_dtype(op, x->dtype), ndim, shape, 1, &x);
    if (!n) return NULL;
    n->u.reduce.op = op;
    n->u.reduce.axes = mask;
    n->u.reduce.keepdims = keepdims;
    return n;
}

/* ---- scans ----------------------------------------------------------------------------------- */

lf_node *lf_scan(lf_graph *g, lf_reduce_op op, lf_node *x, int axis, bool exclusive) {
    if (!graph_check_args(g, "scan", 1, &x)) return NULL;
    if ((unsigned)op >= LF_NREDS) {
        graph_fail(g, LF_ERR_INVALID, "scan: unknown reduction %d", (int)op);
        return NULL;
    }
    if (op != LF_RED_SUM && op != LF_RED_PROD && op != LF_RED_MIN && op != LF_RED_MAX) {
        graph_fail(g, LF_ERR_INVALID, "scan: op %s is not supported (sum, prod, min, max)", graph_reds[op].text);
        return NULL;
    }
    if (graph_dtype_is_complex(x->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "scan %s: dtype %s is not supported", graph_reds[op].text, lf_dtype_name(x->dtype));
        return NULL;
    }
    if (!graph_red_dtype_ok(g, "scan", op, x->dtype)) return NULL;
    int a = axis < 0 ? axis + x->ndim : axis;
    if (a < 0 || a >= x->ndim) {
        graph_fail(g, LF_ERR_AXIS, "scan %s: axis %d out of range for %d dimensions", graph_reds[op].text, axis,
                   x->ndim);
        return NULL;
    }
    lf_node *n = new_node(g, "scan", NODE_SCAN, reduce_dtype(op, x->dtype), x->ndim, x->shape, 1, &x);
    if (!n) return NULL;
    n->u.scan.op = op;
    n->u.scan.axis = a;
    n->u.scan.exclusive = exclusive;
    return n;
}

/* NumPy's cumsum(x, dtype=t): x cast to t, scanned, the result in t. A scan
 * of t already has dtype t except sum and prod of bool and i32 (i64, wrapping
 * in int64): their results cast back to t wrap as an accumulation in t would
 * (two's complement: the low 32 bits; bool: a running sum or product of 0/1
 * values is nonzero exactly when NumPy's logical or / and is true). The cast
 * of the result is the scan's elementwise consumer, so it fuses into the
 * scan's kernel. */
lf_node *lf_scan_dtype(lf_graph *g, lf_reduce_op op, lf_node *x, int axis, bool exclusive, lf_dtype t) {
    if (!graph_check_args(g, "scan", 1, &x)) return NULL;
    if ((unsigned)t >= LF_NDTYPES) {
        graph_fail(g, LF_ERR_INVALID, "scan: unknown accumulator dtype %d", (int)t);
        return NULL;
    }
    lf_node *s = lf_scan(g, op, x->dtype == t ? x : lf_cast(g, x, t), axis, exclusive);
    return s && s->dtype != t ? lf_cast(g, s, t) : s;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

lf_status graph_check_outputs(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    if (!g) return graph_error(NULL, LF_ERR_NULL, "eval: graph is NULL");
    lf_ctx *ctx = g->ctx;
    if (g->status != LF_OK) {
        memcpy(ctx->errmsg, g->errmsg, sizeof g->errmsg);
        return g->status;
    }
    if (n < 1) return graph_error(ctx, LF_ERR_INVALID, "eval: %d outputs (at least 1)", n);
    if (!outs || !dsts)
        return graph_error(ctx, LF_ERR_NULL, "eval: %s array is NULL", outs ? "buffer" : "output");
    for (int i = 0; i < n; i++) {
        const lf_node *o = outs[i];
        const lf_buffer *b = dsts[i];
        char sa[160], sb[160];
        if (!o) return graph_error(ctx, LF_ERR_NULL, "eval: output %d is NULL", i);
        if (!graph_owns(g, o))
            return graph_error(ctx, LF_ERR_STATE, "eval: output %d belongs to another graph (or to a freed one)",
                               i);
        if (!b) return graph_error(ctx, LF_ERR_NULL, "eval: buffer %d is NULL", i);
        if (b->ctx != ctx)
            return graph_error(ctx, LF_ERR_STATE, "eval: buffer %d belongs to another context", i);
        for (int j = 0; j < i; j++)
            if (dsts[j] == b)
                return graph_error(ctx, LF_ERR_INVALID,
                                   "eval: outputs %d and %d have the same buffer (each output needs its own)", j, i);
        char ns[GRAPH_NODE_STR_CAP];
        if (b->dtype != o->dtype)
            return graph_error(ctx, LF_ERR_DTYPE, "eval: output %d (%s) has dtype %s, buffer has %s", i,
                               graph_node_str(o, ns, sizeof ns), lf_dtype_name(o->dtype), lf_dtype_name(b->dtype));
        if (b->ndim != o->ndim || memcmp(b->shape, o->shape, (size_t)o->ndim * sizeof *o->shape))
            return graph_error(ctx, LF_ERR_SHAPE, "eval: output %d (%s) has shape %s, buffer has %s", i,
                               graph_node_str(o, ns, sizeof ns), graph_shape_str(sa, sizeof sa, o->ndim, o->shape),
                               graph_shape_str(sb, sizeof sb, b->ndim, b->shape));
    }
    return LF_OK;
}
