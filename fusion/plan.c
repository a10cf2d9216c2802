/* fusion/plan.c: the fusion planner: graph + outputs -> schedule.
 *
 * The planner decides which nodes are kernel roots (their value is computed
 * by a kernel of their own and, usually, stored), inlines everything else
 * into the kernels that use it, and writes the buffer plan. The rules:
 *
 *   Dead nodes. Only nodes reachable from the outputs are considered.
 *   Roots. Every output; every node marked with lf_node_materialize (input
 *     nodes are buffers already); every reduction.
 *   Views and broadcasting never materialize (unless they are outputs or
 *     marked): a use of a view or of a broadcast input is a composed index
 *     map (fuse_map), folded to one affine step whenever that is exact.
 *   Vertical elementwise. A map/zipwith/select/cast node that is not a root
 *     is inlined into each kernel that uses it, with its fn rebuilt into the
 *     kernel's composed body; constants become literals cast to their dtype;
 *     inputs and iotas become loads.
 *   Random nodes are sources like iotas: never a root unless an output or
 *     marked (or fusion is off), never stored otherwise; each use is a
 *     FUSE_SRC_IOTA load whose index map yields the element's flat index in
 *     the random node's own shape (through any view or broadcast), from which
 *     the kernel computes Philox4x32-10 of (seed, index) in registers. The
 *     seed is a kernel parameter (P, as iota's start and step: a new seed
 *     does not recompile); the distribution and dtype are structure (they
 *     pick the helper the source calls).
 *   map -> reduce. A reduction kernel loops over its input's shape; the
 *     input's elementwise producers are inlined into the body, so the value
 *     folded is computed in registers and never stored.
 *   MULTIPLE CONSUMERS. A non-root elementwise node P has one "instance" per
 *     distinct (kernel, index map) pair that uses it; roots merged into one
 *     kernel (an epilogue, the passes of a row kernel, horizontal siblings,
 *     see below) count as one kernel. If P has more than one instance, P is
 *     recomputed in each when it is cheap, and made a root (materialized
 *     once, loaded everywhere) otherwise. Cheap means: its fused expression
 *     (its own fn plus every producer inlined beneath it, counted as a tree)
 *     has at most CHEAP_OPS (8) operations and casts, and none of them is
 *     transcendental (** and every float function: sqrt, exp, log, sin,
 *     hypot, erf, ...; fma is not). The decision is iterated bottom-up: each
 *     round makes roots only of the expensive shared nodes with no other
 *     such node beneath them, since materializing a node makes the nodes
 *     above it cheaper. Inside one kernel, a node used at one index map is
 *     computed once per fn (hash-consing) and recomputed in each pass that
 *     uses it, however expensive: storing it would be the full-size
 *     temporary a row kernel exists to avoid (softmax's exp(x - max) is
 *     computed in the sum pass and again in the row pass).
 *   Kernels are formed in node order: each root either joins an earlier
 *     kernel (the rules below, tried in this order) or starts its own. A
 *     root joins kernel K only if every other value it loads is computed by
 *     a kernel before K (so K can run at its place), every fn of K stays
 *     within LF_MAX_ARGS loads and K within FUSE_MAX_STORES roots (so its
 *     stores, i.e. buffers, stay few); otherwise the rules fall back to a
 *     kernel of its own, and what it reads from K is stored.
 *   reduce -> map (epilogue). An elementwise root E that has the shape of
 *     the root reduction of the reduction kernel K of the latest reduction E
 *     reads, and reads K's reductions only at their own positions, joins K
 *     as an epilogue that runs once per output element. A reduction is
 *     stored only if something outside its kernel needs it.
 *   reduce -> broadcast -> map (row kernels: softmax, layer norm). A
 *     reduction R whose input space and reduced axes equal those of an
 *     earlier reduction kernel K, and that reads K's reductions only
 *     broadcast over the reduced axes (the "outer" map: keepdims, or
 *     expand_dims and broadcasting; any set of reduced axes), joins K as a
 *     pass after the latest pass whose results it reads (at most
 *     FUSE_MAX_PASSES passes, LF_MAX_ARGS reductions). An elementwise root E
 *     over K's input space that reads K's reductions only through the outer
 *     map joins K's row pass, which runs over each row after the epilogue
 *     and writes full-size values. Between passes only per-row values live.
 *   Horizontal / multi-output. A reduction over the same space and axes as
 *     an earlier reduction kernel K, reading none of K's results, joins K's
 *     first pass when it shares a load (same source, same index map) with K
 *     or when both it and a reduction of K are outputs: sum(x) and max(x)
 *     are one pass. An elementwise root joins the earliest kernel over the
 *     same space whose body (elementwise kernel) or row pass (row kernel)
 *     shares a load with it, or computes an output when it is an output too:
 *     evaluating x+y and x*y together is one kernel with two stores.
 *   Splitting. A root whose own kernel would need more than LF_MAX_ARGS
 *     loads (the parameter limit of an fn) makes a root of its inlined node
 *     that gathers the most loads, and the plan is redone. (Merges never
 *     exceed the limit: a root that would is not merged.)
 *   Size cap. A kernel has at most FUSE_MAX_OPS (500) operations: the ops
    and casts of the fns of its inlined map nodes, each counted once per
    instance (distinct node and index map), which is what the emitter prints
    (hash-consing only makes it smaller); not a tree count. A root whose
    instances have more is split: walking them in node order, the map node
    just before the count would pass the cap becomes a root (stored, loaded
    by the rest) and the count restarts, so a chain of N ops is ceil(N/cap)
    kernels; a merge that would pass the cap is not made. Why 500: gcc -O3
    time grows faster than the body (a chain of v*0.999+0.001 maps, one
    kernel, this machine: 250 ops 0.075 s, 500 0.12 s, 1000 0.24 s, 2000
    0.54 s, 4000 1.6 s, 20,000 14.7 s); up to about 1000 ops the time per op
    is flat (0.24 ms), 500 leaves room for costlier bodies, and one stored
    temporary per 500 ops costs nothing next to the arithmetic. One node
    whose own fn has more than the cap is a kernel of its own, unsplit.
  Fusion off. Every needed node except inputs, views and constants (values,
 *     not ops: a literal in the kernels that use them) is a root: one
 *     kernel per op with full temporaries (the unfused baseline).
 *
 * A planning round finds the instances, forms the kernels (merges), then
 * applies the multiple-consumer rule and splitting (the load limit, one
 * root a round; else the size cap, every split point of every kernel at
 * once); a round that adds a root is redone, so the last round's merges hold for the final roots.
 *
 * Cost. Planning is linear in the instances and kernels it makes (times
 * the rounds): instances are found in a hash table keyed by (node, kernel,
 * index map); a kernel's instances are listed in node order without sorting;
 * kernels with FUSE_MAX_STORES roots leave the list joins scan, elementwise
 * kernels whose body has LF_MAX_ARGS loads are parked in an index by load
 * (only a root sharing one could join them), so the order in which joins
 * try kernels is unchanged; a kernel's roots are chained for building it;
 * the traffic statistics are computed once here (counted in plan_seconds).
 * The rounds of the multiple-consumer rule remain (a stencil pyramid of
 * depth D takes about D/3), but a round re-derives only the instances at or
 * below the highest node whose root status changed (find_instances), and
 * updates only those kernels' lists; the scans of merges and of the rule
 * stay O(instances) a round.
 *
 * Invariants (see fusion.h for what a schedule guarantees): instance
 * records live in a scratch arena kept across rounds (reset when the records
 * taken back outnumber the live ones), merge records in one reset each round;
 * the kernels' instance lists are graph_malloc'd and freed with the plan; the kernels'
 * fns live in a private graph (schedule->arena) that no user sees, so a
 * failed fn allocation never marks the user's graph as failed; every
 * allocation failure returns LF_ERR_NOMEM with everything freed.
 */
#include "fusion/fusion.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CHEAP_OPS = 8, COST_CAP = 1 << 20 };

/* ---- scratch arena ------------------------------------------------------------ */

typedef union chunk {
    struct {
        union chunk *next;  /* older chunk */
        size_t used, cap;   /* bytes used and available after the header */
    } h;
    max_align_t align;      /* keeps the data after the header aligned */
} chunk;

typedef struct scratch {
    chunk *head;            /* newest chunk */
} scratch;

static void *scratch_alloc(scratch *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    chunk *c = a->head;
    if (!c || c->h.cap - c->h.used < bytes) {
        size_t cap = bytes > 32768 ? bytes : 32768;
        c = graph_malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->h.next = a->head;
        c->h.used = 0;
        c->h.cap = cap;
        a->head = c;
    }
    void *p = (char *)(c + 1) + c->h.used;
    c->h.used += bytes;
    return p;
}

static void *scratch_calloc(scratch *a, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size / 2) return NULL;
    void *p = scratch_alloc(a, n * size > 0 ? n * size : 1);
    if (p) memset(p, 0, n * size);
    return p;
}

static void scratch_free(scratch *a) {
    while (a->head) {
        chunk *c = a->head;
        a->head = c->h.next;
        graph_free(c);
    }
}

/* ---- index maps ---------------------------------------------------------------- */

static int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Canonical form: strides of extent-1 axes are 0; an empty space maps to 0. */
static void step_canon(fuse_step *s) {
    bool empty = false;
    for (int d = 0; d < s->ndim; d++) {
        if (s->shape[d] == 1) s->strides[d] = 0;
        if (s->shape[d] == 0) empty = true;
    }
    for (int d = s->ndim; d < LF_MAX_DIMS; d++) s->shape[d] = s->strides[d] = 0;
    if (empty) {
        s->offset = 0;
        for (int d = 0; d < s->ndim; d++) s->strides[d] = 0;
    }
}

static fuse_step make_step(int ndim, const int64_t *shape, int64_t offset, const int64_t *strides) {
    fuse_step s;
    memset(&s, 0, sizeof s);
    s.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        s.shape[d] = shape[d];
        s.strides[d] = strides ? strides[d] : 0;
    }
    s.offset = offset;
    step_canon(&s);
    return s;
}

/* The identity linearization of a shape (row-major). */
static fuse_step identity_step(int ndim, const int64_t *shape) {
    int64_t st[LF_MAX_DIMS];
    graph_contiguous_strides(ndim, shape, st);
    return make_step(ndim, shape, 0, st);
}

