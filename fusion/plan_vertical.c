/* fusion/plan_vertical.c: pass 1 of a planning round, vertical fusion: the
 * instances of every inlined node in every kernel (a node used at one index
 * map of one kernel is one instance), the multiple-consumer rule (recompute
 * a cheap shared node, make an expensive one a root) and the loads each
 * kernel reads. The rules are stated in plan.c's top comment ("Vertical
 * elementwise", "MULTIPLE CONSUMERS").
 */
#include "fusion/plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- pass 1: instances ------------------------------------------------------------------- */

static uint64_t inst_hash(const lf_node *n, int k, const fuse_map *m) {
    uint64_t h = fuse_map_hash(fuse_hash_mix(fuse_hash_mix(0, (uint64_t)n->id), (uint64_t)k), m);
    return h ^ (h >> 29);
}

/* Doubles the instance table (scratch: the old buckets stay until the round ends). */
static bool grow_table(planner *p) {
    size_t cap = p->hcap ? 2 * p->hcap : 1024;
    inst **t = fuse_scratch_calloc(&p->iar, cap, sizeof *t);
    if (!t) return false;
    for (size_t b = 0; b < p->hcap; b++)
        for (inst *i = p->htab[b], *next; i; i = next) {
            next = i->next_hash;
            i->next_hash = t[i->hash & (cap - 1)];
            t[i->hash & (cap - 1)] = i;
        }
    p->htab = t;
    p->hcap = cap;
    return true;
}

/* The instance of n in kernel k at map m, made if new (a hash table: a node
 * read at many index maps costs no scan). */
static inst *add_inst(planner *p, const lf_node *n, int k, const fuse_map *m) {
    uint64_t h = inst_hash(n, k, m);
    for (inst *i = p->hcap ? p->htab[h & (p->hcap - 1)] : NULL; i; i = i->next_hash)
        if (i->hash == h && i->node == n && i->kernel == k && fuse_map_equal(i->map, m)) return i;
    if (p->hcount >= p->hcap / 2 && !grow_table(p)) return NULL;
    inst *i = fuse_scratch_calloc(&p->iar, 1, sizeof *i);
    if (!i) return NULL;
    i->hash = h;
    i->next_hash = p->htab[h & (p->hcap - 1)];
    p->htab[h & (p->hcap - 1)] = i;
    p->hcount++;
    p->ilive++;
    i->node = n;
    i->kernel = k;
    i->map = m;
    i->expr = -1;
    i->next_node = p->first[n->id];
    p->first[n->id] = i;
    i->next_all = p->all;
    p->all = i;
    p->ninst[n->id]++;
    return i;
}

inst *fuse_add_inst(planner *p, const lf_node *n, int k, const fuse_map *m) { return add_inst(p, n, k, m); }

_Static_assert(SMALL_REDUCE <= LF_MAX_ARGS, "an inlined small reduction keeps its inputs in inst.in[]");

static bool op_expensive(lf_op op);

/* A small reduction's expensive input that is at most 1/SMALL_CUT of the
 * reduction's own size is made a root so that the rest can be inlined
 * (plan.c's rule "Small reductions"). */
enum { SMALL_CUT = 8, MAX_CUTS = 8 };

/* Whether the elementwise expression computing x (through views and maps,
 * as a tree) is cheap: at most CHEAP_OPS operations and casts, none
 * transcendental. Roots and marked nodes are loads. With cut, an inlined
 * map of at most small elements whose own expression is not cheap is a load
 * too, added to cut[] (at most MAX_CUTS, each once). Walked with an explicit
 * stack; past it, not cheap. */
static bool cheap_input(const planner *p, const lf_node *x, int64_t small, const lf_node **cut, int *ncut) {
    const lf_node *stack[64];
    int top = 0, ops = 0;
    stack[top++] = x;
    while (top > 0) {
        const lf_node *n = stack[--top];
        if (n->kind == NODE_VIEW) {
            stack[top++] = n->inputs[0];
            continue;
        }
        if (n->kind != NODE_MAP || p->root[n->id] || n->materialize) continue; /* a load */
        if (cut && n != x && n->numel <= small && !cheap_input(p, n, 0, NULL, NULL)) {
            int c = 0;
            while (c < *ncut && cut[c] != n) c++;
            if (c == *ncut && (*ncut)++ == MAX_CUTS) return false;
            cut[c] = n;
            continue;
        }
        const lf_fn *f = n->u.map.fn;
        for (int e = 0; e < f->nexprs; e++) {
            if (f->exprs[e].kind == EXPR_OP && op_expensive(f->exprs[e].op)) return false;
            ops += f->exprs[e].kind == EXPR_OP || f->exprs[e].kind == EXPR_CAST;
        }
        if (ops > CHEAP_OPS || top + n->ninputs > 64) return false;
        for (int k = 0; k < n->ninputs; k++) stack[top++] = n->inputs[k];
    }
    return true;
}

