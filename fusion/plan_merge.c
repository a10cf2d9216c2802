/* fusion/plan_merge.c: forming kernels (the rules of plan.c's top comment
 * "reduce -> map (epilogue)", "reduce -> broadcast -> map (row kernels)",
 * "Horizontal / multi-output" (an elementwise kernel and a reduction over
 * its space included: absorb_space), "Splitting", and the size cap): every needed
 * root joins an earlier kernel or starts its own, within the caps on loads,
 * stores, passes and operations.
 *
 * The load caps (fuse_loads_fit): every fn of a kernel reads at most
 * LF_MAX_ARGS distinct buffers (a slot read at several index maps, the taps
 * of a stencil, counts once) and at most GRAPH_MAX_PARAMS distinct loads.
 * Load lists have room for GRAPH_MAX_PARAMS + 1 entries; only a root's own
 * list (start_unit) goes past the caps, and then the kernel is split.
 */
#include "fusion/plan.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- forming kernels: epilogues, row kernels, horizontal merges ---------------------------- */

/* A hash of load l's buffer (its source and identity, not its index map):
 * the key of the index of parked kernels. */
static uint64_t buffer_hash(const pload *l) {
    uint64_t h = fuse_hash_mix(fuse_hash_mix(0, (uint64_t)l->src), (uint64_t)(uintptr_t)l->key);
    return h ^ (h >> 29);
}

/* nkey of an instance whose loads read more than one buffer (fuse_find_victims). */
static const char key_mixed;
#define KEY_MIXED ((const void *)&key_mixed)

/* The map through which a reduce -> broadcast -> map reads reduction r at
 * each point of r's input space: r's element for the point's outer index. */
static fuse_step outer_step(const lf_node *r) {
    const lf_node *in = r->inputs[0];
    int64_t cs[LF_MAX_DIMS], st[LF_MAX_DIMS] = {0};
    graph_contiguous_strides(r->ndim, r->shape, cs);
    for (int d = 0, j = 0; d < in->ndim; d++) {
        bool red = r->u.reduce.axes & (1u << d);
        if (!red) st[d] = cs[j];
        if (!red || r->u.reduce.keepdims) j++;
    }
    return fuse_make_step(in->ndim, in->shape, 0, st);
}

static bool map_is_step(const fuse_map *m, const fuse_step *st) {
    return m->nsteps == 1 && fuse_step_equal(&m->steps[0], st);
}

static bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* ---- the undo log: merges resumed from the lowest changed root ---------------------------- */

/* One write to the merge state: n old bytes at addr, kept at mbuf[off]. */
typedef struct mrec {
    void *addr;
    size_t n, off;
} mrec;

/* Records the n bytes at addr before the merge step being made changes them
 * (p->mfail when out of memory: fuse_plan_merges reports it). */
static void mlog(planner *p, void *addr, size_t n) {
    if (p->mfail) return;
    if (p->nmrec == p->capmrec) {
        size_t cap = p->capmrec ? 2 * p->capmrec : 1024;
        mrec *t = graph_realloc(p->mrecs, cap * sizeof *t);
        if (!t) {
            p->mfail = true;
            return;
        }
        p->mrecs = t;
        p->capmrec = cap;
    }
    if (p->nmbuf + n > p->capmbuf) {
        size_t cap = p->capmbuf ? 2 * p->capmbuf : 1 << 16;
        while (cap < p->nmbuf + n) cap *= 2;
        unsigned char *t = graph_realloc(p->mbuf, cap);
        if (!t) {
            p->mfail = true;
            return;
        }
        p->mbuf = t;
        p->capmbuf = cap;
    }
    memcpy(p->mbuf + p->nmbuf, addr, n);
    p->mrecs[p->nmrec++] = (mrec){addr, n, p->nmbuf};
    p->nmbuf += n;
}

/* Assigns v to lvalue lv of the merge state, logging its old value. */
#define MSET(p, lv, v) (mlog((p), &(lv), sizeof(lv)), (lv) = (v))

/* Restores the merge state as it was when the log held nrec records. */
static void undo_to(planner *p, size_t nrec) {
    while (p->nmrec > nrec) {
        const mrec *r = &p->mrecs[--p->nmrec];
        memcpy(r->addr, p->mbuf + r->off, r->n);
        p->nmbuf = r->off;
    }
}

/* Merge records live in p->mar (counted in p->mbytes). */
static void *merge_alloc(planner *p, size_t bytes) {
    p->mbytes += bytes;
    return fuse_scratch_alloc(&p->mar, bytes);
}

struct unit;
static void save_unit(planner *p, struct unit *u);

/* What root e would bring to kernel u in role r. */
typedef struct scan {
    pload ls[GRAPH_MAX_PARAMS + 1]; /* its distinct loads (ACC included) */
    int n;
    bool ok;                       /* everything it reads is available to u */
    bool acc;                      /* it reads u's reductions */
    int phase;                     /* the latest pass of those, -1 */
} scan;

/* A root's leaf loads, read as if it joined no reduction kernel (grp -1 of
 * fuse_leaf_load: a reduction root is a slot at its index map), distinct
 * and in the order of their first instance in the kernel's list: what every
 * scan_root of the root has in common. Made lazily and kept across rounds
 * until the root's list changes (they depend only on the list and the root
 * status of its nodes, and a change of either changes the list:
 * fuse_kernel_changed): a scan extends it only as far as it reads
 * (sum_entry), so the instances walked for a root are at most its kernel's
 * list and at most what the furthest scan of it needs. A scan keeps at most
 * GRAPH_MAX_PARAMS + 1 distinct loads and joining needs every reduction of
 * u that it reads at one map (the ACC map check), so a root with more than
 * GRAPH_MAX_PARAMS + 1 distinct slot loads fits no kernel: `over`, and the
 * list stops there. */