static bool step_equal(const fuse_step *a, const fuse_step *b) {
    if (a->ndim != b->ndim || a->offset != b->offset) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d]) return false;
    return true;
}

static bool map_equal(const fuse_map *a, const fuse_map *b) {
    if (a == b) return true;
    if (a->nsteps != b->nsteps) return false;
    for (int k = 0; k < a->nsteps; k++)
        if (!step_equal(&a->steps[k], &b->steps[k])) return false;
    return true;
}

/* Replaces step a (reading space P, giving a linear index) followed by step b
 * (unravelling that index by b's shape Q) with one step reading P, when that
 * is exact: a's offset and each axis's stride land on single digits of Q and
 * no digit can carry over its whole range. Returns false otherwise. */
static bool fold(const fuse_step *a, const fuse_step *b, fuse_step *out) {
    if (shape_numel(a->ndim, a->shape) == 0) {
        *out = make_step(a->ndim, a->shape, 0, NULL);
        return true;
    }
    int64_t contig[LF_MAX_DIMS], qn = shape_numel(b->ndim, b->shape);
    graph_contiguous_strides(b->ndim, b->shape, contig);
    if (a->offset < 0 || a->offset >= qn) return false;
    int64_t dig[LF_MAX_DIMS], lo[LF_MAX_DIMS], hi[LF_MAX_DIMS], rem = a->offset;
    for (int j = 0; j < b->ndim; j++) { /* the offset's digits in Q */
        dig[j] = lo[j] = hi[j] = rem / contig[j];
        rem %= contig[j];
    }
    int64_t strides[LF_MAX_DIMS] = {0};
    for (int d = 0; d < a->ndim; d++) {
        int64_t s = a->strides[d], ext = a->shape[d] - 1;
        if (s == 0 || ext == 0) continue;
        int j = b->ndim - 1;
        for (; j >= 0; j--) {
            if (b->shape[j] <= 1 || s % contig[j] != 0) continue;
            int64_t c = s / contig[j];
            if ((c < 0 ? -c : c) >= b->shape[j]) continue;
            int64_t span = c * ext; /* |c| < Q[j] and ext < numel: no overflow */
            if (span > 0) hi[j] += span;
            else lo[j] += span;
            if (__builtin_mul_overflow(b->strides[j], c, &strides[d])) return false;
            break;
        }
        if (j < 0) return false;
    }
    int64_t off = b->offset;
    for (int j = 0; j < b->ndim; j++) {
        if (lo[j] < 0 || hi[j] >= b->shape[j]) return false;
        int64_t t;
        if (__builtin_mul_overflow(b->strides[j], dig[j], &t) || __builtin_add_overflow(off, t, &off))
            return false;
    }
    *out = make_step(a->ndim, a->shape, off, strides);
    return true;
}

int64_t fuse_map_apply(const fuse_map *m, const int64_t *idx) {
    const fuse_step *s = &m->steps[0];
    int64_t lin = s->offset;
    for (int d = 0; d < s->ndim; d++) lin += idx[d] * s->strides[d];
    for (int k = 1; k < m->nsteps; k++) {
        s = &m->steps[k];
        int64_t rem = lin, next = s->offset;
        for (int d = s->ndim - 1; d >= 0; d--) {
            int64_t e = s->shape[d];
            next += (rem % e) * s->strides[d];
            rem /= e;
        }
        lin = next;
    }
    return lin;
}

static fuse_map *map_new(scratch *a, int nsteps) {
    fuse_map *m = scratch_alloc(a, sizeof *m);
    fuse_step *st = scratch_alloc(a, (size_t)nsteps * sizeof *st);
    if (!m || !st) return NULL;
    m->nsteps = nsteps;
    m->steps = st;
    return m;
}

static fuse_map *map_identity(scratch *a, const lf_node *n) {
    fuse_map *m = map_new(a, 1);
    if (m) m->steps[0] = identity_step(n->ndim, n->shape);
    return m;
}

/* m followed by step (which unravels m's result by its own shape), folded. */
static fuse_map *map_compose(scratch *a, const fuse_map *m, const fuse_step *step) {
    fuse_map *r = map_new(a, m->nsteps + 1);
    if (!r) return NULL;
    memcpy(r->steps, m->steps, (size_t)m->nsteps * sizeof *r->steps);
    r->steps[m->nsteps] = *step;
    while (r->nsteps >= 2) {
        fuse_step f;
        if (!fold(&r->steps[r->nsteps - 2], &r->steps[r->nsteps - 1], &f)) break;
        r->steps[r->nsteps - 2] = f;
        r->nsteps--;
    }
    if (shape_numel(r->steps[0].ndim, r->steps[0].shape) == 0) {
        r->steps[0] = make_step(r->steps[0].ndim, r->steps[0].shape, 0, NULL);
        r->nsteps = 1;
    }
    return r;
}

/* ---- planner state ----------------------------------------------------------------- */

/* One use of a node inside one kernel, at one index map. */
typedef struct inst inst;
struct inst {
    const lf_node *node;     /* the node computed (inlined) or loaded (leaf) */
    int kernel;              /* id of the root whose kernel this is in */
    const fuse_map *map;     /* kernel loop index -> element of node (scratch) */
    inst *in[LF_MAX_ARGS];   /* instances of the inputs (inlined nodes only) */
    inst *next_node;         /* next instance of the same node */
    inst *next_all;          /* every instance of the round */
    inst *next_hash;         /* next in its bucket of the instance table */
    uint64_t hash;           /* of (node, kernel, map) */
    int expr;                /* pass 2: expression id in the kernel's fn */
    int nload;               /* loads at or beneath this instance (victims) */
};

/* A load being collected: source identity and index map. */
typedef struct pload {
    fuse_src src;            /* kind */
    const void *key;         /* buffer (inputs) or node (others): identity */
    const lf_node *node;     /* the node loaded */
    const fuse_map *map;     /* index map (scratch) */
} pload;

typedef struct planner {
    lf_graph *g;             /* graph planned */
    int nn;                  /* its node count */
    bool fusion;             /* fusion on */
    scratch keep;            /* arrays that live for the whole plan */
    scratch tmp;             /* merge records and lists of one round */
    scratch iar;             /* instance records, maps, the instance table
                                (kept across rounds, see find_instances) */
    bool *iroot;             /* root[] when the instances were derived */
    inst **ck;               /* per node: the newest instance before it was
                                processed (the rewind point) */
    size_t ilive, idead;     /* instances kept and rewound since iar was reset */
    int64_t *kops64;         /* per root: kops uncapped (kept across rounds) */
    bool ivalid;             /* instances of an earlier round are kept */
    bool *needed;            /* reachable from an output */
    bool *root;              /* kernel root */
    int *output;             /* first output index of the node, -1 */
    int *ops;                /* fused expression size (MAP nodes) */
    int *fnops;              /* operations of the node's own fn (MAP nodes) */
    int *kops;               /* per root: operations of its instances (round) */
    bool *trans;             /* fused expression has a transcendental op */
    bool *cand;              /* expensive shared node (this round) */
    inst **first;            /* per node: its instances (round) */
    int *ninst;              /* per node: instance count (round) */
    inst *all;               /* every instance (round) */
    inst **htab;             /* instances by (node, kernel, map): buckets (round) */
    size_t hcap, hcount;     /* buckets (a power of two) and instances in them */
    inst ***klist;           /* per root: its kernel's instances by node id */
    int *kcount;             /* per root: their number */
    int *merged_into;        /* root -> the root of the kernel it joined, -1 */
    int *host;               /* per root: root id of the kernel computing it */
    unsigned char *role;     /* per root: its part in its kernel (role) */
    int *pass;               /* per reduce root: its pass in its kernel */
    struct unit **unit;      /* per kernel root: its merge record (round) */
    struct unit *units;      /* the open kernels of the round, by root id */
    struct unit *units_tail; /* the last of them */
    struct unit *parked;     /* elementwise kernels whose body loads are full */
    struct park **pidx;      /* parked kernels by each of their loads (buckets) */
    size_t pcap, pcount;     /* buckets (a power of two) and entries */
    int *oslot;              /* per node: its output slot, -1 */
    int *slot_of;            /* per node: slot holding its value, -1 */
    int *next_member;        /* per root: the next root of its kernel (node
                                order, from the kernel's own root), -1 */
} planner;

/* A root's part in the kernel it belongs to. */
typedef enum role {
    ROLE_BODY,   /* elementwise kernel: its body (the root and its siblings) */
    ROLE_PASS,   /* reduction kernel: a reduction folded in pass p->pass[id] */
    ROLE_EPI,    /* reduction kernel: the epilogue */
    ROLE_ROW     /* reduction kernel: the row pass */
} role;

/* A kernel being formed: its root and what has joined it, with the loads of
 * each of its fns so far (at most LF_MAX_ARGS + 1 each: one more is "full"). */
typedef struct unit {
    int host;                      /* root id of the kernel */
    bool red;                      /* reduction kernel */
    int ndim;                      /* iteration space */
    int64_t shape[LF_MAX_DIMS];
    uint32_t mask;                 /* reduced axes */
    const lf_node *out;            /* reduction: the root reduce node */
    int npasses;                   /* reduction passes (elementwise: 1, the body) */
    int npl[FUSE_MAX_PASSES];      /* loads of each pass (ACC included) */
    pload *pl[FUSE_MAX_PASSES];
    int nrow;                      /* row pass loads (ACC included), row NULL: none */
    pload *row;
    int nepi;                      /* epilogue loads, ACC excluded */
    pload *epi;
    int nreds;                     /* reductions */
    int nroots;                    /* roots in it (each stores at most once) */
    int nops;                      /* operations of its roots' instances */
    bool out_red, out_row;         /* a reduction / a body or row root is an output */
    bool parked;                   /* off the open list: elementwise, LF_MAX_ARGS
                                      body loads, so only a root all of whose
                                      loads it has (found by the index) joins */
    bool closed;                   /* FUSE_MAX_STORES roots: nothing joins */
    struct unit *next, *prev;      /* the open list (by root id), or the parked list */
} unit;

/* An entry of the index of parked kernels: one of its body loads. */
typedef struct park {
    uint64_t hash;                 /* of the load */
    const pload *load;             /* in u->pl[0] */
    unit *u;
    struct park *next;             /* in its bucket */
} park;

