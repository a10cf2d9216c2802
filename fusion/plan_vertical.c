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

/* rederive's queue: instances by (node id, seq), the largest first (the
 * order in which a fresh walk processes one kernel's instances). */
static bool inst_after(const inst *a, const inst *b) {
    return a->node->id != b->node->id ? a->node->id > b->node->id : a->seq > b->seq;
}

/* Pushes i into heap q ordered by first; false when out of memory. */
static inline bool inst_heap_push(inst_heap *q, inst *i, bool (*first)(const inst *, const inst *)) {
    if (q->len == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        inst **t = graph_realloc(q->h, cap * sizeof *t);
        if (!t) return false;
        q->h = t;
        q->cap = cap;
    }
    inst **h = q->h;
    size_t c = q->len++;
    while (c > 0 && first(i, h[(c - 1) / 2])) {
        h[c] = h[(c - 1) / 2];
        c = (c - 1) / 2;
    }
    h[c] = i;
    return true;
}

/* Takes the first instance out of non-empty heap q ordered by first. */
static inline inst *inst_heap_pop(inst_heap *q, bool (*first)(const inst *, const inst *)) {
    inst **h = q->h, *top = h[0], *last = h[--q->len];
    size_t c = 0, n = q->len;
    for (;;) {
        size_t a = 2 * c + 1;
        if (a >= n) break;
        if (a + 1 < n && first(h[a + 1], h[a])) a++;
        if (!first(h[a], last)) break;
        h[c] = h[a];
        c = a;
    }
    if (n > 0) h[c] = last;
    return top;
}

/* Node id is evaluated again by the next call of the shared rule. */
static inline void shared_dirty(planner *p, int id) {
    if (p->insdl[id]) return;
    p->insdl[id] = true;
    p->sdl[p->nsdl++] = id;
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
    i->seq = p->iseq++;
    i->creator = p->cur_node;
    i->prev_node = NULL;
    i->next_node = p->first[n->id];
    if (i->next_node) i->next_node->prev_node = i;
    p->first[n->id] = i;
    if (++p->ninst[n->id] == 2 && !p->inml[n->id]) { /* the shared rule's candidates */
        p->inml[n->id] = true;
        p->mlist[p->nmlist++] = n->id;
    }
    p->mdirty[n->id] = true;
    shared_dirty(p, n->id);
    if (p->ipush && !inst_heap_push(&p->iq, i, inst_after)) return NULL;
    return i;
}

inst *fuse_add_inst(planner *p, const lf_node *n, int k, const fuse_map *m) { return add_inst(p, n, k, m); }

/* The stored map equal to m, which was just made in p->iar (nothing
 * allocated there since): m itself, recorded, when it is the first such
 * map, else the earlier one, and m is given back. NULL when m is NULL or
 * when the table cannot grow (out of memory). Instances share these maps:
 * nothing writes to a map once it is made. */
static const fuse_map *own_map(planner *p, fuse_map *m) {
    if (!m) return NULL;
    uint64_t h = fuse_map_hash(0, m);
    for (size_t s = p->mtcap ? h & (p->mtcap - 1) : 0; p->mtcap && p->mtab[s]; s = (s + 1) & (p->mtcap - 1))
        if (fuse_map_equal(p->mtab[s], m)) {
            fuse_map_release(&p->iar, m);
            return p->mtab[s];
        }
    if (p->mtcount >= p->mtcap / 2) { /* grow (the old slots stay in p->iar until it is reset) */
        size_t cap = p->mtcap ? 2 * p->mtcap : 1024;
        const fuse_map **t = fuse_scratch_calloc(&p->iar, cap, sizeof *t);
        if (!t) return NULL;
        for (size_t s = 0; s < p->mtcap; s++) {
            const fuse_map *x = p->mtab[s];
            if (!x) continue;
            size_t d = fuse_map_hash(0, x) & (cap - 1);
            while (t[d]) d = (d + 1) & (cap - 1);
            t[d] = x;
        }
        p->mtab = t;
        p->mtcap = cap;
    }
    size_t s = h & (p->mtcap - 1);
    while (p->mtab[s]) s = (s + 1) & (p->mtcap - 1);
    p->mtab[s] = m;
    p->mtcount++;
    p->maps_stored++;
    return m;
}

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
            if ((f->exprs[e].kind == EXPR_OP && op_expensive(f->exprs[e].op)) || f->exprs[e].kind == EXPR_CALL)
                return false; /* a user function's cost is unknown: taken as expensive */
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
        const fuse_map *m = own_map(p, fuse_map_compose(&p->iar, i->map, &st));
        if (!m || !(i->in[c] = add_inst(p, x, i->kernel, m))) return false;
    }
    return true;
}