bool fuse_small_reduce(planner *p, const lf_node *n) {
    if (n->kind != NODE_REDUCE || (n->u.reduce.op != LF_RED_SUM && n->u.reduce.op != LF_RED_PROD)) return false;
    const lf_node *x = n->inputs[0];
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++)
        if (n->u.reduce.axes & (1u << d)) count *= x->shape[d];
    if (count < 1 || count > SMALL_REDUCE) return false;
    /* a cheap input only: a consumer that reads the sum broadcast computes it
       again at every one of its positions (the compiler may hoist it); its
       small expensive parts are stored instead (together at most 1/SMALL_CUT
       of the sum, which would be stored otherwise) */
    const lf_node *cut[MAX_CUTS];
    int ncut = 0;
    if (!cheap_input(p, x, n->numel / SMALL_CUT, cut, &ncut)) return false;
    int64_t total = 0;
    for (int c = 0; c < ncut; c++) total += cut[c]->numel;
    if (total > n->numel / SMALL_CUT) return false;
    for (int c = 0; c < ncut; c++) p->root[cut[c]->id] = true;
    return true;
}

int fuse_inst_inputs(const planner *p, const inst *i) {
    const lf_node *n = i->node;
    if (n->kind != NODE_REDUCE || p->root[n->id]) return n->ninputs;
    return (int)(n->inputs[0]->numel / (n->numel ? n->numel : 1));
}

/* An inlined small reduction's instance: x at each reduced position, in
 * row-major order of the reduced axes (the reference's fold order), each
 * map taking the reduction's output element to x's element there. */
static bool small_reduce_instances(planner *p, inst *i) {
    const lf_node *n = i->node, *x = n->inputs[0];
    int64_t dense[LF_MAX_DIMS], strides[LF_MAX_DIMS] = {0}, pos[LF_MAX_DIMS] = {0};
    graph_contiguous_strides(x->ndim, x->shape, dense);
    uint32_t mask = n->u.reduce.axes;
    for (int d = 0, o = 0; d < x->ndim; d++) { /* the output's axes: x's kept ones (and reduced ones kept as 1) */
        bool red = mask & (1u << d);
        if (!red) strides[o++] = dense[d];
        else if (n->u.reduce.keepdims) strides[o++] = 0;
    }
    int cnt = fuse_inst_inputs(p, i);
    for (int c = 0; c < cnt; c++) {
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++)
            if (mask & (1u << d)) off += pos[d] * dense[d];
        for (int d = x->ndim - 1; d >= 0; d--) { /* next reduced position, row-major */
            if (!(mask & (1u << d))) continue;
            if (++pos[d] < x->shape[d]) break;
            pos[d] = 0;
        }
        fuse_step st = fuse_make_step(n->ndim, n->shape, off, strides);
        const fuse_map *m = fuse_map_compose(&p->iar, i->map, &st);
        if (!m || !(i->in[c] = add_inst(p, x, i->kernel, m))) return false;
    }
    return true;
}

/* Takes back every instance made since node top was processed (they are
 * the newest), so that nodes top..0 can be processed again. */
static void rewind_instances(planner *p, int top) {
    inst *stop = p->ck[top];
    while (p->all != stop) {
        inst *i = p->all;
        p->all = i->next_all;
        inst **b = &p->htab[i->hash & (p->hcap - 1)];
        while (*b != i) b = &(*b)->next_hash;
        *b = i->next_hash;
        p->hcount--;
        assert(p->first[i->node->id] == i);
        p->first[i->node->id] = i->next_node;
        p->ninst[i->node->id]--;
        p->ilive--;
        p->idead++;
    }
    for (int id = 0; id <= top; id++) /* kept instances made by nodes above top */
        for (inst *i = p->first[id]; i; i = i->next_node) memset(i->in, 0, sizeof i->in);
}