enum { SUM_TAB = 256 };
typedef struct leafsum {
    int n;                              /* entries so far */
    int next;                           /* next load leaf of the kernel's list to read */
    bool over;                          /* more than GRAPH_MAX_PARAMS + 1 distinct loads */
    pload ls[GRAPH_MAX_PARAMS + 1];
    signed char tab[SUM_TAB];           /* entries by hash of (source, identity, map), -1 empty */
} leafsum;
_Static_assert(GRAPH_MAX_PARAMS + 1 < 128 && SUM_TAB > 2 * (GRAPH_MAX_PARAMS + 1), "leafsum's table");
_Static_assert(LF_MAX_ARGS <= GRAPH_MAX_PARAMS, "retire: fewer loads than LF_MAX_ARGS are below both caps");

static void leafsum_clear(leafsum *s) {
    s->n = s->next = 0;
    s->over = false;
    memset(s->tab, -1, sizeof s->tab);
}

static leafsum *leaf_summary(planner *p, int e) {
    if (p->lsum[e]) return p->lsum[e];
    leafsum *s = fuse_scratch_alloc(&p->keep, sizeof *s);
    if (!s) return NULL;
    leafsum_clear(s);
    p->lsum[e] = s;
    return s;
}

/* A root's own loads (start_unit): its distinct leaf loads in list order,
 * up to the first that passes a cap. */
typedef struct ownloads {
    bool valid;
    int n;
    pload ls[GRAPH_MAX_PARAMS + 1];
} ownloads;

void fuse_kernel_changed(planner *p, int k) {
    p->kfits[k] = false;
    if (p->kown[k]) p->kown[k]->valid = false;
    if (p->lsum[k]) leafsum_clear(p->lsum[k]);
}

/* Whether root e's summary has entry j, reading e's instances up to it. */
static bool sum_entry(planner *p, int e, leafsum *s, int j) {
    while (s->n <= j && !s->over && s->next < p->kleafn[e]) { /* the load leaves of its list, in order */
        const inst *i = fuse_load_leaf(p, e, s->next++);
        pload l;
        p->scan_work++;
        if (!fuse_leaf_load(p, i, -1, &l)) continue;
        uint64_t h = fuse_hash_mix(fuse_hash_mix(0, (uint64_t)l.src), (uint64_t)(uintptr_t)l.key);
        size_t b = (size_t)(h ^ (h >> 29)) & (SUM_TAB - 1); /* by source and identity: equal maps compared */
        bool dup = false;
        for (; s->tab[b] >= 0 && !dup; b = (b + 1) & (SUM_TAB - 1)) {
            const pload *o = &s->ls[s->tab[b]];
            p->scan_work++;
            dup = o->src == l.src && o->key == l.key && fuse_map_equal(o->map, l.map);
        }
        if (dup) continue;
        if (s->n > GRAPH_MAX_PARAMS) {
            s->over = true;
        } else {
            s->tab[b] = (signed char)s->n;
            s->ls[s->n++] = l;
        }
    }
    return j < s->n;
}

/* What root e would bring to kernel u in role r. Reads e's leaf summary:
 * each distinct load is checked (the checks depend only on the node and
 * the map) and a reduction root of u becomes an ACC load (one per
 * reduction, at its first place), as a walk over e's instances with
 * fuse_leaf_load(.., u->host) would find them. sc->ok false: out of memory
 * too (the caller cannot tell; leaf_summary's allocation is tiny). */
static void scan_root(planner *p, int e, const unit *u, role r, scan *sc) {
    const lf_node *en = p->g->nodes[e];
    sc->n = 0;
    sc->ok = true;
    sc->acc = false;
    sc->phase = -1;
    leafsum *s = leaf_summary(p, e);
    uint64_t work = 0;
    if (!s) goto fail;
    for (int j = 0; sum_entry(p, e, s, j); j++) {
        pload l = s->ls[j];
        const lf_node *x = l.node;
        work++;
        if (u->red && l.src == FUSE_SRC_SLOT && x->kind != NODE_INPUT && fuse_is_fold(x) &&
            fuse_unit_of(p, x->id) == u->host) { /* fuse_leaf_load's ACC case (x is a root, not e) */
            fuse_step want = r == ROLE_EPI ? fuse_identity_step(en->ndim, en->shape) : outer_step(x);
            if (!map_is_step(l.map, &want)) goto fail;
            sc->acc = true;
            if (p->pass[x->id] > sc->phase) sc->phase = p->pass[x->id];
            l.src = FUSE_SRC_ACC;
            l.map = NULL;
            bool seen = false; /* the same reduction at another map: the check above failed */
            for (int t = 0; t < sc->n && !seen; t++) seen = sc->ls[t].src == FUSE_SRC_ACC && sc->ls[t].key == l.key;
            work += (uint64_t)sc->n;
            if (seen) continue;
        } else if (l.src == FUSE_SRC_SLOT && x->kind != NODE_INPUT && p->host[x->id] >= u->host) {
            goto fail; /* computed at or after u's place */
        } else if (l.src == FUSE_SRC_GATHER) {
            /* the gather reads x and idx from memory: neither may be computed
               in u (a reduction root of u is an ACC value, not yet stored) */
            for (int k = 0; k < 2; k++)
                if (x->inputs[k]->kind != NODE_INPUT && p->host[x->inputs[k]->id] >= u->host) goto fail;
        }
        if (sc->n > GRAPH_MAX_PARAMS) goto fail;
        sc->ls[sc->n++] = l;
    }
    if (s->over) goto fail;
    goto done;
fail:
    sc->ok = false;
done:
    p->scan_work += work;
    if (work > p->scan_max) p->scan_max = work;
}

/* A kernel root below which root e's scans fail: every slot load of e that
 * is not an input is computed by its kernel p->host[x] (its unit), and
 * scan_root fails for a kernel u before that one (a reduction of u is read
 * as ACC only when u is its kernel), so kernels with a smaller root need no
 * scan. Over e's whole summary (extended to its end here: at most
 * GRAPH_MAX_PARAMS + 2 distinct loads, once per change of e's list), so
 * that a root which the cheap checks of a try reject before any scan (the
 * size cap, the shape) does not try every open kernel from the first one
 * each round (a diamond chain's output did: O(open kernels) a round);
 * skipping those kernels changes no plan, their scans fail. -1 when it
 * reads no such slot; INT_MAX when no scan of e can pass (over the caps,
 * or out of memory). */