/* Takes instance i back: out of the table and its node's list. */
static void remove_inst(planner *p, inst *i) {
    inst **b = &p->htab[i->hash & (p->hcap - 1)];
    while (*b != i) b = &(*b)->next_hash;
    *b = i->next_hash;
    p->hcount--;
    if (i->prev_node) i->prev_node->next_node = i->next_node;
    else p->first[i->node->id] = i->next_node;
    if (i->next_node) i->next_node->prev_node = i->prev_node;
    p->ninst[i->node->id]--;
    p->mdirty[i->node->id] = true;
    shared_dirty(p, i->node->id);
    p->ilive--;
    p->idead++;
    i->dead = true;
}

/* Makes the instances of what instance i computes from (none for a leaf).
 * false: out of memory. */
static bool derive_inputs(planner *p, inst *i) {
    const lf_node *n = i->node;
    int id = n->id;
    p->inst_work++;
    i->leaf = fuse_is_leaf(p, n, i->kernel);
    if (i->leaf) fuse_victim_leaf(p, i);
    if (n->kind == NODE_GATHER && !(p->root[id] && id != i->kernel)) /* plan_gather.c */
        return fuse_gather_instances(p, i);
    if (n->kind == NODE_SCATTER && id == i->kernel) /* its own kernel: plan_scatter.c */
        return fuse_scatter_instances(p, i);
    if (n->kind == NODE_SORT && id == i->kernel) /* its own kernel: plan_sort.c */
        return fuse_sort_instances(p, i);
    if (i->leaf) return true;
    if (n->kind == NODE_REDUCE && !p->root[id]) /* inlined small reduction */
        return small_reduce_instances(p, i);
    if (n->kind == NODE_VIEW) {
        fuse_step st = fuse_view_step(n);
        const fuse_map *m = own_map(p, fuse_map_compose(&p->iar, i->map, &st));
        return m && (i->in[0] = add_inst(p, n->inputs[0], i->kernel, m));
    }
    if (n->kind == NODE_MAP) {
        for (int k = 0; k < n->ninputs; k++) {
            const lf_node *x = n->inputs[k];
            const fuse_map *m = i->map;
            bool same = x->ndim == n->ndim && !memcmp(x->shape, n->shape, (size_t)n->ndim * sizeof *n->shape);
            if (!same) {
                int64_t bs[LF_MAX_DIMS];
                graph_broadcast_strides(x->ndim, x->shape, n->ndim, n->shape, bs);
                fuse_step st = fuse_make_step(n->ndim, n->shape, 0, bs);
                m = own_map(p, fuse_map_compose(&p->iar, i->map, &st));
            }
            if (!m || !(i->in[k] = add_inst(p, x, i->kernel, m))) return false;
        }
        return true;
    }
    if (fuse_is_fold(n)) {
        const lf_node *x = n->inputs[0];
        const fuse_map *m = own_map(p, fuse_map_identity(&p->iar, x));
        return m && (i->in[0] = add_inst(p, x, i->kernel, m));
    }
    return true;
}

/* Processes instance i: makes the instances of what it computes from
 * (none for a leaf) and records i as a user of each (the victim counts'
 * propagation). false: out of memory. */
static bool derive(planner *p, inst *i) {
    if (!derive_inputs(p, i)) return false;
    if (i->leaf) return true;
    for (int a = 0, na = fuse_inst_inputs(p, i); a < na; a++) {
        iuse *u = fuse_scratch_alloc(&p->iar, sizeof *u);
        if (!u) return false;
        u->user = i;
        u->next = i->in[a]->users;
        i->in[a]->users = u;
    }
    return true;
}

/* ---- the victim counts, kept with the lists ---------------------------------------------- */

/* The propagation queue of victim counts: instances by node id, the smallest
 * first (a user after all its inputs). */
static bool id_before(const inst *a, const inst *b) { return a->node->id < b->node->id; }

static bool vq_push(planner *p, inst *i) {
    if (i->vmark == p->vstamp) return true;
    i->vmark = p->vstamp;
    return inst_heap_push(&p->vq, i, id_before);
}

/* Kept instance x is processed again (its node is at or below top): keeps
 * of its users only those above top (the kept part of its kernel's list;
 * the others are taken back or processed again, and record their uses
 * again) and queues them, since x's counts may change. */
static bool keep_users_above(planner *p, inst *x, int top) {
    iuse **u = &x->users;
    while (*u) {
        inst *user = (*u)->user;
        if (user->dead || user->node->id <= top) {
            *u = (*u)->next;
            continue;
        }
        if (!vq_push(p, user)) return false;
        u = &(*u)->next;
    }
    return true;
}