static lf_status nomem(planner *p) {
    return graph_error(p->g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
}

/* A node whose use in kernel k is a load or a literal, not inlined code. */
static bool is_leaf(const planner *p, const lf_node *n, int k) {
    if (n->kind == NODE_INPUT || n->kind == NODE_CONST || n->kind == NODE_IOTA || n->kind == NODE_RANDOM)
        return true;
    return p->root[n->id] && n->id != k;
}

/* ---- pass 1: instances ------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdu;
}

static uint64_t inst_hash(const lf_node *n, int k, const fuse_map *m) {
    uint64_t h = mix(mix(0, (uint64_t)n->id), (uint64_t)k);
    for (int j = 0; j < m->nsteps; j++) {
        const fuse_step *st = &m->steps[j];
        h = mix(mix(h, (uint64_t)st->ndim), (uint64_t)st->offset);
        for (int d = 0; d < st->ndim; d++) h = mix(mix(h, (uint64_t)st->shape[d]), (uint64_t)st->strides[d]);
    }
    return h ^ (h >> 29);
}

static uint64_t load_hash(const pload *l) {
    uint64_t h = mix(mix(0, (uint64_t)l->src), (uint64_t)(uintptr_t)l->key);
    if (l->src != FUSE_SRC_ACC)
        for (int j = 0; j < l->map->nsteps; j++) {
            const fuse_step *st = &l->map->steps[j];
            h = mix(mix(h, (uint64_t)st->ndim), (uint64_t)st->offset);
            for (int d = 0; d < st->ndim; d++) h = mix(mix(h, (uint64_t)st->shape[d]), (uint64_t)st->strides[d]);
        }
    return h ^ (h >> 29);
}

/* Doubles the instance table (scratch: the old buckets stay until the round ends). */
static bool grow_table(planner *p) {
    size_t cap = p->hcap ? 2 * p->hcap : 1024;
    inst **t = scratch_calloc(&p->iar, cap, sizeof *t);
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
        if (i->hash == h && i->node == n && i->kernel == k && map_equal(i->map, m)) return i;
    if (p->hcount >= p->hcap / 2 && !grow_table(p)) return NULL;
    inst *i = scratch_calloc(&p->iar, 1, sizeof *i);
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
static lf_status find_instances(planner *p) {
    scratch_free(&p->tmp);
    int nn = p->nn, top = nn - 1;
    if (p->ivalid) {
        top = -1;
        for (int id = nn - 1; id >= 0 && top < 0; id--)
            if (p->root[id] != p->iroot[id]) top = id;
        if (p->idead > p->ilive + 4096) top = nn - 1;
    }
    /* the instances of nodes top..0 leave their kernels' lists and counts */
    int *lowold = scratch_calloc(&p->tmp, (size_t)nn, sizeof *lowold);
    int *lownew = scratch_calloc(&p->tmp, (size_t)nn, sizeof *lownew);
    if (!lowold || !lownew) return nomem(p);
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
        scratch_free(&p->iar);
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
            fuse_map *m = map_identity(&p->iar, n);
            if (!m || !add_inst(p, n, id, m)) return nomem(p);
        }
        for (inst *i = p->first[id]; i; i = i->next_node) {
            if (is_leaf(p, n, i->kernel)) continue;
            if (n->kind == NODE_VIEW) {
                fuse_step st = make_step(n->ndim, n->shape, n->u.view.offset, n->u.view.strides);
                const fuse_map *m = map_compose(&p->iar, i->map, &st);
                if (!m || !(i->in[0] = add_inst(p, n->inputs[0], i->kernel, m))) return nomem(p);
            } else if (n->kind == NODE_MAP) {
                for (int k = 0; k < n->ninputs; k++) {
                    const lf_node *x = n->inputs[k];
                    const fuse_map *m = i->map;
                    bool same = x->ndim == n->ndim &&
                                !memcmp(x->shape, n->shape, (size_t)n->ndim * sizeof *n->shape);
                    if (!same) {
                        int64_t bs[LF_MAX_DIMS];
                        graph_broadcast_strides(x->ndim, x->shape, n->ndim, n->shape, bs);
                        fuse_step st = make_step(n->ndim, n->shape, 0, bs);
                        m = map_compose(&p->iar, i->map, &st);
                    }
                    if (!m || !(i->in[k] = add_inst(p, x, i->kernel, m))) return nomem(p);
                }
            } else if (n->kind == NODE_REDUCE) {
                const lf_node *x = n->inputs[0];
                fuse_map *m = map_identity(&p->iar, x);
                if (!m || !(i->in[0] = add_inst(p, x, i->kernel, m))) return nomem(p);
            }
        }
    }
    p->ivalid = true;
    /* a kernel's list: its instances of nodes 0..top in node order (without
     * sorting), then the kept ones of the nodes above top */
    for (int id = 0; id <= top; id++)
        for (inst *i = p->first[id]; i; i = i->next_node) {
            lownew[i->kernel]++;
            if (i->node->kind == NODE_MAP && !is_leaf(p, i->node, i->kernel)) p->kops64[i->kernel] += p->fnops[id];
        }
    int *fill = lowold; /* reused: per touched kernel, the next position */
    for (int k = 0; k < nn; k++) {
        if (!lowold[k] && !lownew[k]) continue;
        int keep = p->kcount[k], cnt = keep + lownew[k];
        inst **l = NULL;
        if (cnt) {
            l = graph_malloc((size_t)cnt * sizeof *l);
            if (!l) return nomem(p);
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
static void compute_costs(planner *p) {
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
static int unit_of(const planner *p, int k) {
    return p->merged_into[k] >= 0 ? p->merged_into[k] : k;
}

/* Whether node id has more than one instance, kernels merged into one
 * counting as one kernel. */
static bool shared(const planner *p, int id) {
    if (p->ninst[id] < 2) return false;
    const inst *a = p->first[id];
    for (const inst *b = a->next_node; b; b = b->next_node)
        if (unit_of(p, b->kernel) != unit_of(p, a->kernel) || !map_equal(a->map, b->map)) return true;
    return false;
}

/* Makes roots of the expensive shared nodes that have no other such node
 * beneath them. Returns how many. */
static int add_shared_roots(planner *p) {
    int nn = p->nn, added = 0;
    for (int id = 0; id < nn; id++) {
        const lf_node *n = p->g->nodes[id];
        p->cand[id] = p->needed[id] && inlined_map(p, n) && p->ninst[id] > 1 &&
                      (p->trans[id] || p->ops[id] > CHEAP_OPS) && shared(p, id);
    }
    /* below[id]: a candidate is inlined beneath id */
    bool *below = scratch_calloc(&p->tmp, (size_t)nn, sizeof *below);
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
static bool leaf_load(const planner *p, const inst *i, int grp, pload *out) {
    const lf_node *n = i->node;
    if (n->kind == NODE_CONST) return false;
    out->node = n;
    out->map = i->map;
    if (n->kind == NODE_INPUT) {
        out->src = FUSE_SRC_SLOT;
        out->key = n->u.buffer;
    } else if (grp >= 0 && n->kind == NODE_REDUCE && p->root[n->id] && n->id != i->kernel &&
               unit_of(p, n->id) == grp) {
        out->src = FUSE_SRC_ACC;
        out->key = n;
        out->map = NULL;
    } else if (p->root[n->id] && n->id != i->kernel) {
        out->src = FUSE_SRC_SLOT;
        out->key = n;
    } else { /* NODE_IOTA or NODE_RANDOM computed in place */
        out->src = FUSE_SRC_IOTA;
        out->key = n;
    }
    return true;
}

static int find_load(const pload *ls, int n, const pload *l) {
    for (int j = 0; j < n; j++)
        if (ls[j].src == l->src && ls[j].key == l->key &&
            (l->src == FUSE_SRC_ACC || map_equal(ls[j].map, l->map)))
            return j;
    return -1;
}

/* Distinct loads of kernel k's instances (skipping a reduction's seed);
 * counts at most cap + 1. */
static int count_loads(const planner *p, int k, pload *ls, int cap) {
    int n = 0;
    for (int j = 0; j < p->kcount[k]; j++) {
        const inst *i = p->klist[k][j];
        pload l;
        if (!is_leaf(p, i->node, k) || !leaf_load(p, i, -1, &l)) continue;
        if (find_load(ls, n, &l) >= 0) continue;
        ls[n++] = l;
        if (n > cap) break;
    }
    return n;
}

/* ---- forming kernels: epilogues, row kernels, horizontal merges ---------------------------- */

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
    return make_step(in->ndim, in->shape, 0, st);
}

static bool map_is_step(const fuse_map *m, const fuse_step *st) {
    return m->nsteps == 1 && step_equal(&m->steps[0], st);
}

static bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* What root e would bring to kernel u in role r. */
typedef struct scan {
    pload ls[LF_MAX_ARGS + 1];     /* its distinct loads (ACC included) */
    int n;
    bool ok;                       /* everything it reads is available to u */
    bool acc;                      /* it reads u's reductions */
    int phase;                     /* the latest pass of those, -1 */
} scan;

static void scan_root(const planner *p, int e, const unit *u, role r, scan *sc) {
    const lf_node *en = p->g->nodes[e];
    sc->n = 0;
    sc->ok = true;
    sc->acc = false;
    sc->phase = -1;
    for (int j = 0; j < p->kcount[e]; j++) {
        const inst *i = p->klist[e][j];
        const lf_node *x = i->node;
        pload l;
        if (!is_leaf(p, x, e) || !leaf_load(p, i, u->red ? u->host : -1, &l)) continue;
        if (l.src == FUSE_SRC_ACC) {
            fuse_step want = r == ROLE_EPI ? identity_step(en->ndim, en->shape) : outer_step(x);
            if (!map_is_step(i->map, &want)) goto fail;
            sc->acc = true;
            if (p->pass[x->id] > sc->phase) sc->phase = p->pass[x->id];
        } else if (l.src == FUSE_SRC_SLOT && x->kind != NODE_INPUT && p->host[x->id] >= u->host) {
            goto fail; /* computed at or after u's place */
        }
        if (find_load(sc->ls, sc->n, &l) >= 0) continue;
        if (sc->n > LF_MAX_ARGS) goto fail;
        sc->ls[sc->n++] = l;
    }
    return;
fail:
    sc->ok = false;
}

/* Loads of the union of ls[0..n) and sc's (ACC too unless skip_acc), or -1
 * when more than cap. */
static int union_size(const pload *ls, int n, const scan *sc, bool skip_acc, int cap) {
    int m = n;
    for (int j = 0; j < sc->n; j++) {
        if (skip_acc && sc->ls[j].src == FUSE_SRC_ACC) continue;
        if (find_load(ls, n, &sc->ls[j]) < 0 && ++m > cap) return -1;
    }
    return m;
}

/* Adds sc's loads to list ls (capacity LF_MAX_ARGS + 1; the union fits). */
static void union_add(pload *ls, int *n, const scan *sc, bool skip_acc) {
    for (int j = 0; j < sc->n; j++) {
        if (skip_acc && sc->ls[j].src == FUSE_SRC_ACC) continue;
        if (find_load(ls, *n, &sc->ls[j]) < 0) ls[(*n)++] = sc->ls[j];
    }
}

/* Whether sc shares a slot or iota load (source and index map) with ls. */
static bool shares(const pload *ls, int n, const scan *sc) {
    for (int j = 0; j < sc->n; j++)
        if (sc->ls[j].src != FUSE_SRC_ACC && find_load(ls, n, &sc->ls[j]) >= 0) return true;
    return false;
}

static pload *new_list(planner *p) {
    return scratch_alloc(&p->tmp, (LF_MAX_ARGS + 1) * sizeof(pload));
}

/* Whether root e's code fits in kernel u under FUSE_MAX_OPS. */
static bool ops_fit(const planner *p, int e, const unit *u) {
    return (int64_t)u->nops + p->kops[e] <= FUSE_MAX_OPS;
}

/* Takes u off the open list. */
static void unlink_open(planner *p, unit *u) {
    if (u->prev) u->prev->next = u->next;
    else p->units = u->next;
    if (u->next) u->next->prev = u->prev;
    else p->units_tail = u->prev;
    u->next = u->prev = NULL;
}

/* Keeps the open list short: a kernel with FUSE_MAX_STORES roots is closed;
 * an elementwise one whose body has LF_MAX_ARGS loads is parked (indexed by
 * its loads: only a root that shares one can still join). The order in which
 * join_space tries kernels is unchanged. false: out of memory. */
static bool retire(planner *p, unit *u) {
    if (u->closed) return true;
    if (u->nroots >= FUSE_MAX_STORES) {
        if (!u->parked) unlink_open(p, u);
        u->closed = true;
        return true;
    }
    if (u->parked || u->red || u->npl[0] < LF_MAX_ARGS) return true;
    if ((p->pcount + (size_t)u->npl[0]) * 2 > p->pcap) {
        size_t cap = p->pcap ? 2 * p->pcap : 256;
        while ((p->pcount + (size_t)u->npl[0]) * 2 > cap) cap *= 2;
        park **t = scratch_calloc(&p->tmp, cap, sizeof *t);
        if (!t) return false;
        for (size_t b = 0; b < p->pcap; b++)
            for (park *x = p->pidx[b], *next; x; x = next) {
                next = x->next;
                x->next = t[x->hash & (cap - 1)];
                t[x->hash & (cap - 1)] = x;
            }
        p->pidx = t;
        p->pcap = cap;
    }
    for (int j = 0; j < u->npl[0]; j++) {
        park *x = scratch_alloc(&p->tmp, sizeof *x);
        if (!x) return false;
        x->load = &u->pl[0][j];
        x->hash = load_hash(x->load);
        x->u = u;
        x->next = p->pidx[x->hash & (p->pcap - 1)];
        p->pidx[x->hash & (p->pcap - 1)] = x;
        p->pcount++;
    }
    unlink_open(p, u);
    u->parked = true;
    u->next = p->parked; /* the parked list: zero-load roots try them all */
    p->parked = u;
    return true;
}

static void join(planner *p, int e, unit *u, role r) {
    u->nroots++;
    u->nops += p->kops[e];
    p->merged_into[e] = u->host;
    p->host[e] = u->host;
    p->role[e] = (unsigned char)r;
}

/* Reduction r joins an earlier reduction kernel over its space and axes as
 * a later pass (it reads the kernel's results) or in its first pass
 * (horizontal). Returns 1 if it joined, 0 if not, -1 out of memory. */
static int join_reduce(planner *p, int r) {
    const lf_node *rn = p->g->nodes[r], *in = rn->inputs[0];
    scan sc;
    for (unit *u = p->units; u; u = u->next) {
        if (!u->red || u->mask != rn->u.reduce.axes || u->nroots >= FUSE_MAX_STORES ||
            !same_shape(u->ndim, u->shape, in->ndim, in->shape) || !ops_fit(p, r, u))
            continue;
        scan_root(p, r, u, ROLE_PASS, &sc);
        if (!sc.ok) continue;
        int q = sc.phase + 1;
        if (q >= FUSE_MAX_PASSES || q > u->npasses || u->nreds + 1 + u->nepi > LF_MAX_ARGS) continue;
        bool link = sc.acc || (p->output[r] >= 0 && u->out_red);
        for (int k = 0; k < u->npasses && !link; k++) link = shares(u->pl[k], u->npl[k], &sc);
        if (!link && u->row) link = shares(u->row, u->nrow, &sc);
        if (!link) continue;
        if (q == u->npasses) {
            if (!(u->pl[q] = new_list(p))) return -1;
            u->npl[q] = 0;
            u->npasses++;
        }
        if (union_size(u->pl[q], u->npl[q], &sc, false, LF_MAX_ARGS) < 0) {
            if (u->npl[q] == 0) u->npasses--; /* the new pass stays empty */
            continue;
        }
        union_add(u->pl[q], &u->npl[q], &sc, false);
        u->nreds++;
        u->out_red |= p->output[r] >= 0;
        join(p, r, u, ROLE_PASS);
        p->pass[r] = q;
        return retire(p, u) ? 1 : -1;
    }
    return 0;
}

/* Elementwise root e joins the reduction kernel of the latest reduction it
 * reads as an epilogue. */
static int join_epilogue(planner *p, int e) {
    const lf_node *en = p->g->nodes[e];
    int r = -1;
    for (int j = 0; j < p->kcount[e]; j++) {
        const lf_node *x = p->klist[e][j]->node;
        if (x->kind == NODE_REDUCE && x->id != e && p->root[x->id] && x->id > r) r = x->id;
    }
    if (r < 0) return 0;
    unit *u = p->unit[unit_of(p, r)];
    if (!u || !u->red || u->nroots >= FUSE_MAX_STORES || !ops_fit(p, e, u) ||
        !same_shape(en->ndim, en->shape, u->out->ndim, u->out->shape))
        return 0;
    scan sc;
    scan_root(p, e, u, ROLE_EPI, &sc);
    if (!sc.ok) return 0;
    int m = union_size(u->epi, u->nepi, &sc, true, LF_MAX_ARGS);
    if (m < 0 || m + u->nreds > LF_MAX_ARGS) return 0;
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
        !ops_fit(p, e, u))
        return 0;
    scan_root(p, e, u, u->red ? ROLE_ROW : ROLE_BODY, &sc);
    if (!sc.ok) return 0;
    pload *ls = u->red ? u->row : u->pl[0];
    int n = u->red ? u->nrow : u->npl[0];
    bool link = sc.acc || (ls && (shares(ls, n, &sc) || (out && u->out_row)));
    if (!link || union_size(ls, ls ? n : 0, &sc, false, LF_MAX_ARGS) < 0) return 0;
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
 * the open ones and the parked ones that have e's first load (all parked
 * ones when e has no load), in root order. 1 joined, 0 not, -1 out of memory. */
static int join_space(planner *p, int e) {
    pload first;
    bool has = false;
    for (int j = 0; j < p->kcount[e] && !has; j++) {
        const inst *i = p->klist[e][j];
        has = is_leaf(p, i->node, e) && leaf_load(p, i, -1, &first);
    }
    int nc = 0;
    unit **cand = NULL;
    if (p->parked) {
        int cap = 0;
        if (has) {
            uint64_t h = load_hash(&first);
            for (park *x = p->pidx[h & (p->pcap - 1)]; x; x = x->next) cap++;
        } else {
            for (unit *u = p->parked; u; u = u->next) cap++;
        }
        if (cap && !(cand = scratch_alloc(&p->tmp, (size_t)cap * sizeof *cand))) return -1;
        if (has) {
            uint64_t h = load_hash(&first);
            for (park *x = p->pidx[h & (p->pcap - 1)]; x; x = x->next)
                if (!x->u->closed && x->hash == h && x->load->src == first.src && x->load->key == first.key &&
                    map_equal(x->load->map, first.map))
                    cand[nc++] = x->u;
        } else {
            for (unit *u = p->parked; u; u = u->next)
                if (!u->closed) cand[nc++] = u;
        }
        if (nc > 1) qsort(cand, (size_t)nc, sizeof *cand, cmp_host);
    }
    unit *u = p->units;
    int c = 0;
    while (u || c < nc) {
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

/* Root e starts a kernel of its own. */
static unit *start_unit(planner *p, int e, unit **tail) {
    const lf_node *en = p->g->nodes[e];
    unit *u = scratch_calloc(&p->tmp, 1, sizeof *u);
    if (!u || !(u->pl[0] = new_list(p)) || !(u->epi = new_list(p))) return NULL;
    u->host = e;
    u->red = en->kind == NODE_REDUCE;
    const lf_node *space = u->red ? en->inputs[0] : en;
    u->ndim = space->ndim;
    memcpy(u->shape, space->shape, sizeof u->shape);
    u->npasses = 1;
    u->nroots = 1;
    u->nops = p->kops[e];
    if (u->red) {
        u->mask = en->u.reduce.axes;
        u->out = en;
        u->nreds = 1;
        u->out_red = p->output[e] >= 0;
    } else {
        u->out_row = p->output[e] >= 0;
    }
    /* its own loads; more than LF_MAX_ARGS makes it full (it will be split) */
    for (int j = 0; j < p->kcount[e] && u->npl[0] <= LF_MAX_ARGS; j++) {
        const inst *i = p->klist[e][j];
        pload l;
        if (!is_leaf(p, i->node, e) || !leaf_load(p, i, -1, &l)) continue;
        if (find_load(u->pl[0], u->npl[0], &l) < 0) u->pl[0][u->npl[0]++] = l;
    }
    p->role[e] = u->red ? ROLE_PASS : ROLE_BODY;
    p->pass[e] = 0;
    p->unit[e] = u;
    (void)tail;
    u->prev = p->units_tail;
    if (p->units_tail) p->units_tail->next = u;
    else p->units = u;
    p->units_tail = u;
    return retire(p, u) ? u : NULL;
}

/* Forms the kernels of this round: every needed root, in node order, joins
 * an earlier kernel or starts its own (see the rules at the top). */
static lf_status plan_merges(planner *p) {
    int nn = p->nn;
    for (int id = 0; id < nn; id++) {
        p->merged_into[id] = -1;
        p->host[id] = id;
        p->role[id] = p->g->nodes[id]->kind == NODE_REDUCE ? ROLE_PASS : ROLE_BODY;
        p->pass[id] = 0;
    }
    p->units = p->units_tail = p->parked = NULL;
    p->pidx = NULL;
    p->pcap = p->pcount = 0;
    p->unit = scratch_calloc(&p->tmp, (size_t)nn, sizeof *p->unit);
    if (!p->unit) return nomem(p);
    if (!p->fusion) return LF_OK;
    unit *tail = NULL;
    for (int e = 0; e < nn; e++) {
        const lf_node *en = p->g->nodes[e];
        if (!p->needed[e] || !p->root[e]) continue;
        int joined;
        if (en->kind == NODE_REDUCE) joined = join_reduce(p, e);
        else if ((joined = join_epilogue(p, e)) == 0) joined = join_space(p, e);
        if (joined < 0) return nomem(p);
        if (!joined && !start_unit(p, e, &tail)) return nomem(p);
    }
    return LF_OK;
}

/* A node to make a root because its kernel has too many loads, or -1 when
 * all kernels fit: the inlined map node whose subtree gathers the most loads
 * (counted as a tree, so an upper bound) while still fitting in one kernel. */
static int find_victim(planner *p) {
    pload ls[LF_MAX_ARGS + 2];
    for (int k = 0; k < p->nn; k++) {
        if (!p->kcount[k] || p->merged_into[k] >= 0) continue;
        if (count_loads(p, k, ls, LF_MAX_ARGS) <= LF_MAX_ARGS) continue;
        inst *best = NULL;
        for (int j = 0; j < p->kcount[k]; j++) {
            inst *i = p->klist[k][j];
            const lf_node *n = i->node;
            if (is_leaf(p, n, k)) {
                i->nload = n->kind == NODE_CONST ? 0 : 1;
                continue;
            }
            int64_t s = 0;
            for (int a = 0; a < n->ninputs; a++) s += i->in[a]->nload;
            i->nload = s > COST_CAP ? COST_CAP : (int)s;
            /* the largest inlined subtree that fits in a kernel of its own */
            if (n->kind == NODE_MAP && n->id != k && i->nload >= 2 && i->nload <= LF_MAX_ARGS &&
                (!best || i->nload > best->nload || (i->nload == best->nload && n->id > best->node->id)))
                best = i;
        }
        if (best) return best->node->id;
    }
    return -1;
}

/* Splits the kernels with more than FUSE_MAX_OPS operations: walking a
 * kernel's inlined map instances in node order (producers first) and
 * counting their fns' operations, the last node before the count would pass
 * the cap becomes a root and the count restarts after it. Returns how many
 * roots it made. */
static int split_big(planner *p) {
    int added = 0;
    for (int k = 0; k < p->nn; k++) {
        if (!p->kcount[k] || p->kops[k] <= FUSE_MAX_OPS) continue;
        int64_t run = 0;
        const inst *last = NULL;
        for (int j = 0; j < p->kcount[k]; j++) {
            const inst *i = p->klist[k][j];
            const lf_node *n = i->node;
            if (n->kind != NODE_MAP || is_leaf(p, n, k)) continue;
            if (run + p->fnops[n->id] > FUSE_MAX_OPS && last) {
                p->root[last->node->id] = true;
                added++;
                run = 0;
                last = NULL;
                if (is_leaf(p, n, k)) continue; /* another instance of the new root */
            }
            run += p->fnops[n->id];
            if (n->id != k) last = i;
        }
    }
    return added;
}

/* ---- pass 2: building the schedule ------------------------------------------------------------ */

typedef struct kbuild {
    pload loads[LF_MAX_ARGS + 1]; /* loads of the fn being built */
    int nloads;
} kbuild;

/* Copies a scratch map into graph_malloc'd memory. */
static bool map_keep(fuse_map *dst, const fuse_map *src) {
    dst->steps = graph_malloc((size_t)src->nsteps * sizeof *dst->steps);
    if (!dst->steps) return false;
    memcpy(dst->steps, src->steps, (size_t)src->nsteps * sizeof *dst->steps);
    dst->nsteps = src->nsteps;
    return true;
}

/* Whether expression i of f is weak (a literal not yet met by a strong value),
 * given the weakness of its operands; mirrors graph_fn_types. */
static bool expr_weak(const lf_fn *f, int i, const bool *weak) {
    const fn_expr *e = &f->exprs[i];
    switch (e->kind) {
    case EXPR_CONST: return true;
    case EXPR_PARAM:
    case EXPR_CAST: return false;
    case EXPR_OP: break;
    }
    const op_info *oi = &graph_ops[e->op];
    if (oi->typing == OPTY_CMP || oi->typing == OPTY_LOGIC || oi->typing == OPTY_PRED) return false;
    for (int k = oi->typing == OPTY_SELECT ? 1 : 0; k < oi->arity; k++)
        if (!weak[e->arg[k]]) return false;
    return true;
}

/* Emits the code of one instance into f (its inputs' instances are emitted
 * already). Loads were numbered in kb; grp as for leaf_load. Returns false
 * on failure. */
static bool emit_inst(planner *p, lf_fn *f, const kbuild *kb, inst *i, int grp) {
    const lf_node *n = i->node;
    if (is_leaf(p, n, i->kernel)) {
        fn_expr e;
        if (n->kind == NODE_CONST) {
            fn_expr lit = graph_fn_blank_expr(EXPR_CONST);
            lit.is_int = !graph_dtype_is_float(n->dtype);
            lit.value = n->u.value;
            int l = graph_fn_add(f, &lit);
            if (l < 0) return false;
            e = graph_fn_blank_expr(EXPR_CAST);
            e.cast_to = n->dtype;
            e.arg[0] = l;
        } else {
            pload l;
            leaf_load(p, i, grp, &l);
            e = graph_fn_blank_expr(EXPR_PARAM);
            e.param = find_load(kb->loads, kb->nloads, &l);
            assert(e.param >= 0);
        }
        return (i->expr = graph_fn_add(f, &e)) >= 0;
    }
    switch (n->kind) {
    case NODE_VIEW: i->expr = i->in[0]->expr; return true;
    case NODE_REDUCE: return true; /* the seed of a reduction kernel: folded, not emitted */
    case NODE_MAP: break;
    default: return false;
    }
    const lf_fn *g = n->u.map.fn;
    int *map = scratch_alloc(&p->tmp, (size_t)g->nexprs * (sizeof(int) + sizeof(bool)));
    if (!map) return false;
    bool *weak = (bool *)(map + g->nexprs);
    /* only the expressions the result depends on */
    for (int x = 0; x < g->nexprs; x++) map[x] = x == g->result ? 1 : 0;
    for (int x = g->result; x >= 0; x--)
        if (map[x])
            for (int k = 0; k < 3; k++)
                if (g->exprs[x].arg[k] >= 0) map[g->exprs[x].arg[k]] = 1;
    for (int x = 0; x <= g->result; x++) {
        if (!map[x]) continue;
        fn_expr e = g->exprs[x];
        weak[x] = expr_weak(g, x, weak);
        if (e.kind == EXPR_PARAM) {
            map[x] = i->in[e.param]->expr;
            continue;
        }
        for (int k = 0; k < 3; k++)
            if (e.arg[k] >= 0) e.arg[k] = map[e.arg[k]];
        if ((map[x] = graph_fn_add(f, &e)) < 0) return false;
    }
    int r = map[g->result];
    if (weak[g->result]) { /* a weak result: the reference rounds it to the node's dtype */
        fn_expr c = graph_fn_blank_expr(EXPR_CAST);
        c.cast_to = n->dtype;
        c.arg[0] = r;
        if ((r = graph_fn_add(f, &c)) < 0) return false;
    }
    i->expr = r;
    return true;
}

/* Adds the loads of root k's leaf instances to kb (grp as for leaf_load). */
static void collect_loads(planner *p, int k, int grp, kbuild *kb) {
    for (int j = 0; j < p->kcount[k]; j++) {
        const inst *i = p->klist[k][j];
        pload l;
        if (!is_leaf(p, i->node, k)) continue;
        if (!leaf_load(p, i, grp, &l) || find_load(kb->loads, kb->nloads, &l) >= 0) continue;
        assert(kb->nloads < LF_MAX_ARGS);
        kb->loads[kb->nloads++] = l;
    }
}

/* Creates an fn in the schedule's arena with the loads of kb as parameters,
 * and its load array. */
static lf_fn *start_fn(planner *p, fuse_schedule *s, const kbuild *kb, fuse_load **loads,
                       int *nloads) {
    lf_fn *f = graph_fn_create(s->arena, kb->nloads ? kb->nloads : 1, NULL);
    if (!f) return NULL;
    *loads = graph_calloc((size_t)(kb->nloads ? kb->nloads : 1), sizeof **loads);
    if (!*loads) return NULL;
    *nloads = kb->nloads; /* before the maps, so a failure frees the ones made */
    for (int j = 0; j < kb->nloads; j++) {
        const pload *l = &kb->loads[j];
        fuse_load *ld = &(*loads)[j];
        ld->src = l->src;
        ld->node = l->node;
        ld->dtype = l->node->dtype;
        ld->slot = l->src == FUSE_SRC_SLOT ? p->slot_of[l->node->id] : -1;
        if (l->src != FUSE_SRC_ACC && !map_keep(&ld->map, l->map)) return NULL;
    }
    return f;
}

/* Types fn f for its loads into freshly allocated arrays. */
static bool type_fn(lf_fn *f, const fuse_load *loads, int nloads, lf_dtype **et, lf_dtype **ct) {
    if (f->nexprs == 0) return false;
    f->result = f->nexprs - 1;
    lf_dtype params[LF_MAX_ARGS] = {LF_BOOL};
    for (int j = 0; j < nloads; j++) params[j] = loads[j].dtype;
    *et = graph_malloc((size_t)f->nexprs * sizeof **et);
    *ct = graph_malloc((size_t)f->nexprs * sizeof **ct);
    return *et && *ct && graph_fn_types(f, params, *et, *ct) != LF_NDTYPES;
}

static bool add_store(fuse_kernel *kn, int slot, int expr, bool row) {
    fuse_store *st = graph_realloc(kn->stores, (size_t)(kn->nstores + 1) * sizeof *st);
    if (!st) return false;
    kn->stores = st;
    st[kn->nstores++] = (fuse_store){slot, expr, row};
    return true;
}

/* Whether root r's value must be stored. */
static bool is_stored(const planner *p, int r) {
    const lf_node *n = p->g->nodes[r];
    if (p->output[r] >= 0) return true;
    if (n->kind == NODE_INPUT) return false;
    if (n->materialize) return true;
    for (const inst *i = p->first[r]; i; i = i->next_node)
        if (unit_of(p, i->kernel) != unit_of(p, r)) return true;
    return false;
}

static int new_slot(fuse_schedule *s, fuse_slot_kind kind, const lf_node *n) {
    fuse_slot *sl = &s->slots[s->nslots];
    memset(sl, 0, sizeof *sl);
    sl->kind = kind;
    sl->node = n;
    sl->output = -1;
    sl->dtype = n->dtype;
    sl->numel = n->numel;
    sl->bytes = (size_t)n->numel * lf_dtype_size(n->dtype);
    sl->def = sl->last_use = sl->block = -1;
    if (kind == FUSE_SLOT_INPUT) sl->buffer = n->u.buffer;
    return s->nslots++;
}

/* The buffer plan: input, output and temporary slots. */
static lf_status plan_slots(planner *p, fuse_schedule *s, int n, lf_node *const *outs) {
    int nn = p->nn;
    s->slots = graph_calloc(2 * (size_t)nn + 1, sizeof *s->slots);
    s->out_slot = graph_calloc((size_t)n, sizeof *s->out_slot);
    if (!s->slots || !s->out_slot) return nomem(p);
    s->nouts = n;
    for (int id = 0; id < nn; id++) p->slot_of[id] = -1;
    for (int id = 0; id < nn; id++) {
        const lf_node *x = p->g->nodes[id];
        if (!p->needed[id] || x->kind != NODE_INPUT) continue;
        for (int j = 0; j < s->nslots && p->slot_of[id] < 0; j++)
            if (s->slots[j].buffer == x->u.buffer) p->slot_of[id] = j;
        if (p->slot_of[id] < 0) p->slot_of[id] = new_slot(s, FUSE_SLOT_INPUT, x);
    }
    int *oslot = p->oslot;
    for (int id = 0; id < nn; id++) oslot[id] = -1;
    for (int i = 0; i < n; i++) {
        int id = outs[i]->id;
        if (oslot[id] < 0) {
            oslot[id] = new_slot(s, FUSE_SLOT_OUTPUT, outs[i]);
            s->slots[oslot[id]].output = i;
        }
        s->out_slot[i] = oslot[id];
    }
    for (int id = 0; id < nn; id++) {
        if (!p->needed[id] || !p->root[id]) continue;
        if (oslot[id] >= 0) {
            if (p->g->nodes[id]->kind != NODE_INPUT) p->slot_of[id] = oslot[id];
        } else if (is_stored(p, id)) {
            p->slot_of[id] = new_slot(s, FUSE_SLOT_TEMP, p->g->nodes[id]);
        }
    }
    return LF_OK;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Records the graph nodes kernel k (and its epilogues) computes. */
static bool kernel_nodes(planner *p, fuse_kernel *kn, int k) {
    int cap = 0;
    for (int e = k; e >= 0; e = p->next_member[e])
        if (e == k || p->merged_into[e] == k) cap += p->kcount[e];
    kn->nodes = graph_malloc((size_t)(cap ? cap : 1) * sizeof *kn->nodes);
    if (!kn->nodes) return false;
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (e != k && p->merged_into[e] != k) continue;
        for (int j = 0; j < p->kcount[e]; j++) {
            const lf_node *x = p->klist[e][j]->node;
            if (x->kind == NODE_INPUT || (p->root[x->id] && x->id != e)) continue;
            kn->nodes[kn->nnodes++] = x->id;
        }
    }
    qsort(kn->nodes, (size_t)kn->nnodes, sizeof *kn->nodes, cmp_int);
    int m = 0;
    for (int j = 0; j < kn->nnodes; j++)
        if (!m || kn->nodes[m - 1] != kn->nodes[j]) kn->nodes[m++] = kn->nodes[j];
    kn->nnodes = m;
    return true;
}

/* The slot root e's value is stored to, or -1. */
static int store_slot(const planner *p, int e) {
    return p->g->nodes[e]->kind == NODE_INPUT ? p->oslot[e] : p->slot_of[e];
}

/* Emits the instances of root e into f and stores e's value (if stored). */
static bool emit_root(planner *p, fuse_kernel *kn, lf_fn *f, const kbuild *kb, int e, int grp,
                      bool row, inst **seed) {
    *seed = NULL;
    for (int j = 0; j < p->kcount[e]; j++) {
        inst *i = p->klist[e][j];
        if (i->node->id == e) *seed = i;
        if (!emit_inst(p, f, kb, i, grp)) return false;
    }
    assert(*seed);
    if (p->g->nodes[e]->kind == NODE_REDUCE) return true; /* folded, stored by the epilogue */
    int sl = store_slot(p, e);
    return sl < 0 || add_store(kn, sl, (*seed)->expr, row);
}

/* Builds one fn of kernel k from the roots of the kernel with role r (and,
 * for ROLE_PASS, pass q), after the loads already in kb. */
static lf_status build_fn(planner *p, fuse_schedule *s, fuse_kernel *kn, int k, role r, int q,
                          kbuild *kb, fuse_pass *out) {
    int grp = r != ROLE_BODY ? k : -1;
    for (int e = k; e >= 0; e = p->next_member[e])
        if (unit_of(p, e) == k && p->root[e] && p->role[e] == r && (r != ROLE_PASS || p->pass[e] == q))
            collect_loads(p, e, grp, kb);
    out->fn = start_fn(p, s, kb, &out->loads, &out->nloads);
    if (!out->fn) return nomem(p);
    /* parameters first: the epilogue's stored reductions read them */
    for (int j = 0; j < kb->nloads; j++) {
        fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
        e.param = j;
        if (kb->loads[j].src == FUSE_SRC_ACC && graph_fn_add(out->fn, &e) < 0) return nomem(p);
    }
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (unit_of(p, e) != k || !p->root[e] || p->role[e] != r || (r == ROLE_PASS && p->pass[e] != q))
            continue;
        inst *seed;
        if (!emit_root(p, kn, out->fn, kb, e, grp, r == ROLE_ROW, &seed)) return nomem(p);
        if (r == ROLE_PASS) /* the reductions are listed in pass order, then node order */
            for (int j = 0; j < kn->nreds; j++)
                if (kn->reds[j].node->id == e) kn->reds[j].expr = seed->in[0]->expr;
    }
    if (r == ROLE_EPI) /* the kernel's reductions that are stored */
        for (int j = 0; j < kb->nloads; j++) {
            const lf_node *x = kb->loads[j].node;
            if (kb->loads[j].src != FUSE_SRC_ACC || p->slot_of[x->id] < 0) continue;
            bool dup = false;
            for (int t = 0; t < kn->nstores; t++) dup |= kn->stores[t].slot == p->slot_of[x->id];
            fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
            e.param = j;
            int id = graph_fn_add(out->fn, &e);
            if (id < 0 || (!dup && !add_store(kn, p->slot_of[x->id], id, false))) return nomem(p);
        }
    if (!type_fn(out->fn, out->loads, out->nloads, &out->etype, &out->ctype)) return nomem(p);
    for (int j = 0; j < out->nloads; j++) /* ACC loads name their reduction */
        for (int t = 0; t < kn->nreds; t++)
            if (out->loads[j].src == FUSE_SRC_ACC && kn->reds[t].node == out->loads[j].node)
                out->loads[j].red = t;
    return LF_OK;
}

/* Builds the kernel of root k (and of the roots that joined it) into kn. */
static lf_status build_kernel(planner *p, fuse_schedule *s, int k, fuse_kernel *kn) {
    const lf_node *rn = p->g->nodes[k];
    kbuild kb;
    lf_status st;
    memset(kn, 0, sizeof *kn);
    kn->root = k;
    kn->red_expr = -1;
    if (!kernel_nodes(p, kn, k)) return nomem(p);
    bool red = rn->kind == NODE_REDUCE;
    const lf_node *space = red ? rn->inputs[0] : rn;
    kn->ndim = space->ndim;
    memcpy(kn->shape, space->shape, sizeof kn->shape);
    kn->numel = space->numel;
    const unit *u = p->unit[k];
    kn->npasses = u ? u->npasses : 1;
    kn->passes = graph_calloc((size_t)kn->npasses, sizeof *kn->passes);
    if (!kn->passes) return nomem(p);
    if (!red) {
        kb.nloads = 0;
        fuse_pass body;
        memset(&body, 0, sizeof body);
        st = build_fn(p, s, kn, k, ROLE_BODY, 0, &kb, &body);
        kn->body = body.fn, kn->loads = body.loads, kn->nloads = body.nloads;
        kn->body_etype = body.etype, kn->body_ctype = body.ctype;
        kn->passes[0] = body;
        return st;
    }
    kn->redmask = rn->u.reduce.axes;
    kn->out_ndim = rn->ndim;
    memcpy(kn->out_shape, rn->shape, sizeof kn->out_shape);
    kn->out_numel = rn->numel;
    /* the reductions, by pass then node id */
    for (int e = k; e >= 0; e = p->next_member[e]) kn->nreds += unit_of(p, e) == k && p->root[e] && p->role[e] == ROLE_PASS;
    kn->reds = graph_calloc((size_t)kn->nreds, sizeof *kn->reds);
    if (!kn->reds) return nomem(p);
    int nr = 0;
    for (int q = 0; q < kn->npasses; q++)
        for (int e = k; e >= 0; e = p->next_member[e]) {
            const lf_node *x = p->g->nodes[e];
            if (unit_of(p, e) != k || !p->root[e] || p->role[e] != ROLE_PASS || p->pass[e] != q) continue;
            kn->reds[nr++] = (fuse_red){x->u.reduce.op, q, -1, x->inputs[0]->dtype, x};
        }
    assert(nr == kn->nreds && kn->reds[0].node == rn);
    for (int q = 0; q < kn->npasses; q++) {
        kb.nloads = 0;
        fuse_pass *ps = &kn->passes[q];
        /* a pass's fn must not be empty: its reductions always emit */
        if ((st = build_fn(p, s, kn, k, ROLE_PASS, q, &kb, ps)) != LF_OK) {
            if (q == 0) { /* owned through the body fields from here on */
                kn->body = ps->fn, kn->loads = ps->loads, kn->nloads = ps->nloads;
                kn->body_etype = ps->etype, kn->body_ctype = ps->ctype;
                memset(ps, 0, sizeof *ps);
            }
            return st;
        }
        if (q == 0) {
            kn->body = ps->fn, kn->loads = ps->loads, kn->nloads = ps->nloads;
            kn->body_etype = ps->etype, kn->body_ctype = ps->ctype;
        }
    }
    kn->red_op = kn->reds[0].op;
    kn->red_expr = kn->reds[0].expr;
    kn->red_in = kn->reds[0].in;
    kn->red_node = rn;
    /* epilogue: load 0 is the root reduction, then every other stored one */
    kb.nloads = 0;
    for (int j = 0; j < kn->nreds; j++) {
        const lf_node *x = kn->reds[j].node;
        if (j == 0 || p->slot_of[x->id] >= 0) kb.loads[kb.nloads++] = (pload){FUSE_SRC_ACC, x, x, NULL};
    }
    fuse_pass epi;
    memset(&epi, 0, sizeof epi);
    st = build_fn(p, s, kn, k, ROLE_EPI, 0, &kb, &epi);
    kn->epi = epi.fn, kn->epi_loads = epi.loads, kn->nepi_loads = epi.nloads;
    kn->epi_etype = epi.etype, kn->epi_ctype = epi.ctype;
    if (st != LF_OK || !u || !u->row) return st;
    /* the row pass */
    kb.nloads = 0;
    fuse_pass row;
    memset(&row, 0, sizeof row);
    st = build_fn(p, s, kn, k, ROLE_ROW, 0, &kb, &row);
    kn->row = row.fn, kn->row_loads = row.loads, kn->nrow_loads = row.nloads;
    kn->row_etype = row.etype, kn->row_ctype = row.ctype;
    return st;
}

const fuse_load *fuse_kernel_fn_loads(const fuse_kernel *kn, int f, int *n, int64_t *iters) {
    int64_t it = kn->numel;
    const fuse_load *ls = NULL;
    *n = 0;
    if (f == 0) {
        *n = kn->nloads, ls = kn->loads;
    } else if (f < kn->npasses) {
        *n = kn->passes[f].nloads, ls = kn->passes[f].loads;
    } else if (f == kn->npasses) {
        *n = kn->nepi_loads, ls = kn->epi_loads, it = kn->out_numel;
    } else if (f == kn->npasses + 1) {
        *n = kn->nrow_loads, ls = kn->row_loads;
    }
    if (iters) *iters = it;
    return ls;
}

/* Slot lifetimes and the sharing of memory blocks between temporaries. */
static lf_status plan_memory(planner *p, fuse_schedule *s) {
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) s->slots[kn->stores[j].slot].def = k;
        for (int f = 0; f < kn->npasses + 2; f++) {
            int n;
            const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, NULL);
            for (int j = 0; j < n; j++)
                if (ls[j].src == FUSE_SRC_SLOT) s->slots[ls[j].slot].last_use = k;
        }
    }
    int ntemp = 0;
    for (int j = 0; j < s->nslots; j++) ntemp += s->slots[j].kind == FUSE_SLOT_TEMP;
    s->block_bytes = graph_calloc((size_t)(ntemp ? ntemp : 1), sizeof *s->block_bytes);
    int *busy = graph_calloc((size_t)(ntemp ? ntemp : 1), sizeof *busy);
    if (!s->block_bytes || !busy) {
        graph_free(busy);
        return nomem(p);
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) {
            fuse_slot *sl = &s->slots[kn->stores[j].slot];
            if (sl->kind != FUSE_SLOT_TEMP || sl->block >= 0) continue;
            /* best fit among free blocks: the smallest that holds it, else the largest */
            int best = -1;
            for (int b = 0; b < s->nblocks; b++) {
                if (busy[b] >= k) continue;
                if (best < 0) best = b;
                else {
                    bool fits = s->block_bytes[b] >= sl->bytes, bfits = s->block_bytes[best] >= sl->bytes;
                    if ((fits && (!bfits || s->block_bytes[b] < s->block_bytes[best])) ||
                        (!fits && !bfits && s->block_bytes[b] > s->block_bytes[best]))
                        best = b;
                }
            }
            if (best < 0) best = s->nblocks++;
            sl->block = best;
            if (sl->bytes > s->block_bytes[best]) s->block_bytes[best] = sl->bytes;
            busy[best] = sl->last_use > k ? sl->last_use : k;
        }
    }
    graph_free(busy);
    return LF_OK;
}