static int lowest_host(planner *p, int e) {
    leafsum *s = leaf_summary(p, e);
    if (!s) return INT_MAX;
    sum_entry(p, e, s, GRAPH_MAX_PARAMS + 1); /* the whole summary (or over) */
    if (s->over) return INT_MAX;
    int h = -1;
    for (int j = 0; j < s->n; j++) {
        const pload *l = &s->ls[j];
        if (l->src == FUSE_SRC_SLOT && l->node->kind != NODE_INPUT && p->host[l->node->id] > h)
            h = p->host[l->node->id];
    }
    return h;
}

/* The first open kernel whose root is at least h, from open kernel u on
 * (the open list is in root order; NULL when u is): found through p->unit
 * at the needed roots from h (the kernels between h and root e, whose
 * kernels all have smaller roots) or along the list, whichever gets there
 * first. */
static unit *skip_to(const planner *p, unit *u, int h, int e) {
    /* two walks in step, the first to finish answers: the open list from u
       (its units below h), and the needed roots from h to e (every open
       unit's host is one, and every open unit is below e); so the cost is
       the shorter of the two, not the open units below h (a chain of
       diamonds keeps O(nodes) of them) */
    for (int id = h;;) {
        if (!u || u->host >= h) return u;
        u = u->next;
        if ((id = fuse_next_root(p, id)) >= e) return NULL;
        unit *v = p->unit[id];
        if (v && v->host == id && !v->parked && !v->closed) return v;
        id++;
    }
}

/* Loads of the union of ls[0..n) and sc's (ACC too unless skip_acc), or -1
 * when that union plus `extra` loads of their own buffers (an epilogue's
 * reductions) passes a cap of fuse_loads_fit. */
static int union_fits(const pload *ls, int n, const scan *sc, bool skip_acc, int extra) {
    int m = n, b = fuse_count_buffers(ls, n);
    for (int j = 0; j < sc->n; j++) {
        const pload *l = &sc->ls[j];
        if ((skip_acc && l->src == FUSE_SRC_ACC) || fuse_find_load(ls, n, l) >= 0) continue;
        m++;
        b += fuse_new_buffer(ls, n, l) && fuse_new_buffer(sc->ls, j, l);
        if (!fuse_loads_fit(m + extra, b + extra)) return -1;
    }
    return fuse_loads_fit(m + extra, b + extra) ? m : -1;
}

/* Adds sc's loads to list ls (room for GRAPH_MAX_PARAMS + 1; the union fits). */
static void union_add(pload *ls, int *n, const scan *sc, bool skip_acc) {
    for (int j = 0; j < sc->n; j++) {
        if (skip_acc && sc->ls[j].src == FUSE_SRC_ACC) continue;
        if (fuse_find_load(ls, *n, &sc->ls[j]) < 0) ls[(*n)++] = sc->ls[j];
    }
}

/* Whether sc shares a slot or iota load (source and index map) with ls. */
static bool shares(const pload *ls, int n, const scan *sc) {
    for (int j = 0; j < sc->n; j++)
        if (sc->ls[j].src != FUSE_SRC_ACC && fuse_find_load(ls, n, &sc->ls[j]) >= 0) return true;
    return false;
}

static pload *new_list(planner *p) {
    return merge_alloc(p, (GRAPH_MAX_PARAMS + 1) * sizeof(pload));
}

static void save_unit(planner *p, unit *u) { mlog(p, u, sizeof *u); }

/* Whether root e's code fits in kernel u under FUSE_MAX_OPS. */
static bool ops_fit(const planner *p, int e, const unit *u) {
    return (int64_t)u->nops + p->kops[e] <= FUSE_MAX_OPS;
}

/* Takes u off the open list. */
static void unlink_open(planner *p, unit *u) {
    save_unit(p, u);
    if (u->prev) save_unit(p, u->prev);
    if (u->next) save_unit(p, u->next);
    if (u->prev) u->prev->next = u->next;
    else p->units = u->next;
    if (u->next) u->next->prev = u->prev;
    else p->units_tail = u->prev;
    u->next = u->prev = NULL;
}

/* Puts u at the end of the open list (which is in root order). */
static void append_open(planner *p, unit *u) {
    save_unit(p, u);
    if (p->units_tail) save_unit(p, p->units_tail);
    u->prev = p->units_tail;
    u->next = NULL;
    if (p->units_tail) p->units_tail->next = u;
    else p->units = u;
    p->units_tail = u;
}

/* Keeps the open list short: a kernel with FUSE_MAX_STORES roots is closed;
 * an elementwise one whose body is at a load cap (LF_MAX_ARGS buffers or
 * GRAPH_MAX_PARAMS loads) is parked, indexed by its buffers: a root can
 * still join only if its first load reads one of them (a new buffer or, at
 * GRAPH_MAX_PARAMS, any new load would pass the cap). The order in which
 * join_space tries kernels is unchanged. false: out of memory. */