/* The counts of the queued instances, in node order, queuing the users of
 * each whose counts changed: they stop where the capped counts do not
 * change, so a change costs what it reaches, not the kernel's list. */
static bool propagate_counts(planner *p) {
    while (p->vq.len > 0) {
        inst *i = inst_heap_pop(&p->vq, id_before);
        if (i->dead || i->leaf || !fuse_victim_counts(p, i)) continue;
        for (iuse *u = i->users; u; u = u->next)
            if (!u->user->dead && !vq_push(p, u->user)) return false;
    }
    return true;
}

/* Appends the load leaves of l[from..to) (list order) to kernel k's
 * reverse array (plan.h), last first. false: out of memory. */
static bool push_load_leaves(planner *p, int k, inst *const *l, int from, int to) {
    for (int j = to - 1; j >= from; j--) {
        if (!l[j]->leaf || !l[j]->nload) continue;
        if (p->kleafn[k] == p->kleafcap[k]) {
            int cap = p->kleafcap[k] ? 2 * p->kleafcap[k] : 8;
            inst **t = graph_realloc(p->kleaf[k], (size_t)cap * sizeof *t);
            if (!t) return false;
            p->kleaf[k] = t;
            p->kleafcap[k] = cap;
        }
        p->kleaf[k][p->kleafn[k]++] = l[j];
    }
    return true;
}

/* Whether inst i (a map) adds its fn's operations to its kernel (kops):
 * inlined under the roots of `root`. */
static bool counts_ops(const planner *p, const inst *i, const bool *root) {
    const lf_node *n = i->node;
    if (n->kind != NODE_MAP) return false;
    return !root[n->id] || n->id == i->kernel || fuse_contracts_map(p, i->kernel, n);
}

/* The latest fold root among l[from..to) (node order) but kernel k itself,
 * or -1: a backward scan to the first. */
static int list_fold(const planner *p, int k, inst *const *l, int from, int to) {
    for (int j = to - 1; j >= from; j--) {
        const lf_node *x = l[j]->node;
        if (fuse_is_fold(x) && x->id != k && p->root[x->id]) return x->id;
    }
    return -1;
}

/* Wide sharing (plan.c): whether inlined map id is expensive and more than
 * SHARE_CUT kernels inline it, when the walk reaches it (every instance of
 * it is made then, none derived). kseen[k] == id + 1 marks kernel k as
 * counted. */
static bool wide(const planner *p, int id, int *kseen) {
    if (p->root[id] || p->kind[id] != NODE_MAP || p->ninst[id] <= SHARE_CUT || !(p->trans[id] || p->ops[id] > CHEAP_OPS))
        return false;
    int nk = 0;
    for (const inst *i = p->first[id]; i; i = i->next_node)
        if (kseen[i->kernel] != id + 1) {
            kseen[i->kernel] = id + 1;
            if (++nk > SHARE_CUT) return true;
        }
    return false;
}