/* The traffic statistics of lazyfuse.h (bytes_read: per kernel, per slot it
 * loads, the largest min(slot bytes, loop iterations x element size) over
 * its loads of that slot), in one walk over the loads. */
static lf_status plan_traffic(planner *p, fuse_schedule *s) {
    int *mark = scratch_calloc(&p->keep, (size_t)s->nslots + 1, sizeof *mark);
    size_t *cur = scratch_calloc(&p->keep, (size_t)s->nslots + 1, sizeof *cur);
    if (!mark || !cur) return nomem(p);
    for (int j = 0; j < s->nslots; j++) {
        mark[j] = -1;
        if (s->slots[j].kind == FUSE_SLOT_TEMP) s->bytes_materialized += s->slots[j].bytes;
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) s->bytes_written += s->slots[kn->stores[j].slot].bytes;
        for (int f = 0; f < kn->npasses + 2; f++) {
            int n;
            int64_t iters;
            const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, &iters);
            for (int j = 0; j < n; j++) {
                if (ls[j].src != FUSE_SRC_SLOT) continue;
                int sl = ls[j].slot;
                size_t want = (size_t)iters * lf_dtype_size(s->slots[sl].dtype);
                if (want > s->slots[sl].bytes) want = s->slots[sl].bytes;
                if (mark[sl] != k) mark[sl] = k, cur[sl] = 0;
                if (want > cur[sl]) {
                    s->bytes_read += want - cur[sl];
                    cur[sl] = want;
                }
            }
        }
    }
    return LF_OK;
}