/* Walks the needed nodes top-down, giving each root a seed instance and
 * propagating every inlined instance to its inputs; then lists each
 * kernel's instances in node order.
 *
 * Incremental across rounds: what processing node id does depends only on
 * the roots at or above id (inputs have smaller ids than their users) and
 * on the instances made before it, so when the roots changed at most at
 * node top since the last round, the instances made before top was
 * processed are exactly those a fresh walk makes: the newer ones are taken
 * back (rewind_instances) and nodes top..0 walked again. The records taken
 * back stay in p->iar until it is reset, which happens when they outnumber
 * the live ones. */
lf_status fuse_find_instances(planner *p) {
    fuse_scratch_free(&p->tmp);
    int nn = p->nn, top = nn - 1;
    if (p->ivalid) {
        top = -1;
        for (int id = nn - 1; id >= 0 && top < 0; id--)
            if (p->root[id] != p->iroot[id]) top = id;
        if (p->idead > p->ilive + 4096) top = nn - 1;
    }
    /* the instances of nodes top..0 leave their kernels' lists and counts */
    int *lowold = fuse_scratch_calloc(&p->tmp, (size_t)nn, sizeof *lowold);
    int *lownew = fuse_scratch_calloc(&p->tmp, (size_t)nn, sizeof *lownew);
    if (!lowold || !lownew) return fuse_nomem(p);
    for (int id = 0; p->ivalid && top < nn - 1 && id <= top; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) {
            int k = i->kernel;
            p->kcount[k]--;
            lowold[k]++;
            if (i->node->kind == NODE_MAP && !(p->iroot[id] && id != k)) p->kops64[k] -= p->fnops[id];
        }
    if (!p->ivalid || top == nn - 1) {
        for (int k = 0; k < nn; k++) {
            graph_free(p->klist[k]);
            p->klist[k] = NULL;
        }
        memset(p->kcount, 0, (size_t)nn * sizeof *p->kcount);
        memset(p->kops64, 0, (size_t)nn * sizeof *p->kops64);
        fuse_scratch_free(&p->iar);
        p->all = NULL;
        p->htab = NULL;
        p->hcap = p->hcount = 0;
        p->ilive = p->idead = 0;
        memset(p->first, 0, (size_t)nn * sizeof *p->first);
        memset(p->ninst, 0, (size_t)nn * sizeof *p->ninst);
        top = nn - 1;
    } else if (top >= 0) {
        rewind_instances(p, top);
    }
    p->ivalid = false; /* until this walk completes */
    memcpy(p->iroot, p->root, (size_t)nn * sizeof *p->root);
    for (int id = top; id >= 0; id--) {
        p->ck[id] = p->all;
        if (!p->needed[id]) continue;
        const lf_node *n = p->g->nodes[id];
        if (p->root[id]) {
            fuse_map *m = fuse_map_identity(&p->iar, n);
            if (!m || !add_inst(p, n, id, m)) return fuse_nomem(p);
        }
        for (inst *i = p->first[id]; i; i = i->next_node) {
            if (n->kind == NODE_GATHER && !(p->root[id] && id != i->kernel)) { /* plan_gather.c */
                if (!fuse_gather_instances(p, i)) return fuse_nomem(p);
                continue;
            }
            if (n->kind == NODE_SCATTER && id == i->kernel) { /* its own kernel: plan_scatter.c */
                if (!fuse_scatter_instances(p, i)) return fuse_nomem(p);
                continue;
            }
            if (n->kind == NODE_SORT && id == i->kernel) { /* its own kernel: plan_sort.c */
                if (!fuse_sort_instances(p, i)) return fuse_nomem(p);
                continue;
            }
            if (fuse_is_leaf(p, n, i->kernel)) continue;
            if (n->kind == NODE_REDUCE && !p->root[id]) { /* inlined small reduction */
                if (!small_reduce_instances(p, i)) return fuse_nomem(p);
                continue;
            }
            if (n->kind == NODE_VIEW) {
                fuse_step st = fuse_view_step(n);
                const fuse_map *m = fuse_map_compose(&p->iar, i->map, &st);
                if (!m || !(i->in[0] = add_inst(p, n->inputs[0], i->kernel, m))) return fuse_nomem(p);
            } else if (n->kind == NODE_MAP) {
                for (int k = 0; k < n->ninputs; k++) {
                    const lf_node *x = n->inputs[k];
                    const fuse_map *m = i->map;
                    bool same = x->ndim == n->ndim &&
                                !memcmp(x->shape, n->shape, (size_t)n->ndim * sizeof *n->shape);
                    if (!same) {
                        int64_t bs[LF_MAX_DIMS];
                        graph_broadcast_strides(x->ndim, x->shape, n->ndim, n->shape, bs);
                        fuse_step st = fuse_make_step(n->ndim, n->shape, 0, bs);
                        m = fuse_map_compose(&p->iar, i->map, &st);
                    }
                    if (!m || !(i->in[k] = add_inst(p, x, i->kernel, m))) return fuse_nomem(p);
                }
            } else if (fuse_is_fold(n)) {
                const lf_node *x = n->inputs[0];
                fuse_map *m = fuse_map_identity(&p->iar, x);
                if (!m || !(i->in[0] = add_inst(p, x, i->kernel, m))) return fuse_nomem(p);
            }
        }
    }
    p->ivalid = true;
    /* a kernel's list: its instances of nodes 0..top in node order (without
     * sorting), then the kept ones of the nodes above top */
    for (int id = 0; id <= top; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) {
            lownew[i->kernel]++;
            if (i->node->kind == NODE_MAP && !fuse_is_leaf(p, i->node, i->kernel)) p->kops64[i->kernel] += p->fnops[id];
        }
    int *fill = lowold; /* reused: per touched kernel, the next position */
    for (int k = 0; k < nn; k++) {
        if (!lowold[k] && !lownew[k]) continue;
        int keep = p->kcount[k], cnt = keep + lownew[k];
        inst **l = NULL;
        if (cnt) {
            l = graph_malloc((size_t)cnt * sizeof *l);
            if (!l) return fuse_nomem(p);
            if (keep) memcpy(l + lownew[k], p->klist[k] + lowold[k], (size_t)keep * sizeof *l);
        }
        graph_free(p->klist[k]);
        p->klist[k] = l;
        p->kcount[k] = cnt;
        p->kops[k] = p->kops64[k] > COST_CAP ? COST_CAP : (int)p->kops64[k];
        fill[k] = 0;
    }
    for (int id = 0; id <= top; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) p->klist[i->kernel][fill[i->kernel]++] = i;
    return LF_OK;
}
/* ---- the multiple-consumer rule --------------------------------------------------------- */