/* A fresh walk: every instance of every kernel, and the lists. */
static lf_status walk_all(planner *p) {
    int nn = p->nn;
    for (int k = 0; k < nn; k++) {
        graph_free(p->klist[k]);
        p->klist[k] = NULL;
    }
    memset(p->kcount, 0, (size_t)nn * sizeof *p->kcount);
    memset(p->kops64, 0, (size_t)nn * sizeof *p->kops64);
    memset(p->vlen, 0, (size_t)nn * sizeof *p->vlen);
    memset(p->kleafn, 0, (size_t)nn * sizeof *p->kleafn);
    for (int k = 0; k < nn; k++) fuse_kernel_changed(p, k);
    p->mvalid = false; /* the kept merges' loads point at maps in p->iar */
    fuse_scratch_reset(&p->iar);
    p->htab = NULL;
    p->hcap = p->hcount = 0;
    p->mtab = NULL;
    p->mtcap = p->mtcount = 0;
    p->ilive = p->idead = 0;
    memset(p->first, 0, (size_t)nn * sizeof *p->first);
    memset(p->ninst, 0, (size_t)nn * sizeof *p->ninst);
    for (int id = 0; id < nn; id++) p->mdirty[id] = true;
    p->sfull = true; /* the shared rule evaluates every node again */
    int *kseen = p->fusion ? fuse_scratch_calloc(&p->tmp, (size_t)nn, sizeof *kseen) : NULL;
    if (p->fusion && !kseen) return fuse_nomem(p);
    for (int id = nn - 1; id >= 0; id--) {
        p->cur_node = id;
        if (!p->needed[id]) continue;
        const lf_node *n = p->g->nodes[id];
        if (p->fusion && wide(p, id, kseen)) { /* all its instances are known: none derived yet */
            fuse_make_root(p, id);
            p->wcut = true;
        }
        if (p->root[id]) {
            fuse_map *m = fuse_map_identity(&p->iar, n);
            if (!m || !add_inst(p, n, id, m)) return fuse_nomem(p);
        }
        for (inst *i = p->first[id]; i; i = i->next_node)
            if (!derive(p, i)) return fuse_nomem(p);
    }
    /* each kernel's list in node order, newest first within a node */
    for (int id = 0; id < nn; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) {
            p->kcount[i->kernel]++;
            if (counts_ops(p, i, p->root)) p->kops64[i->kernel] += p->fnops[id];
        }
    for (int k = 0; k < nn; k++) {
        p->kops[k] = p->kops64[k] > COST_CAP ? COST_CAP : (int)p->kops64[k];
        if (p->kcount[k] && !(p->klist[k] = graph_malloc((size_t)p->kcount[k] * sizeof **p->klist)))
            return fuse_nomem(p);
        p->kcount[k] = 0;
    }
    for (int id = 0; id < nn; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) p->klist[i->kernel][p->kcount[i->kernel]++] = i;
    for (int k = 0; k < nn; k++) p->kfold[k] = list_fold(p, k, p->klist[k], 0, p->kcount[k]);
    for (int k = 0; k < nn; k++)
        if (!push_load_leaves(p, k, p->klist[k], 0, p->kcount[k])) return fuse_nomem(p);
    for (int k = 0; k < nn; k++) /* the victim counts, inputs first */
        for (int j = 0; j < p->kcount[k]; j++)
            if (!p->klist[k][j]->leaf) fuse_victim_counts(p, p->klist[k][j]);
    return p->vfail ? fuse_nomem(p) : LF_OK;
}

/* Kernel k's instances at nodes top..0 again (top: the highest node of k
 * whose root status changed, or k itself for a new root; plan.h). Reads
 * p->iroot as the roots the list was made under. */
static lf_status rederive(planner *p, int k, int top) {
    inst **l = p->klist[k];
    int cnt = p->kcount[k], pre = 0, fold = cnt ? p->kfold[k] : -1;
    while (pre < cnt && l[pre]->node->id <= top) pre++;
    p->iq.len = p->idlen = 0;
    p->vstamp++;
    p->vq.len = 0;
    for (int j = 0; j < pre; j++) {
        inst *i = l[j];
        if (counts_ops(p, i, p->iroot)) p->kops64[k] -= p->fnops[i->node->id];
        p->inst_work++;
        if (i->creator <= top) {
            remove_inst(p, i);
        } else {
            memset(i->in, 0, sizeof i->in);
            if (!inst_heap_push(&p->iq, i, inst_after) || !keep_users_above(p, i, top)) return fuse_nomem(p);
        }
    }
    if (p->needed[k] && p->root[k] && !cnt) { /* a new kernel: its seed */
        p->cur_node = k;
        fuse_map *m = fuse_map_identity(&p->iar, p->g->nodes[k]);
        if (!m || !add_inst(p, p->g->nodes[k], k, m)) return fuse_nomem(p);
        if (!inst_heap_push(&p->iq, p->first[k], inst_after)) return fuse_nomem(p);
    }
    p->ipush = true;
    while (p->iq.len > 0) {
        inst *i = inst_heap_pop(&p->iq, inst_after);
        if (p->idlen == p->idcap) {
            size_t cap = p->idcap ? 2 * p->idcap : 256;
            inst **t = graph_realloc(p->idone, cap * sizeof *t);
            if (!t) {
                p->ipush = false;
                return fuse_nomem(p);
            }
            p->idone = t;
            p->idcap = cap;
        }
        p->idone[p->idlen++] = i;
        p->cur_node = i->node->id;
        if (!derive(p, i)) {
            p->ipush = false;
            return fuse_nomem(p);
        }
    }
    p->ipush = false;
    /* the list: the processed ones (node descending, newest first within a
       node) by node ascending, then the kept ones above top */
    int n = (int)p->idlen, keep = cnt - pre;
    inst **nl = n + keep ? graph_malloc((size_t)(n + keep) * sizeof *nl) : NULL;
    if (n + keep && !nl) return fuse_nomem(p);
    int w = 0;
    for (int e = n; e > 0;) { /* the group of one node: idone[b..e) */
        int b = e - 1;
        while (b > 0 && p->idone[b - 1]->node == p->idone[e - 1]->node) b--;
        for (int j = b; j < e; j++) {
            nl[w++] = p->idone[j];
            if (counts_ops(p, p->idone[j], p->root)) p->kops64[k] += p->fnops[p->idone[j]->node->id];
        }
        e = b;
    }
    if (keep) memcpy(nl + n, l + pre, (size_t)keep * sizeof *nl);
    graph_free(l);
    p->klist[k] = nl;
    p->kcount[k] = n + keep;
    p->kops[k] = p->kops64[k] > COST_CAP ? COST_CAP : (int)p->kops64[k];
    /* the latest fold root: the old one when it is above top (kept, and its
       root status did not change), else none is kept and it is the
       processed part's */
    p->kfold[k] = keep && fold > top ? fold : list_fold(p, k, nl, 0, n);
    /* the load leaves: the kept ones (above top) stay, the processed part's
       follow them (the array is in reverse list order) */
    while (p->kleafn[k] > 0 && p->kleaf[k][p->kleafn[k] - 1]->node->id <= top) p->kleafn[k]--;
    if (!push_load_leaves(p, k, nl, 0, n)) return fuse_nomem(p);
    /* the victim counts: of the processed part (inputs first), then upward
       into the kept part from the instances it reads that changed */
    for (int j = 0; j < n; j++)
        if (!nl[j]->leaf) fuse_victim_counts(p, nl[j]);
    if (!propagate_counts(p) || p->vfail) return fuse_nomem(p);
    fuse_kernel_changed(p, k);
    return LF_OK;
}