/* ---- the planner ----------------------------------------------------------------------------------- */

/* Frees what a kernel owns (its fns belong to the schedule's arena). */
static void loads_free(fuse_load *ls, int n) {
    if (ls)
        for (int j = 0; j < n; j++) graph_free(ls[j].map.steps);
    graph_free(ls);
}

static void kernel_free(fuse_kernel *kn) {
    loads_free(kn->loads, kn->nloads);
    loads_free(kn->epi_loads, kn->nepi_loads);
    loads_free(kn->row_loads, kn->nrow_loads);
    graph_free(kn->body_etype);
    graph_free(kn->body_ctype);
    graph_free(kn->epi_etype);
    graph_free(kn->epi_ctype);
    graph_free(kn->row_etype);
    graph_free(kn->row_ctype);
    if (kn->passes)
        for (int q = 1; q < kn->npasses; q++) { /* passes[0] is the body */
            loads_free(kn->passes[q].loads, kn->passes[q].nloads);
            graph_free(kn->passes[q].etype);
            graph_free(kn->passes[q].ctype);
        }
    graph_free(kn->passes);
    graph_free(kn->reds);
    graph_free(kn->stores);
    graph_free(kn->nodes);
    memset(kn, 0, sizeof *kn);
}


void fuse_schedule_free(fuse_schedule *s) {
    if (!s) return;
    for (int k = 0; k < s->nkernels; k++) kernel_free(&s->kernels[k]);
    graph_free(s->kernels);
    graph_free(s->slots);
    graph_free(s->out_slot);
    graph_free(s->block_bytes);
    if (s->arena) {
        while (s->arena->fns) {
            lf_fn *f = s->arena->fns;
            s->arena->fns = f->next;
            graph_fn_destroy(f);
        }
        graph_free(s->arena);
    }
    graph_free(s);
}