static bool retire(planner *p, unit *u) {
    if (u->closed) return true;
    save_unit(p, u);
    if (u->nroots >= FUSE_MAX_STORES) {
        if (!u->parked) unlink_open(p, u);
        u->closed = true;
        return true;
    }
    if (u->parked || u->red) return true;
    if (u->npl[0] < LF_MAX_ARGS) return true; /* its buffers are fewer still: below both caps */
    int nb = fuse_count_buffers(u->pl[0], u->npl[0]);
    if (u->npl[0] < GRAPH_MAX_PARAMS && nb < LF_MAX_ARGS) return true;
    if ((p->pcount + (size_t)u->npl[0]) * 2 > p->pcap) {
        size_t cap = p->pcap ? 2 * p->pcap : 256;
        while ((p->pcount + (size_t)u->npl[0]) * 2 > cap) cap *= 2;
        p->mbytes += cap * sizeof(park *);
        park **t = fuse_scratch_calloc(&p->mar, cap, sizeof *t);
        if (!t) return false;
        for (size_t b = 0; b < p->pcap; b++)
            for (park *x = p->pidx[b], *next; x; x = next) {
                next = x->next;
                MSET(p, x->next, t[x->hash & (cap - 1)]);
                t[x->hash & (cap - 1)] = x;
            }
        p->pidx = t;
        p->pcap = cap;
    }
    for (int j = 0; j < u->npl[0]; j++) {
        const pload *l = &u->pl[0][j];
        bool seen = false; /* one entry per buffer: the unit is a candidate once */
        for (int t = 0; t < j && !seen; t++) seen = u->pl[0][t].src == l->src && u->pl[0][t].key == l->key;
        if (seen) continue;
        park *x = merge_alloc(p, sizeof *x);
        if (!x) return false;
        x->load = l;
        x->hash = buffer_hash(x->load);
        x->u = u;
        x->next = p->pidx[x->hash & (p->pcap - 1)];
        MSET(p, p->pidx[x->hash & (p->pcap - 1)], x);
        p->pcount++;
    }
    unlink_open(p, u);
    u->parked = true;
    u->next = p->parked; /* the parked list: zero-load roots try them all */
    p->parked = u;
    return true;
}

static void join(planner *p, int e, unit *u, role r) {
    save_unit(p, u);
    u->nroots++;
    u->nops += p->kops[e];
    MSET(p, p->merged_into[e], u->host);
    MSET(p, p->host[e], u->host);
    MSET(p, p->role[e], (unsigned char)r);
}

/* Reduction r joins an earlier reduction kernel over its space and axes as
 * a later pass (it reads the kernel's results) or in its first pass
 * (horizontal). Returns 1 if it joined, 0 if not, -1 out of memory. */
static int join_reduce(planner *p, int r) {
    const lf_node *rn = p->g->nodes[r], *in = rn->inputs[0];
    scan sc;
    for (unit *u = skip_to(p, p->units, lowest_host(p, r), r); u; u = skip_to(p, u->next, lowest_host(p, r), r)) {
        if (!u->red || !fuse_scan_allows(p, r, u, ROLE_PASS) || u->mask != rn->u.reduce.axes ||
            u->nroots >= FUSE_MAX_STORES ||
            !same_shape(u->ndim, u->shape, in->ndim, in->shape) || !ops_fit(p, r, u))
            continue;
        scan_root(p, r, u, ROLE_PASS, &sc);
        if (!sc.ok) continue;
        int q = sc.phase + 1;
        /* the epilogue reads every reduction (ACC) and its own loads */
        if (q >= FUSE_MAX_PASSES || q > u->npasses ||
            !fuse_loads_fit(u->nreds + 1 + u->nepi, u->nreds + 1 + fuse_count_buffers(u->epi, u->nepi)))
            continue;
        bool link = sc.acc || (p->output[r] >= 0 && u->out_red);
        for (int k = 0; k < u->npasses && !link; k++) link = shares(u->pl[k], u->npl[k], &sc);
        if (!link && u->row) link = shares(u->row, u->nrow, &sc);
        if (!link) continue;
        save_unit(p, u);
        if (q == u->npasses) {
            if (!(u->pl[q] = new_list(p))) return -1;
            u->npl[q] = 0;
            u->npasses++;
        }
        if (union_fits(u->pl[q], u->npl[q], &sc, false, 0) < 0) {
            if (u->npl[q] == 0) u->npasses--; /* the new pass stays empty */
            continue;
        }
        union_add(u->pl[q], &u->npl[q], &sc, false);
        u->nreds++;
        u->out_red |= p->output[r] >= 0;
        join(p, r, u, ROLE_PASS);
        MSET(p, p->pass[r], q);
        return retire(p, u) ? 1 : -1;
    }
    return 0;
}

/* Elementwise root e joins the reduction kernel of the latest reduction it
 * reads as an epilogue. */
static int join_epilogue(planner *p, int e) {
    const lf_node *en = p->g->nodes[e];
    int r = p->kfold[e]; /* kept with the list (plan_vertical.c, list_fold) */
    if (r < 0) return 0;
    unit *u = p->unit[fuse_unit_of(p, r)];
    if (!u || !u->red || !fuse_scan_allows(p, e, u, ROLE_EPI) || u->nroots >= FUSE_MAX_STORES || !ops_fit(p, e, u) ||
        !same_shape(en->ndim, en->shape, u->out->ndim, u->out->shape))
        return 0;
    scan sc;
    scan_root(p, e, u, ROLE_EPI, &sc);
    if (!sc.ok) return 0;
    if (union_fits(u->epi, u->nepi, &sc, true, u->nreds) < 0) return 0;
    save_unit(p, u);
    if (!u->epi && !(u->epi = new_list(p))) return -1; /* the first epilogue */
    union_add(u->epi, &u->nepi, &sc, true);
    join(p, e, u, ROLE_EPI);
    return retire(p, u) ? 1 : -1;
}

/* Elementwise root e joins the earliest kernel over its space: a reduction
 * kernel's row pass (reduce -> broadcast -> map, or a sibling of the row
 * pass), or an elementwise kernel's body (a sibling). 1 joined, 0 not, -1
 * out of memory. */
static int cmp_host(const void *a, const void *b) {
    int x = (*(unit *const *)a)->host, y = (*(unit *const *)b)->host;
    return (x > y) - (x < y);
}

/* Whether elementwise root e (scanned into sc for u) can join u's body or
 * row pass, and if so joins it. 1 joined, 0 not, -1 out of memory. */