lf_status fuse_find_instances(planner *p) {
    fuse_scratch_reset(&p->tmp);
    int nn = p->nn;
    if (!p->ivalid || p->idead > p->ilive + 4096) {
        p->ivalid = false; /* until the walk completes */
        lf_status st = walk_all(p);
        if (st != LF_OK) return st;
        memcpy(p->iroot, p->root, (size_t)nn * sizeof *p->root);
        p->icur = p->nrchg;
        p->ivalid = true;
        return LF_OK;
    }
    /* the kernels that change and, in each, the highest changed node (+1):
       the nodes whose root status changed are those made roots since the
       last call (p->rchg), visited in node order */
    int *top = p->itop; /* zero outside this call */
    int *ks = fuse_scratch_alloc(&p->tmp, (size_t)nn * sizeof *ks);
    int *chg = fuse_scratch_alloc(&p->tmp, (size_t)nn * sizeof *chg);
    if (!ks || !chg) return fuse_nomem(p);
    int nks = 0, nchg = fuse_new_roots(p, &p->icur, chg);
    for (int ci = 0; ci < nchg; ci++) {
        int c = chg[ci];
        if (p->root[c] == p->iroot[c]) continue;
        for (inst *i = p->first[c]; i; i = i->next_node)
            if (i->kernel != c) {
                if (!top[i->kernel]) ks[nks++] = i->kernel;
                if (c + 1 > top[i->kernel]) top[i->kernel] = c + 1;
            }
        if (p->iroot[c] && p->kcount[c]) { /* no longer a root: its kernel goes */
            for (int j = 0; j < p->kcount[c]; j++) remove_inst(p, p->klist[c][j]);
            graph_free(p->klist[c]);
            p->klist[c] = NULL;
            p->kcount[c] = 0;
            p->kops64[c] = p->kops[c] = 0;
            p->kfold[c] = -1;
            p->vlen[c] = 0;
            p->kleafn[c] = 0;
            fuse_kernel_changed(p, c);
        }
        if (p->root[c] && p->needed[c] && !top[c]) {
            ks[nks++] = c;
            top[c] = c + 1;
        }
    }
    p->ivalid = false; /* until every kernel is done */
    for (int j = 0; j < nks; j++) {
        lf_status st = rederive(p, ks[j], top[ks[j]] - 1);
        if (st != LF_OK) return st;
    }
    for (int j = 0; j < nks; j++) top[ks[j]] = 0;
    for (int ci = 0; ci < nchg; ci++) p->iroot[chg[ci]] = p->root[chg[ci]];
    p->ivalid = true;
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

/* The size (capped at CHEAP_OPS + 1: min(a + min(b, c), c) = min(a + b, c),
 * so the cap changes no "more than CHEAP_OPS") and transcendence of map
 * node id's fused expression from its inputs' (which are final). */
static void map_cost(planner *p, int id, int *ops_out, bool *tr_out) {
    const lf_node *n = p->g->nodes[id];
    const lf_fn *f = n->u.map.fn;
    int64_t ops = 0;
    bool tr = false;
    for (int e = 0; e < f->nexprs; e++) {
        if (f->exprs[e].kind == EXPR_OP) {
            ops++;
            tr |= op_expensive(f->exprs[e].op);
        } else if (f->exprs[e].kind == EXPR_CAST) {
            ops++;
        } else if (f->exprs[e].kind == EXPR_CALL) { /* unknown cost: as a transcendental */
            ops++;
            tr = true;
        }
    }
    for (int k = 0; k < n->ninputs; k++) {
        const lf_node *x = through_views(p, n->inputs[k]);
        if (inlined_map(p, x)) {
            ops += p->ops[x->id];
            tr |= p->trans[x->id];
        }
    }
    *ops_out = ops > CHEAP_OPS + 1 ? CHEAP_OPS + 1 : (int)ops;
    *tr_out = tr;
}

/* The users lists (once): every needed map or view reading a needed node. */
static bool build_users(planner *p) {
    int nn = p->nn;
    p->uoff = fuse_scratch_calloc(&p->keep, (size_t)nn + 1, sizeof *p->uoff);
    p->croot = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->croot);
    p->queued = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->queued);
    p->cheap_heap = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->cheap_heap);
    if (!p->uoff || !p->croot || !p->queued || !p->cheap_heap) return false;
    for (int id = 0; id < nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || (n->kind != NODE_MAP && n->kind != NODE_VIEW)) continue;
        for (int k = 0; k < n->ninputs; k++) p->uoff[n->inputs[k]->id + 1]++;
    }
    for (int id = 0; id < nn; id++) p->uoff[id + 1] += p->uoff[id];
    p->users = fuse_scratch_calloc(&p->keep, (size_t)p->uoff[nn] + 1, sizeof *p->users);
    int *fill = fuse_scratch_calloc(&p->tmp, (size_t)nn, sizeof *fill);
    if (!p->users || !fill) return false;
    for (int id = 0; id < nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || (n->kind != NODE_MAP && n->kind != NODE_VIEW)) continue;
        for (int k = 0; k < n->ninputs; k++) {
            int x = n->inputs[k]->id;
            p->users[p->uoff[x] + fill[x]++] = id;
        }
    }
    return true;
}