static bool op_expensive(lf_op op) {
    return op == LF_OP_POW || (graph_ops[op].typing == OPTY_FLOAT && op != LF_OP_FMA);
}

/* The node a use of x really computes: through non-root views. */
static const lf_node *through_views(const planner *p, const lf_node *x) {
    while (x->kind == NODE_VIEW && !p->root[x->id]) x = x->inputs[0];
    return x;
}

static bool inlined_map(const planner *p, const lf_node *x) {
    return x->kind == NODE_MAP && !p->root[x->id];
}

/* Size and transcendence of each map node's fused expression, bottom-up. */
void fuse_compute_costs(planner *p) {
    for (int id = 0; id < p->nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || n->kind != NODE_MAP) continue;
        const lf_fn *f = n->u.map.fn;
        int64_t ops = 0;
        bool tr = false;
        for (int e = 0; e < f->nexprs; e++) {
            if (f->exprs[e].kind == EXPR_OP) {
                ops++;
                tr |= op_expensive(f->exprs[e].op);
            } else if (f->exprs[e].kind == EXPR_CAST) {
                ops++;
            }
        }
        for (int k = 0; k < n->ninputs; k++) {
            const lf_node *x = through_views(p, n->inputs[k]);
            if (inlined_map(p, x)) {
                ops += p->ops[x->id];
                tr |= p->trans[x->id];
            }
        }
        p->ops[id] = ops > COST_CAP ? COST_CAP : (int)ops;
        p->trans[id] = tr;
    }
}

/* The root of the kernel that root k's code is part of. */
int fuse_unit_of(const planner *p, int k) {
    return p->merged_into[k] >= 0 ? p->merged_into[k] : k;
}

/* Whether node id has more than one instance, kernels merged into one
 * counting as one kernel. */
static bool shared(const planner *p, int id) {
    if (p->ninst[id] < 2) return false;
    const inst *a = p->first[id];
    for (const inst *b = a->next_node; b; b = b->next_node)
        if (fuse_unit_of(p, b->kernel) != fuse_unit_of(p, a->kernel) || !fuse_map_equal(a->map, b->map)) return true;
    return false;
}

/* Makes roots of the expensive shared nodes that have no other such node
 * beneath them. Returns how many. */