static int try_space(planner *p, int e, unit *u) {
    const lf_node *en = p->g->nodes[e];
    bool out = p->output[e] >= 0;
    scan sc;
    if (u->nroots >= FUSE_MAX_STORES || !same_shape(u->ndim, u->shape, en->ndim, en->shape) ||
        !ops_fit(p, e, u) || !fuse_scan_allows(p, e, u, u->red ? ROLE_ROW : ROLE_BODY))
        return 0;
    scan_root(p, e, u, u->red ? ROLE_ROW : ROLE_BODY, &sc);
    if (!sc.ok) return 0;
    pload *ls = u->red ? u->row : u->pl[0];
    int n = u->red ? u->nrow : u->npl[0];
    bool link = sc.acc || (ls && (shares(ls, n, &sc) || (out && u->out_row)));
    if (!link || union_fits(ls, ls ? n : 0, &sc, false, 0) < 0) return 0;
    save_unit(p, u);
    if (!ls) { /* the row pass starts */
        if (!(u->row = new_list(p))) return -1;
        u->nrow = 0;
    }
    if (u->red) union_add(u->row, &u->nrow, &sc, false);
    else union_add(u->pl[0], &u->npl[0], &sc, false);
    u->out_row |= out;
    join(p, e, u, u->red ? ROLE_ROW : ROLE_BODY);
    return retire(p, u) ? 1 : -1;
}

/* Elementwise root e joins the earliest kernel over its space: a reduction
 * kernel's row pass (reduce -> broadcast -> map, or a sibling of the row
 * pass), or an elementwise kernel's body (a sibling). The kernels tried are
 * the open ones and the parked ones that read e's first load's buffer (all
 * parked ones when e has no load), in root order. 1 joined, 0 not, -1 out
 * of memory. */
static int join_space(planner *p, int e) {
    pload first;
    bool has = false;
    for (int j = 0; j < p->kleafn[e] && !has; j++) /* the load leaves of its list, in order */
        has = fuse_leaf_load(p, fuse_load_leaf(p, e, j), -1, &first);
    int nc = 0;
    unit **cand = NULL;
    if (p->parked) {
        int cap = 0;
        if (has) {
            uint64_t h = buffer_hash(&first);
            for (park *x = p->pidx[h & (p->pcap - 1)]; x; x = x->next) cap++;
        } else {
            for (unit *u = p->parked; u; u = u->next) cap++;
        }
        if (cap && !(cand = fuse_scratch_alloc(&p->tmp, (size_t)cap * sizeof *cand))) return -1;
        if (has) {
            uint64_t h = buffer_hash(&first);
            for (park *x = p->pidx[h & (p->pcap - 1)]; x; x = x->next)
                if (!x->u->closed && x->hash == h && x->load->src == first.src && x->load->key == first.key)
                    cand[nc++] = x->u;
        } else {
            for (unit *u = p->parked; u; u = u->next)
                if (!u->closed) cand[nc++] = u;
        }
        if (nc > 1) qsort(cand, (size_t)nc, sizeof *cand, cmp_host);
    }
    /* kernels before lowest_host would fail the scan: not tried */
    unit *u = p->units;
    int c = 0;
    for (;;) {
        int low = lowest_host(p, e);
        u = skip_to(p, u, low, e);
        while (c < nc && cand[c]->host < low) c++;
        if (!u && c >= nc) break;
        unit *t;
        if (u && (c >= nc || u->host < cand[c]->host)) {
            t = u;
            u = u->next; /* before t can leave the open list */
        } else {
            t = cand[c++];
        }
        int r = try_space(p, e, t);
        if (r) return r;
    }
    return 0;
}

/* Whether the roots of elementwise kernel u (root ids below r) can move to
 * r's place in the kernel order: no kernel before r, other than u, loads one
 * of them, and r itself does not (it would read them from memory in the
 * pass that writes them). */
static bool movable(const planner *p, const unit *u, int r) {
    for (int m = u->host; m < r; m++) {
        if (!p->needed[m] || !p->root[m] || fuse_unit_of(p, m) != u->host) continue;
        for (const inst *i = p->first[m]; i; i = i->next_node)
            if (fuse_unit_of(p, i->kernel) != u->host && i->kernel <= r) return false;
    }
    return true;
}

/* Reduction r, about to start a kernel of its own, takes over the earliest
 * open elementwise kernel over its input's space that shares a load with
 * it: the kernel becomes r's, computing r in pass 0, and its roots become
 * ROLE_POS roots of that pass, stored at each position (fuse_store.pos). So
 * an elementwise output and a reduction over the same input (the demo's pdf
 * and sum of squares, a normalized copy and its total) are one pass over
 * that input. Not for a contraction (its own loop nest: plan_contract.c),
 * nor when r reads a root of the kernel or another kernel before r does
 * (movable). 1 joined, 0 not, -1 out of memory. */
static int absorb_space(planner *p, int r) {
    const lf_node *rn = p->g->nodes[r], *in = rn->inputs[0];
    if (rn->kind != NODE_REDUCE || graph_contraction(rn, NULL)) return 0;
    for (unit *u = skip_to(p, p->units, lowest_host(p, r), r); u; u = skip_to(p, u->next, lowest_host(p, r), r)) {
        if (u->red || u->scan || u->parked || u->closed || u->nroots >= FUSE_MAX_STORES ||
            !same_shape(u->ndim, u->shape, in->ndim, in->shape) || !ops_fit(p, r, u) ||
            !fuse_scan_allows(p, r, u, ROLE_PASS))
            continue;
        scan sc;
        scan_root(p, r, u, ROLE_PASS, &sc);
        if (!sc.ok || sc.acc || !shares(u->pl[0], u->npl[0], &sc) || union_fits(u->pl[0], u->npl[0], &sc, false, 0) < 0 ||
            !movable(p, u, r))
            continue;
        int h0 = u->host;
        save_unit(p, u);
        for (int m = h0; m < r; m++) {
            if (!p->needed[m] || !p->root[m] || fuse_unit_of(p, m) != h0) continue;
            MSET(p, p->merged_into[m], r);
            MSET(p, p->host[m], r);
            MSET(p, p->role[m], ROLE_POS);
            MSET(p, p->pass[m], 0);
        }
        MSET(p, p->unit[h0], NULL);
        MSET(p, p->unit[r], u);
        union_add(u->pl[0], &u->npl[0], &sc, false);
        unlink_open(p, u); /* the open list is in root order: u moves to r's place */
        u->host = r;
        u->red = true;
        u->mask = fuse_fold_mask(rn);
        u->out = rn;
        u->nreds = 1;
        u->out_red = p->output[r] >= 0;
        u->out_row = false;
        u->nroots++;
        u->nops += p->kops[r];
        MSET(p, p->merged_into[r], -1);
        MSET(p, p->host[r], r);
        MSET(p, p->role[r], ROLE_PASS);
        MSET(p, p->pass[r], 0);
        append_open(p, u);
        return retire(p, u) ? 1 : -1;
    }
    return 0;
}