static lf_status plan(planner *p, fuse_schedule *s, int n, lf_node *const *outs) {
    lf_graph *g = p->g;
    int nn = g->nnodes;
    scratch *K = &p->keep;
    p->needed = scratch_calloc(K, (size_t)nn, sizeof *p->needed);
    p->root = scratch_calloc(K, (size_t)nn, sizeof *p->root);
    p->output = scratch_calloc(K, (size_t)nn, sizeof *p->output);
    p->ops = scratch_calloc(K, (size_t)nn, sizeof *p->ops);
    p->fnops = scratch_calloc(K, (size_t)nn, sizeof *p->fnops);
    p->trans = scratch_calloc(K, (size_t)nn, sizeof *p->trans);
    p->cand = scratch_calloc(K, (size_t)nn, sizeof *p->cand);
    p->merged_into = scratch_calloc(K, (size_t)nn, sizeof *p->merged_into);
    p->role = scratch_calloc(K, (size_t)nn, sizeof *p->role);
    p->pass = scratch_calloc(K, (size_t)nn, sizeof *p->pass);
    p->slot_of = scratch_calloc(K, (size_t)nn, sizeof *p->slot_of);
    p->host = scratch_calloc(K, (size_t)nn, sizeof *p->host);
    p->oslot = scratch_calloc(K, (size_t)nn, sizeof *p->oslot);
    p->next_member = scratch_calloc(K, (size_t)nn, sizeof *p->next_member);
    p->first = scratch_calloc(K, (size_t)nn, sizeof *p->first);
    p->ninst = scratch_calloc(K, (size_t)nn, sizeof *p->ninst);
    p->iroot = scratch_calloc(K, (size_t)nn, sizeof *p->iroot);
    p->ck = scratch_calloc(K, (size_t)nn, sizeof *p->ck);
    p->klist = scratch_calloc(K, (size_t)nn, sizeof *p->klist);
    p->kcount = scratch_calloc(K, (size_t)nn, sizeof *p->kcount);
    p->kops = scratch_calloc(K, (size_t)nn, sizeof *p->kops);
    p->kops64 = scratch_calloc(K, (size_t)nn, sizeof *p->kops64);
    if (!p->first || !p->ninst || !p->iroot || !p->ck || !p->klist || !p->kcount || !p->kops || !p->kops64)
        return nomem(p);
    if (!p->host || !p->oslot || !p->fnops || !p->next_member) return nomem(p);
    if (!p->needed || !p->root || !p->output || !p->ops || !p->trans || !p->cand ||
        !p->merged_into || !p->role || !p->pass || !p->slot_of)
        return nomem(p);
    /* dead-node elimination and the fixed roots */
    for (int id = 0; id < nn; id++) p->output[id] = -1;
    for (int i = 0; i < n; i++) {
        p->needed[outs[i]->id] = p->root[outs[i]->id] = true;
        if (p->output[outs[i]->id] < 0) p->output[outs[i]->id] = i;
    }
    for (int id = nn - 1; id >= 0; id--) {
        if (!p->needed[id]) continue;
        const lf_node *x = g->nodes[id];
        for (int k = 0; k < x->ninputs; k++) p->needed[x->inputs[k]->id] = true;
        if (x->kind == NODE_REDUCE || (x->materialize && x->kind != NODE_INPUT) ||
            (!p->fusion && x->kind != NODE_VIEW && x->kind != NODE_INPUT && x->kind != NODE_CONST))
            p->root[id] = true;
    }
    s->unfused_temp_bytes = 0;
    for (int id = 0; id < nn; id++) {
        const lf_node *x = g->nodes[id];
        if (p->needed[id] && p->output[id] < 0 && x->kind != NODE_INPUT &&
            ((x->kind != NODE_VIEW && x->kind != NODE_CONST) || x->materialize))
            s->unfused_temp_bytes += (size_t)x->numel * lf_dtype_size(x->dtype);
    }
    for (int id = 0; id < nn; id++) /* each map's own operations (the split rule) */
        if (p->needed[id] && g->nodes[id]->kind == NODE_MAP) {
            const lf_fn *f = g->nodes[id]->u.map.fn;
            int c = 0;
            for (int e = 0; e < f->nexprs; e++) c += f->exprs[e].kind == EXPR_OP || f->exprs[e].kind == EXPR_CAST;
            p->fnops[id] = c ? c : 1;
        }
    /* rounds: instances, kernels (merges), shared expensive nodes, splits */
    for (;;) {
        lf_status st;
        if (p->fusion) compute_costs(p);
        if ((st = find_instances(p)) != LF_OK) return st;
        if ((st = plan_merges(p)) != LF_OK) return st;
        if (p->fusion) {
            int added = add_shared_roots(p);
            if (added < 0) return nomem(p);
            if (added) continue;
        }
        int victim = find_victim(p);
        if (victim >= 0) {
            p->root[victim] = true;
            continue;
        }
        if (!split_big(p)) break;
    }
    /* each kernel's roots, so that building it visits only them */
    for (int id = 0; id < nn; id++) p->next_member[id] = -1;
    for (int id = nn - 1; id >= 0; id--) { /* each goes right after its kernel's root */
        if (!p->needed[id] || !p->root[id] || p->merged_into[id] < 0) continue;
        int k = p->merged_into[id];
        p->next_member[id] = p->next_member[k];
        p->next_member[k] = id;
    }
    /* the schedule */
    lf_status st = plan_slots(p, s, n, outs);
    if (st != LF_OK) return st;
    int nk = 0;
    for (int id = 0; id < nn; id++) nk += p->needed[id] && p->root[id] && p->merged_into[id] < 0;
    s->kernels = graph_calloc((size_t)(nk ? nk : 1), sizeof *s->kernels);
    if (!s->kernels) return nomem(p);
    for (int id = 0; id < nn; id++) {
        if (!p->needed[id] || !p->root[id] || p->merged_into[id] >= 0) continue;
        fuse_kernel *kn = &s->kernels[s->nkernels++];
        if ((st = build_kernel(p, s, id, kn)) != LF_OK) return st;
        if (kn->nstores == 0) { /* nothing of it is needed (cannot happen for needed roots) */
            kernel_free(kn);
            s->nkernels--;
        }
    }
    if ((st = plan_memory(p, s)) != LF_OK) return st;
    return plan_traffic(p, s);
}