static void heap_push(planner *p, int *len, int id) {
    if (p->queued[id]) return;
    p->queued[id] = true;
    int *h = p->cheap_heap, i = (*len)++;
    while (i > 0 && h[(i - 1) / 2] > id) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = id;
}

static int heap_pop(planner *p, int *len) {
    int *h = p->cheap_heap, top = h[0], last = h[--(*len)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *len) break;
        if (c + 1 < *len && h[c + 1] < h[c]) c++;
        if (h[c] >= last) break;
        h[i] = h[c];
        i = c;
    }
    if (*len > 0) h[i] = last;
    p->queued[top] = false;
    return top;
}

/* Size and transcendence of each map node's fused expression, bottom-up:
 * all of them the first time; afterwards, from the nodes whose root status
 * changed, upward through their users (in node order, a heap) as long as a
 * map's values change: the values of a map depend only on its inputs'
 * values and root status (through views), so the others keep theirs. */
bool fuse_compute_costs(planner *p) {
    int nn = p->nn;
    if (!p->costs_valid) {
        if (!p->uoff && !build_users(p)) return false;
        for (int id = 0; id < nn; id++)
            if (p->needed[id] && p->g->nodes[id]->kind == NODE_MAP) map_cost(p, id, &p->ops[id], &p->trans[id]);
        memcpy(p->croot, p->root, (size_t)nn * sizeof *p->root);
        p->ccur = p->nrchg;
        p->costs_valid = true;
        return true;
    }
    int len = 0;
    for (int ci = p->ccur; ci < p->nrchg; ci++) { /* the nodes made roots since the last call */
        int id = p->rchg[ci];
        if (p->croot[id] == p->root[id]) continue;
        p->croot[id] = p->root[id];
        for (int u = p->uoff[id]; u < p->uoff[id + 1]; u++) heap_push(p, &len, p->users[u]);
    }
    p->ccur = p->nrchg;
    while (len > 0) {
        int id = heap_pop(p, &len);
        bool changed = true; /* a view passes its input's change on */
        if (p->g->nodes[id]->kind == NODE_MAP) {
            int ops;
            bool tr;
            map_cost(p, id, &ops, &tr);
            changed = ops != p->ops[id] || tr != p->trans[id];
            p->ops[id] = ops;
            p->trans[id] = tr;
            if (changed) shared_dirty(p, id);
        }
        if (changed)
            for (int u = p->uoff[id]; u < p->uoff[id + 1]; u++) heap_push(p, &len, p->users[u]);
    }
    return true;
}