/* Root e starts a kernel of its own. */
static unit *start_unit(planner *p, int e) {
    const lf_node *en = p->g->nodes[e];
    unit *u = merge_alloc(p, sizeof *u);
    if (u) memset(u, 0, sizeof *u);
    if (!u || !(u->pl[0] = new_list(p))) return NULL; /* u->epi: made by the first epilogue */
    u->host = e;
    u->red = fuse_is_fold(en);
    u->scan = en->kind == NODE_SCAN;
    const lf_node *space = u->red ? en->inputs[0] : en;
    u->ndim = space->ndim;
    memcpy(u->shape, space->shape, sizeof u->shape);
    u->npasses = 1;
    u->nroots = 1;
    u->nops = p->kops[e];
    if (u->red) {
        u->mask = fuse_fold_mask(en);
        u->out = en;
        u->nreds = 1;
        u->out_red = p->output[e] >= 0;
    } else {
        u->out_row = p->output[e] >= 0;
    }
    /* its own loads; past a cap it is full (it will be split); kept until
       its list changes */
    ownloads *own = p->kown[e];
    if (!own && !(own = p->kown[e] = fuse_scratch_calloc(&p->keep, 1, sizeof *own))) return NULL;
    if (!own->valid) {
        own->n = 0;
        for (int j = 0, nb = 0; j < p->kleafn[e] && fuse_loads_fit(own->n, nb); j++) { /* its load leaves */
            const inst *i = fuse_load_leaf(p, e, j);
            pload l;
            if (!fuse_leaf_load(p, i, -1, &l)) continue;
            if (fuse_find_load(own->ls, own->n, &l) >= 0) continue;
            nb += fuse_new_buffer(own->ls, own->n, &l);
            own->ls[own->n++] = l;
        }
        own->valid = true;
    }
    memcpy(u->pl[0], own->ls, (size_t)own->n * sizeof *own->ls);
    u->npl[0] = own->n;
    MSET(p, p->role[e], u->red ? ROLE_PASS : ROLE_BODY);
    MSET(p, p->pass[e], 0);
    MSET(p, p->unit[e], u);
    append_open(p, u);
    return retire(p, u) ? u : NULL;
}

/* Forms the kernels of this round: every needed root, in node order, joins
 * an earlier kernel or starts its own (see the rules at the top).
 *
 * Resumed from the lowest node c whose root status changed since the last
 * merges: a root e below c reads only its own list (which depends on the
 * root status of nodes at or below e: unchanged) and the merge state that
 * the roots before it made, so its step is the last round's. The steps of
 * the roots at or above c are undone (every write to the merge state is
 * logged with its old bytes: MSET, save_unit) and made again. The records
 * of undone steps stay in p->mar until the next full merge, which happens
 * when they outnumber the live ones. */
