/* graph/sort.c: lf_sort, lf_argsort, lf_topk and lf_argtopk, the sort geometry and
 * sort keys every evaluator shares, and the reference evaluation.
 *
 * A sort node (NODE_SORT) has one input x and keeps the first k entries of
 * each row's stable sort along an axis: x's values (x's dtype) or their
 * positions along the axis (i64). Its shape is x's with extent k on the
 * axis; lf_sort and lf_argsort keep k = extent, lf_topk makes a values node
 * and lf_argtopk an indices node with descending = largest (the planner
 * runs the two of one x, axis, k and order as one kernel: plan_sort.c).
 *
 * The order is NumPy's total order through graph_sort_key: a key is an
 * unsigned integer whose numeric order is the element order (every NaN the
 * largest, -0.0 equal to +0.0), and descending is the key's complement
 * within its width, so that a stable sort by key ascending is the order of
 * lazyfuse.h in both directions, ties in position order. Values are moved
 * as raw bytes, never through their keys, so a -0.0 stays -0.0 and a NaN
 * keeps its sign and payload.
 *
 * The reference evaluation is a bottom-up merge sort of (key, position)
 * pairs per row: stable, O(n log n), 32 bytes of scratch per element of the
 * longest row, reused across rows.
 */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

/* ---- builders ----------------------------------------------------------------------- */

/* Checks x and the axis for `what` (the call's name); the axis normalized
 * into *a. Records the error on g and returns false on a problem. */
static bool check_sort_args(lf_graph *g, const char *what, lf_node *x, int axis, int *a) {
    if (!graph_check_args(g, what, 1, &x)) return false;
    int n = axis < 0 ? axis + x->ndim : axis;
    if (n < 0 || n >= x->ndim) {
        graph_fail(g, LF_ERR_AXIS, "%s: axis %d out of range for %d dimensions", what, axis, x->ndim);
        return false;
    }
    *a = n;
    return true;
}

lf_node *lf_sort(lf_graph *g, lf_node *x, int axis, bool descending) {
    int a;
    if (!check_sort_args(g, "sort", x, axis, &a)) return NULL;
    return graph_new_sort(g, "sort", x, a, x->shape[a], descending, false);
}

lf_node *lf_argsort(lf_graph *g, lf_node *x, int axis, bool descending) {
    int a;
    if (!check_sort_args(g, "argsort", x, axis, &a)) return NULL;
    return graph_new_sort(g, "argsort", x, a, x->shape[a], descending, true);
}

/* The first k entries of x's sort along axis (largest first when largest):
 * values or positions. `what` names the call in messages. */
static lf_node *topk(lf_graph *g, const char *what, lf_node *x, int64_t k, int axis, bool largest, bool indices) {
    int a;
    if (!check_sort_args(g, what, x, axis, &a)) return NULL;
    if (k < 0 || k > x->shape[a]) {
        char s[160];
        graph_fail(g, LF_ERR_SHAPE, "%s: k = %lld out of range 0..%lld for axis %d of x %s", what, (long long)k,
                   (long long)x->shape[a], a, graph_shape_str(s, sizeof s, x->ndim, x->shape));
        return NULL;
    }
    return graph_new_sort(g, what, x, a, k, largest, indices);
}

lf_node *lf_topk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest) {
    return topk(g, "topk", x, k, axis, largest, false);
}

lf_node *lf_argtopk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest) {
    return topk(g, "argtopk", x, k, axis, largest, true);
}

/* ---- geometry and keys -------------------------------------------------------------- */

void graph_sort_geom_of(const lf_node *n, graph_sort_geom *gm) {
    const lf_node *x = n->inputs[0];
    int axis = n->u.sort.axis;
    memset(gm, 0, sizeof *gm);
    gm->n = x->shape[axis];
    gm->k = n->u.sort.k;
    gm->inner = 1;
    for (int d = axis + 1; d < x->ndim; d++) gm->inner *= x->shape[d];
    gm->nrows = gm->inner;
    for (int d = 0; d < axis; d++) gm->nrows *= x->shape[d];
    gm->x_stride = gm->out_stride = gm->inner;
}

int64_t graph_sort_row_base(const graph_sort_geom *gm, int64_t r, bool out) {
    if (gm->inner == 0) return 0; /* no rows */
    int64_t o = r / gm->inner, i = r % gm->inner;
    return o * (out ? gm->k : gm->n) * gm->inner + i;
}