/* The root of the kernel that root k's code is part of. */
int fuse_unit_of(const planner *p, int k) {
    return p->merged_into[k] >= 0 ? p->merged_into[k] : k;
}

/* Whether node id has more than one instance, kernels merged into one
 * counting as one kernel. */
static int int_asc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static bool shared(const planner *p, int id) {
    if (p->ninst[id] < 2) return false;
    const inst *a = p->first[id];
    if (p->mdirty[id]) { /* whether two maps differ: kept until its instances change */
        bool diff = false;
        for (const inst *b = a->next_node; b && !diff; b = b->next_node) diff = !fuse_map_equal(a->map, b->map);
        ((planner *)p)->mdiff[id] = diff;
        ((planner *)p)->mdirty[id] = false;
    }
    if (p->mdiff[id]) return true;
    for (const inst *b = a->next_node; b; b = b->next_node)
        if (fuse_unit_of(p, b->kernel) != fuse_unit_of(p, a->kernel)) return true;
    return false;
}

/* The candidate inlined beneath node id (a needed map or view; through
 * non-root inputs), -1 for none: found once per call (p->bmark, p->bwit) by
 * a walk down with an explicit stack (room for p->ioff[p->nn] + 1 entries: a
 * node is pushed once per edge into it at most, since a node comes back to
 * the top only once all it pushed are done). */
static int cand_below(planner *p, int id, int *stack) {
    int top = 0;
    stack[top++] = id;
    while (top > 0) {
        int x = stack[top - 1];
        p->shared_work++;
        if (p->bmark[x] == p->bstamp) { /* done */
            top--;
            continue;
        }
        int found = -1;
        bool pending = false;
        for (int k = p->ioff[x]; k < p->ioff[x + 1] && found < 0; k++) {
            int y = p->iids[k];
            if (p->root[y]) continue;
            if (p->cand[y]) found = y;
            else if (p->needed[y] && (p->kind[y] == NODE_MAP || p->kind[y] == NODE_VIEW)) {
                if (p->bmark[y] != p->bstamp) {
                    stack[top++] = y;
                    pending = true;
                } else if (p->bwit[y] >= 0) found = p->bwit[y];
            }
        }
        if (pending && found < 0) continue; /* its inputs first */
        p->bwit[x] = found;
        p->bmark[x] = p->bstamp;
        top--;
    }
    return p->bwit[id];
}

/* Whether node id may be a candidate: an inlined expensive map with two
 * instances or more (mlist keeps these; one that stops being one for a
 * root or cheapness never comes back: roots are only added by the rounds
 * and a new root only makes the maps above it cheaper). */
static bool listed(const planner *p, int id) {
    return p->needed[id] && p->kind[id] == NODE_MAP && !p->root[id] && p->ninst[id] > 1 &&
           (p->trans[id] || p->ops[id] > CHEAP_OPS);
}

/* Whether node id is a candidate of the rule now: listed, with instances in
 * different kernels or maps. Keeps ulist (the nodes whose candidacy rests
 * on the units: every instance at one map). */
static bool eval_cand(planner *p, int id) {
    p->shared_work++;
    if (!listed(p, id)) return false;
    if (!p->inml[id]) {
        p->inml[id] = true;
        p->mlist[p->nmlist++] = id;
    }
    bool c = shared(p, id);
    if (!p->mdiff[id] && !p->inul[id]) {
        p->inul[id] = true;
        p->ulist[p->nulist++] = id;
    }
    return c;
}

/* Records that candidate x has witness w (x is blocked while w is a
 * candidate). false: out of memory. */
static bool add_witness(planner *p, int x, int w) {
    if (p->nsedge == p->capsedge) {
        size_t cap = p->capsedge ? 2 * p->capsedge : 1024;
        int *a = graph_realloc(p->sedge_x, cap * sizeof *a);
        if (!a) return false;
        p->sedge_x = a;
        int *b = graph_realloc(p->sedge_next, cap * sizeof *b);
        if (!b) return false;
        p->sedge_next = b;
        p->capsedge = cap;
    }
    p->swit[x] = w;
    p->sedge_x[p->nsedge] = x;
    p->sedge_next[p->nsedge] = p->wfirst[w];
    p->wfirst[w] = (int)p->nsedge++;
    return true;
}

/* Queues x for this call's check for a candidate beneath (once). */
static void queue_check(planner *p, int x, int *q, int *nq) {
    if (p->sbmark[x] == p->bstamp) return;
    p->sbmark[x] = p->bstamp;
    q[(*nq)++] = x;
}