lf_status fuse_plan(lf_graph *g, int n, lf_node *const *outs, bool fusion, fuse_schedule **out) {
    double t0 = graph_now_seconds();
    *out = NULL;
    fuse_schedule *s = graph_calloc(1, sizeof *s);
    if (!s) return graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
    s->graph = g;
    s->fused = fusion;
    s->arena = graph_calloc(1, sizeof *s->arena);
    if (!s->arena) {
        graph_free(s);
        return graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
    }
    s->arena->ctx = g->ctx; /* private: not linked into the context's graph list */
    planner p;
    memset(&p, 0, sizeof p);
    p.g = g;
    p.nn = g->nnodes;
    p.fusion = fusion;
    lf_status st = plan(&p, s, n, outs);
    scratch_free(&p.tmp);
    scratch_free(&p.iar);
    for (int k = 0; p.klist && k < p.nn; k++) graph_free(p.klist[k]);
    scratch_free(&p.keep);
    if (st != LF_OK) {
        fuse_schedule_free(s);
        /* a failed fn allocation records its own message; make sure it says so */
        graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory while planning fusion");
        return LF_ERR_NOMEM;
    }
    s->plan_seconds = graph_now_seconds() - t0;
    *out = s;
    return LF_OK;
}

/* ---- statistics and printing ---------------------------------------------------------------------- */