lf_status fuse_plan_merges(planner *p) {
    int nn = p->nn;
    if (!p->unit) {
        p->unit = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->unit);
        p->mroot = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->mroot);
        p->mmark = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->mmark);
        p->mmbytes = fuse_scratch_calloc(&p->keep, (size_t)nn, sizeof *p->mmbytes);
        if (!p->unit || !p->mroot || !p->mmark || !p->mmbytes) return fuse_nomem(p);
    }
    /* the nodes made roots since the last merges (p->rchg), in node order */
    int *chg = fuse_scratch_alloc(&p->tmp, (size_t)nn * sizeof *chg);
    if (!chg) return fuse_nomem(p);
    int nchg = fuse_new_roots(p, &p->mcur, chg), c = 0;
    bool full = false;
    if (p->fusion && p->mvalid) {
        c = nn; /* the lowest node whose root status changed */
        for (int j = 0; j < nchg && c == nn; j++)
            if (p->root[chg[j]] != p->mroot[chg[j]]) c = chg[j];
        int e0 = fuse_next_root(p, c); /* the first step at or above it: a needed root then and now */
        while (e0 < nn && !p->mroot[e0]) e0 = fuse_next_root(p, e0 + 1);
        if (e0 < nn) { /* the steps of e0 on are undone */
            size_t waste = p->mwaste + (p->mbytes - p->mmbytes[e0]);
            if (waste > p->mbytes - waste + ((size_t)1 << 20)) p->mvalid = false;
            else {
                undo_to(p, p->mmark[e0]);
                p->mwaste = waste;
            }
        }
    }
    if (!p->fusion || !p->mvalid) { /* a full merge */
        c = 0;
        full = true;
        for (int id = 0; id < nn; id++) {
            p->merged_into[id] = -1;
            p->host[id] = id;
            p->role[id] = p->kind[id] == NODE_REDUCE || p->kind[id] == NODE_SCAN ? ROLE_PASS : ROLE_BODY; /* fuse_is_fold */
            p->pass[id] = 0;
        }
        p->units = p->units_tail = p->parked = NULL;
        p->pidx = NULL;
        p->pcap = p->pcount = 0;
        memset(p->unit, 0, (size_t)nn * sizeof *p->unit);
        fuse_scratch_reset(&p->mar);
        p->nmrec = p->nmbuf = 0;
        p->mbytes = p->mwaste = 0;
        if (!p->fusion) return LF_OK;
    }
    p->mvalid = false; /* until every step is made */
    for (int e = fuse_next_root(p, c); e < nn; e = fuse_next_root(p, e + 1)) { /* the needed roots */
        const lf_node *en = p->g->nodes[e];
        p->merge_work++;
        p->mmark[e] = p->nmrec;
        p->mmbytes[e] = p->mbytes;
        mlog(p, &p->units, sizeof p->units);
        mlog(p, &p->units_tail, sizeof p->units_tail);
        mlog(p, &p->parked, sizeof p->parked);
        mlog(p, &p->pidx, sizeof p->pidx);
        mlog(p, &p->pcap, sizeof p->pcap);
        mlog(p, &p->pcount, sizeof p->pcount);
        if (p->mfail) return fuse_nomem(p);
        int joined;
        if (en->kind == NODE_SCATTER) { /* a kernel of its own that nothing joins (plan_scatter.c) */
            unit *u = start_unit(p, e);
            if (!u) return fuse_nomem(p);
            if (!u->parked && !u->closed) unlink_open(p, u);
            u->closed = true;
            continue;
        }
        if (en->kind == NODE_SORT) { /* a kernel of its own, or its sibling's (plan_sort.c) */
            int sib = fuse_sort_sibling(p, e);
            if (sib >= 0) {
                join(p, e, p->unit[sib], ROLE_BODY);
                continue;
            }
            unit *u = start_unit(p, e);
            if (!u) return fuse_nomem(p);
            if (!u->parked && !u->closed) unlink_open(p, u);
            u->closed = true;
            continue;
        }
        if (en->kind == NODE_SCAN) joined = 0; /* plan_scan.c: a kernel of its own */
        else if (en->kind == NODE_REDUCE) {
            if ((joined = join_reduce(p, e)) == 0) joined = absorb_space(p, e);
        }
        else if ((joined = join_epilogue(p, e)) == 0) joined = join_space(p, e);
        if (joined < 0) return fuse_nomem(p);
        if (!joined && !start_unit(p, e)) return fuse_nomem(p);
        if (p->mfail) return fuse_nomem(p);
    }
    if (p->mfail) return fuse_nomem(p);
    if (full) memcpy(p->mroot, p->root, (size_t)nn * sizeof *p->root);
    else /* they differ only where a root was made */
        for (int j = 0; j < nchg; j++) p->mroot[chg[j]] = p->root[chg[j]];
    p->mvalid = true;
    return LF_OK;
}

/* A node to make a root because its kernel passes a load cap, or -1 when
 * all kernels fit: the inlined map node (or small reduction) whose subtree gathers the most loads
 * (counted as a tree, so an upper bound) while still fitting in one kernel:
 * at most GRAPH_MAX_PARAMS loads of at most LF_MAX_ARGS buffers, the
 * buffers bounded by a tree count too, except that the loads of a subtree
 * that all read one slot (a stencil's taps, nkey) count as one buffer;
 * failing that (the loads sit in leaves
 * of the root's own fn), a gather used in place, which brings three loads
 * (itself, its idx and x's base) and as a root brings one. A gather leaf's
 * count includes its idx and x (their instances are leaves of the same
 * kernel). */
void fuse_victim_leaf(const planner *p, inst *i) {
    const lf_node *n = i->node;
    pload l;
    bool ld = fuse_leaf_load(p, i, -1, &l);
    i->nload = i->nbuf = ld ? 1 : 0;
    i->nkey = !ld ? NULL : l.src == FUSE_SRC_SLOT ? l.key : KEY_MIXED;
    if (n->kind == NODE_GATHER && !p->root[n->id]) i->nload = i->nbuf = 3; /* in place: x and idx too */
}

/* The victim counts (inst.nload, nbuf, nkey) are asked only whether they
 * fit (fuse_loads_fit) and, among those that fit, which has the most loads.
 * An instance that does not fit has no ancestor that fits: its loads and
 * buffers are a tree count, so an ancestor has at least as many, and
 * buffers past the cap mean loads of several slots (nkey KEY_MIXED, which
 * an ancestor keeps, so its buffers are a sum too). So every instance that
 * does not fit gets one value (VCAP_LOADS, VCAP_BUFS, KEY_MIXED): what a
 * fitting instance computes is unchanged, and a change below stops at the
 * first ancestor that did not fit before and does not now, instead of
 * running up a chain whose slot key (the lowest root it reads) changed. */
enum { VCAP_LOADS = GRAPH_MAX_PARAMS + 1, VCAP_BUFS = LF_MAX_ARGS + 1 };

/* Whether instance i may be the victim of its kernel: an inlined map (or
 * small reduction; not a root already: a contraction's product map is
 * inlined even then, plan_contract.c) other than the kernel's own root,
 * whose subtree gathers at least two loads and fits in a kernel of its own. */
static bool victim_candidate(const planner *p, const inst *i) {
    const lf_node *n = i->node;
    return !i->leaf && !i->dead && (n->kind == NODE_MAP || n->kind == NODE_REDUCE) && !p->root[n->id] &&
           n->id != i->kernel && i->nload >= 2 && fuse_loads_fit(i->nload, i->nbuf);
}

static bool vcand_above(const vcand *a, const vcand *b) {
    return a->nload != b->nload ? a->nload > b->nload : a->id > b->id;
}

bool fuse_victim_offer(planner *p, inst *i) {
    if (!victim_candidate(p, i)) return true;
    int k = i->kernel;
    if (p->vlen[k] == p->vcap[k]) {
        int cap = p->vcap[k] ? 2 * p->vcap[k] : 8;
        vcand *t = graph_realloc(p->vheap[k], (size_t)cap * sizeof *t);
        if (!t) {
            p->vfail = true;
            return false;
        }
        p->vheap[k] = t;
        p->vcap[k] = cap;
    }
    vcand e = {i->nload, i->node->id, i}, *h = p->vheap[k];
    int c = p->vlen[k]++;
    while (c > 0 && vcand_above(&e, &h[(c - 1) / 2])) {
        h[c] = h[(c - 1) / 2];
        c = (c - 1) / 2;
    }
    h[c] = e;
    return true;
}