/* Sets node id's candidacy to c: a node that stops being a candidate
 * queues its dependents (their witness is gone), a new one itself. */
static void set_cand(planner *p, int id, bool c, int *q, int *nq) {
    bool old = p->cand[id];
    p->cand[id] = c;
    if (old && !c) {
        for (int e = p->wfirst[id]; e >= 0; e = p->sedge_next[e]) {
            int x = p->sedge_x[e];
            if (p->swit[x] == id && p->cand[x]) queue_check(p, x, q, nq);
        }
        p->wfirst[id] = -1;
    } else if (c && !old) {
        queue_check(p, id, q, nq);
    }
}

/* Makes roots of the expensive shared nodes that have no other such node
 * beneath them. Returns how many (-1: out of memory).
 *
 * Kept across rounds (plan.h): a full evaluation (the first call, after a
 * fresh instance walk, or when another rule made a root since the last
 * call: such a root may cut the path down to a witness) evaluates every
 * node of mlist and checks every candidate for one beneath; otherwise only
 * the dirty nodes (instances or costs changed, or made roots by the last
 * call) and ulist are evaluated, and only the new candidates and the
 * dependents of nodes that stopped being candidates are checked. The
 * others keep their answer: a checked candidate's witness is still a
 * candidate, and the path down to it has no new root, since this rule's
 * roots are candidates with no candidate beneath and every node on that
 * path had the witness beneath it (candidacy of an unchanged node is
 * unchanged: it reads only its root status, instances, costs and, with one
 * map, the units). So the roots made are those a full evaluation makes. */
int fuse_add_shared_roots(planner *p) {
    int *q = fuse_scratch_alloc(&p->tmp, (size_t)p->nn * sizeof *q);
    if (!q) return -1;
    int nq = 0;
    p->bstamp++;
    if (p->sfull || p->nrchg != p->scur) {
        p->nsedge = 0;
        for (int j = 0; j < p->nulist; j++) p->inul[p->ulist[j]] = false;
        p->nulist = 0;
        for (int j = 0; j < p->nsdl; j++) p->insdl[p->sdl[j]] = false;
        p->nsdl = 0;
        int w = 0;
        for (int j = 0; j < p->nmlist; j++) {
            int id = p->mlist[j];
            p->wfirst[id] = -1;
            bool c = eval_cand(p, id);
            p->cand[id] = c;
            if (c) queue_check(p, id, q, &nq);
            if (!listed(p, id)) {
                p->inml[id] = false;
                continue;
            }
            p->mlist[w++] = id;
        }
        p->nmlist = w;
        p->sfull = false;
    } else {
        for (int j = 0; j < p->nsdl; j++) {
            int id = p->sdl[j];
            p->insdl[id] = false;
            set_cand(p, id, eval_cand(p, id), q, &nq);
        }
        p->nsdl = 0;
        int w = 0;
        for (int j = 0; j < p->nulist; j++) { /* the units may have changed */
            int id = p->ulist[j];
            set_cand(p, id, eval_cand(p, id), q, &nq);
            if (listed(p, id) && !p->mdiff[id]) p->ulist[w++] = id;
            else p->inul[id] = false;
        }
        p->nulist = w;
    }
    /* the queued candidates with no other candidate inlined beneath them */
    int *stack = fuse_scratch_alloc(&p->tmp, ((size_t)p->ioff[p->nn] + 1) * sizeof *stack);
    int *make = fuse_scratch_alloc(&p->tmp, (size_t)(nq ? nq : 1) * sizeof *make);
    if (!stack || !make) return -1;
    int nmake = 0;
    for (int j = 0; j < nq; j++) {
        int x = q[j];
        if (!p->cand[x]) continue;
        int wit = cand_below(p, x, stack);
        if (wit < 0) make[nmake++] = x;
        else if (!add_witness(p, x, wit)) return -1;
    }
    qsort(make, (size_t)nmake, sizeof *make, int_asc);
    for (int j = 0; j < nmake; j++) {
        fuse_make_root(p, make[j]);
        shared_dirty(p, make[j]); /* no longer a candidate: its dependents are checked */
    }
    p->scur = p->nrchg;
    return nmake;
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
    for (int j = 0; j < p->kleafn[k]; j++) { /* the load leaves of its list, in order */
        const inst *i = fuse_load_leaf(p, k, j);
        pload l;
        if (!fuse_leaf_load(p, i, -1, &l)) continue;
        if (fuse_find_load(ls, n, &l) >= 0) continue;
        *nbufs += fuse_new_buffer(ls, n, &l);
        ls[n++] = l;
        if (!fuse_loads_fit(n, *nbufs)) break;
    }
    return n;
}