void fuse_schedule_stats(const fuse_schedule *s, lf_eval_stats *st) {
    memset(st, 0, sizeof *st);
    st->kernels = s->nkernels;
    st->plan_seconds = s->plan_seconds;
    st->bytes_read = s->bytes_read;
    st->bytes_written = s->bytes_written;
    st->bytes_materialized = s->bytes_materialized;
    st->temp_bytes_avoided = s->unfused_temp_bytes > s->bytes_materialized
                                 ? s->unfused_temp_bytes - s->bytes_materialized
                                 : 0;
}

static void print_loads(FILE *fp, const char *what, const fuse_load *ls, int n) {
    static const char *const src[] = {"slot", "iota", "acc"};
    fprintf(fp, "; %s", what);
    for (int j = 0; j < n; j++) {
        if (ls[j].src == FUSE_SRC_ACC) fprintf(fp, " acc%d", ls[j].red);
        else fprintf(fp, " %s%d(%d steps)", ls[j].node->kind == NODE_RANDOM ? "random" : src[ls[j].src], ls[j].slot,
                     ls[j].map.nsteps);
    }
}

void fuse_schedule_print(const fuse_schedule *s, FILE *fp) {
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        char sh[160];
        fprintf(fp, "  kernel %d: root %d, ", k, kn->root);
        if (!kn->epi) {
            fprintf(fp, "elementwise over %s, %d body exprs", graph_shape_str(sh, sizeof sh, kn->ndim, kn->shape),
                    kn->body->nexprs);
        } else {
            fprintf(fp, "%s over %s axes {", kn->row ? "row reduce" : "reduce",
                    graph_shape_str(sh, sizeof sh, kn->ndim, kn->shape));
            for (int d = 0, first = 1; d < kn->ndim; d++)
                if (kn->redmask & (1u << d)) fprintf(fp, first-- ? "%d" : ",%d", d);
            fprintf(fp, "}");
            for (int q = 0; q < kn->npasses; q++) {
                fprintf(fp, ", pass %d [", q);
                for (int j = 0, first = 1; j < kn->nreds; j++)
                    if (kn->reds[j].pass == q)
                        fprintf(fp, "%s%s #%d", first-- ? "" : " ", graph_reds[kn->reds[j].op].text,
                                kn->reds[j].node->id);
                fprintf(fp, "] %d exprs", kn->passes[q].fn->nexprs);
            }
            fprintf(fp, ", epilogue %d exprs", kn->epi->nexprs);
            if (kn->row) fprintf(fp, ", row pass %d exprs", kn->row->nexprs);
        }
        fprintf(fp, "; nodes");
        for (int j = 0; j < kn->nnodes; j++) fprintf(fp, " %d", kn->nodes[j]);
        for (int q = 0; q < kn->npasses; q++) {
            char what[32];
            snprintf(what, sizeof what, kn->npasses > 1 ? "pass %d loads" : "loads", q);
            print_loads(fp, what, kn->passes[q].loads, kn->passes[q].nloads);
        }
        if (kn->epi) print_loads(fp, "epilogue loads", kn->epi_loads, kn->nepi_loads);
        if (kn->row) print_loads(fp, "row loads", kn->row_loads, kn->nrow_loads);
        fprintf(fp, "; stores");
        for (int j = 0; j < kn->nstores; j++)
            fprintf(fp, " slot%d%s", kn->stores[j].slot, kn->stores[j].row ? "(row)" : "");
        fprintf(fp, "\n");
    }
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        static const char *const kinds[] = {"input", "output", "temp"};
        fprintf(fp, "  slot %d: %s node %d, %zu bytes, kernels %d..%d", j, kinds[sl->kind],
                sl->node->id, sl->bytes, sl->def, sl->last_use);
        if (sl->block >= 0) fprintf(fp, ", block %d", sl->block);
        fprintf(fp, "\n");
    }
}

/* ---- manual control ------------------------------------------------------------------------------------ */

lf_status lf_node_materialize(lf_graph *g, lf_node *n) {
    if (!graph_check_args(g, "node_materialize", 1, &n))
        return g ? (g->status != LF_OK ? g->status : LF_ERR_NULL) : LF_ERR_NULL;
    if (!n->materialize) g->version++; /* cached programs of g are stale */
    n->materialize = true;
    return LF_OK;
}