/* Kernel k's candidate with the most loads (then the highest node), or
 * NULL: the top of its heap once the stale entries are dropped. */
static inst *victim_best(planner *p, int k) {
    vcand *h = p->vheap[k];
    while (p->vlen[k] > 0) {
        p->victim_work++;
        if (victim_candidate(p, h[0].i) && h[0].i->nload == h[0].nload) return h[0].i;
        vcand last = h[--p->vlen[k]];
        int c = 0, n = p->vlen[k];
        for (;;) {
            int a = 2 * c + 1;
            if (a >= n) break;
            if (a + 1 < n && vcand_above(&h[a + 1], &h[a])) a++;
            if (!vcand_above(&h[a], &last)) break;
            h[c] = h[a];
            c = a;
        }
        if (n > 0) h[c] = last;
    }
    return NULL;
}

bool fuse_victim_counts(planner *p, inst *i) {
    p->victim_work++;
    int64_t s = 0, b = 0;
    const void *key = NULL;
    for (int a = 0, na = fuse_inst_inputs(p, i); a < na; a++) {
        const inst *in = i->in[a];
        s += in->nload;
        b += in->nbuf;
        if (in->nkey && key != in->nkey) key = key ? KEY_MIXED : in->nkey;
    }
    if (key && key != KEY_MIXED) b = 1; /* every load reads one slot */
    int nl = s > VCAP_LOADS ? VCAP_LOADS : (int)s, nb = b > VCAP_BUFS ? VCAP_BUFS : (int)b;
    if (!fuse_loads_fit(nl, nb)) { /* one value for every instance that does not fit */
        nl = VCAP_LOADS;
        nb = VCAP_BUFS;
        key = KEY_MIXED;
    }
    bool changed = nl != i->nload || nb != i->nbuf || key != i->nkey;
    i->nload = nl;
    i->nbuf = nb;
    i->nkey = key;
    fuse_victim_offer(p, i);
    return changed;
}

/* Marks the nodes kernel k inlines. */
static void claim_list(planner *p, int k, bool *claim) {
    for (int j = 0; j < p->kcount[k]; j++) {
        const inst *i = p->klist[k][j];
        p->victim_work++;
        if (!i->leaf) claim[i->node->id] = true;
    }
}

int fuse_find_victims(planner *p) {
    pload ls[GRAPH_MAX_PARAMS + 1];
    int made = 0, first = -1; /* the first kernel past a cap */
    bool *claim = NULL; /* the inlined nodes of the kernels past a cap so far */
    for (int k = fuse_next_root(p, 0); k < p->nn; k = fuse_next_root(p, k + 1)) { /* the needed roots */
        if (!p->kcount[k] || p->merged_into[k] >= 0 || p->kfits[k]) continue;
        int nb, nl = fuse_count_loads(p, k, ls, &nb);
        if (fuse_loads_fit(nl, nb)) { /* until its list changes (find_instances) */
            p->kfits[k] = true;
            continue;
        }
        /* the largest inlined subtree that fits in a kernel of its own: the
           counts are kept with the list (plan_vertical.c), the candidates in
           a heap */
        int v = -1;
        inst *best = victim_best(p, k);
        if (best) v = best->node->id;
        else {
            inst *gather = NULL;
            for (int j = 0; j < p->kcount[k]; j++) {
                inst *i = p->klist[k][j];
                const lf_node *n = i->node;
                p->victim_work++;
                if (i->leaf && n->kind == NODE_GATHER && !p->root[n->id] && (!gather || n->id > gather->node->id))
                    gather = i;
            }
            if (gather) v = gather->node->id;
        }
        if (v < 0) continue;
        /* a later kernel's victim is taken in the same round only when
           nothing it inlines is inlined by an earlier kernel past a cap
           (their lists are marked once a second such kernel comes) */
        if (first < 0) {
            first = k;
        } else {
            if (!claim) {
                if (!(claim = fuse_scratch_calloc(&p->tmp, (size_t)p->nn, sizeof *claim))) return -1;
                claim_list(p, first, claim);
            }
            bool clash = false;
            for (int j = 0; j < p->kcount[k] && !clash; j++) {
                const inst *i = p->klist[k][j];
                p->victim_work++;
                clash = !i->leaf && claim[i->node->id];
            }
            claim_list(p, k, claim);
            if (clash) continue;
        }
        fuse_make_root(p, v);
        made++;
    }
    return made;
}

/* Splits the kernels with more than FUSE_MAX_OPS operations: walking a
 * kernel's inlined map instances in node order (producers first) and
 * counting their fns' operations, the last node before the count would pass
 * the cap becomes a root and the count restarts after it. Returns how many
 * roots it made. */
int fuse_split_big(planner *p) {
    int added = 0;
    for (int k = fuse_next_root(p, 0); k < p->nn; k = fuse_next_root(p, k + 1)) { /* the needed roots */
        if (!p->kcount[k] || p->kops[k] <= FUSE_MAX_OPS) continue;
        int64_t run = 0;
        const inst *last = NULL;
        for (int j = 0; j < p->kcount[k]; j++) {
            const inst *i = p->klist[k][j];
            const lf_node *n = i->node;
            if (n->kind != NODE_MAP || fuse_is_leaf(p, n, k)) continue;
            if (run + p->fnops[n->id] > FUSE_MAX_OPS && last) {
                fuse_make_root(p, last->node->id);
                added++;
                run = 0;
                last = NULL;
                if (fuse_is_leaf(p, n, k)) continue; /* another instance of the new root */
            }
            run += p->fnops[n->id];
            if (n->id != k && !p->root[n->id]) last = i; /* plan_contract.c: a root may be inlined */
        }
    }
    return added;
}