int fuse_add_shared_roots(planner *p) {
    int nn = p->nn, added = 0;
    for (int id = 0; id < nn; id++) {
        const lf_node *n = p->g->nodes[id];
        p->cand[id] = p->needed[id] && inlined_map(p, n) && p->ninst[id] > 1 &&
                      (p->trans[id] || p->ops[id] > CHEAP_OPS) && shared(p, id);
    }
    /* below[id]: a candidate is inlined beneath id */
    bool *below = fuse_scratch_calloc(&p->tmp, (size_t)nn, sizeof *below);
    if (!below) return -1;
    for (int id = 0; id < nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || (n->kind != NODE_MAP && n->kind != NODE_VIEW)) continue;
        for (int k = 0; k < n->ninputs; k++) {
            const lf_node *x = n->inputs[k];
            if (p->root[x->id]) continue;
            if (p->cand[x->id] || below[x->id]) below[id] = true;
        }
    }
    for (int id = 0; id < nn; id++)
        if (p->cand[id] && !below[id]) {
            p->root[id] = true;
            added++;
        }
    return added;
}
/* ---- loads ------------------------------------------------------------------------------- */

/* The load a leaf instance stands for (false for constants). grp is the root
 * of the reduction kernel whose fn is being built or checked (-1 for none):
 * its reductions are read as FUSE_SRC_ACC. */
bool fuse_leaf_load(const planner *p, const inst *i, int grp, pload *out) {
    const lf_node *n = i->node;
    if (n->kind == NODE_CONST) return false;
    out->node = n;
    out->map = i->map;
    if (n->kind == NODE_INPUT) {
        out->src = FUSE_SRC_SLOT;
        out->key = n->u.buffer;
    } else if (grp >= 0 && fuse_is_fold(n) && p->root[n->id] && n->id != i->kernel &&
               fuse_unit_of(p, n->id) == grp) {
        out->src = FUSE_SRC_ACC;
        out->key = n;
        out->map = NULL;
    } else if (p->root[n->id] && n->id != i->kernel) {
        out->src = FUSE_SRC_SLOT;
        out->key = n;
    } else if (n->kind == NODE_GATHER) { /* a gather used in place (plan_gather.c) */
        out->src = FUSE_SRC_GATHER;
        out->key = n;
    } else { /* NODE_IOTA or NODE_RANDOM computed in place */
        out->src = FUSE_SRC_IOTA;
        out->key = n;
    }
    return true;
}

int fuse_find_load(const pload *ls, int n, const pload *l) {
    for (int j = 0; j < n; j++)
        if (ls[j].src == l->src && ls[j].key == l->key &&
            (l->src == FUSE_SRC_ACC || fuse_map_equal(ls[j].map, l->map)))
            return j;
    return -1;
}

bool fuse_new_buffer(const pload *ls, int n, const pload *l) {
    for (int j = 0; j < n; j++) {
        if (ls[j].src != l->src || ls[j].key != l->key) continue;
        if (l->src == FUSE_SRC_SLOT || l->src == FUSE_SRC_ACC || fuse_map_equal(ls[j].map, l->map)) return false;
    }
    return true;
}

int fuse_count_buffers(const pload *ls, int n) {
    int m = 0;
    for (int j = 0; j < n; j++) m += fuse_new_buffer(ls, j, &ls[j]);
    return m;
}

bool fuse_loads_fit(int nloads, int nbufs) {
    return nloads <= GRAPH_MAX_PARAMS && nbufs <= LF_MAX_ARGS;
}

/* Distinct loads of kernel k's instances (skipping a reduction's seed) into
 * ls (room for GRAPH_MAX_PARAMS + 1), and their buffers into *nbufs; stops
 * as soon as they no longer fit (fuse_loads_fit). */
int fuse_count_loads(const planner *p, int k, pload *ls, int *nbufs) {
    int n = 0;
    *nbufs = 0;
    for (int j = 0; j < p->kcount[k]; j++) {
        const inst *i = p->klist[k][j];
        pload l;
        if (!fuse_is_leaf(p, i->node, k) || !fuse_leaf_load(p, i, -1, &l)) continue;
        if (fuse_find_load(ls, n, &l) >= 0) continue;
        *nbufs += fuse_new_buffer(ls, n, &l);
        ls[n++] = l;
        if (!fuse_loads_fit(n, *nbufs)) break;
    }
    return n;
}