uint64_t graph_sort_key(lf_dtype t, lf_scalar v, bool descending) {
    uint64_t key;
    bool wide = graph_sort_key_wide(t);
    switch (graph_dtypes[t].sort_key) {
    case SORT_KEY_FLOAT: /* the stored bits; sign folded; -0.0 as +0.0; one NaN */
        if (wide) {
            double f = v.f;
            if (isnan(f)) key = GRAPH_SORT_NAN_KEY64;
            else {
                if (f == 0) f = 0.0; /* -0.0 as +0.0 */
                memcpy(&key, &f, sizeof key);
                key = (key & (UINT64_C(1) << 63)) ? ~key : key | (UINT64_C(1) << 63);
            }
        } else {
            float f = (float)v.f;
            uint32_t b;
            if (isnan(f)) b = GRAPH_SORT_NAN_KEY32;
            else {
                if (f == 0) f = 0.0f;
                memcpy(&b, &f, sizeof b);
                b = (b & UINT32_C(0x80000000)) ? ~b : b | UINT32_C(0x80000000);
            }
            key = b;
        }
        break;
    case SORT_KEY_SIGNED: /* the key's own sign bit flipped (narrower values sign-extend) */
        key = wide ? (uint64_t)v.i ^ (UINT64_C(1) << 63) : (uint32_t)v.i ^ UINT32_C(0x80000000);
        break;
    case SORT_KEY_BOOL:
    default: key = v.i != 0; break;
    }
    if (descending) key = wide ? ~key : ~key & UINT32_MAX;
    return key;
}

/* ---- the reference evaluation -------------------------------------------------------- */

typedef struct sort_pair {
    uint64_t key;  /* graph_sort_key of the element */
    int64_t pos;   /* its position along the axis */
} sort_pair;

/* Stable sort of a[0..n) by key, with tmp of n entries: insertion sort of
 * runs of RUN, then bottom-up merges (ties take the left run's first).
 * Returns the array holding the result (a or tmp). */
enum { RUN = 16 };
static sort_pair *merge_sort(sort_pair *a, sort_pair *tmp, int64_t n) {
    for (int64_t lo = 0; lo < n; lo += RUN) {
        int64_t hi = lo + RUN < n ? lo + RUN : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            sort_pair p = a[i];
            int64_t j = i;
            for (; j > lo && a[j - 1].key > p.key; j--) a[j] = a[j - 1];
            a[j] = p;
        }
    }
    sort_pair *src = a, *dst = tmp;
    for (int64_t w = RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            if (mid == hi || src[mid - 1].key <= src[mid].key) { /* already in order */
                memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *src);
                continue;
            }
            while (i < mid && j < hi) dst[o++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        sort_pair *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

lf_status graph_eval_sort(const lf_node *n, const void *x, void *out) {
    graph_sort_geom gm;
    graph_sort_geom_of(n, &gm);
    if (gm.nrows == 0 || gm.k == 0) return LF_OK; /* nothing to write (n == 0 gives k == 0) */
    lf_dtype t = n->inputs[0]->dtype;
    size_t es = lf_dtype_size(t);
    bool desc = n->u.sort.descending, idx = n->u.sort.indices;
    char ns[GRAPH_NODE_STR_CAP];
    if ((uint64_t)gm.n > SIZE_MAX / (2 * sizeof(sort_pair)))
        return graph_error(n->graph->ctx, LF_ERR_NOMEM, "%s: out of memory (scratch for a row of %lld)",
                           graph_node_str(n, ns, sizeof ns), (long long)gm.n);
    size_t bytes = 2 * (size_t)gm.n * sizeof(sort_pair);
    sort_pair *pairs = graph_malloc(bytes);
    if (!pairs)
        return graph_error(n->graph->ctx, LF_ERR_NOMEM, "%s: out of memory (%zu bytes of scratch)",
                           graph_node_str(n, ns, sizeof ns), bytes);
    const char *xs = x;
    char *os = out;
    for (int64_t r = 0; r < gm.nrows; r++) {
        int64_t xb = graph_sort_row_base(&gm, r, false), ob = graph_sort_row_base(&gm, r, true);
        for (int64_t j = 0; j < gm.n; j++) {
            pairs[j].key = graph_sort_key(t, graph_scalar_load(x, t, xb + j * gm.x_stride), desc);
            pairs[j].pos = j;
        }
        const sort_pair *s = merge_sort(pairs, pairs + gm.n, gm.n);
        for (int64_t j = 0; j < gm.k; j++) {
            int64_t o = ob + j * gm.out_stride;
            if (idx) ((int64_t *)out)[o] = s[j].pos;
            else memcpy(os + (size_t)o * es, xs + (size_t)(xb + s[j].pos * gm.x_stride) * es, es);
        }
    }
    graph_free(pairs);
    return LF_OK;
}
