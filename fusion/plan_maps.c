/* fusion/plan_maps.c: the planner's scratch arena and index maps (see
 * plan.h). An arena emptied by fuse_scratch_reset keeps its chunks and
 * hands them out again (a planning round's arrays reuse the last round's
 * pages); fuse_scratch_free gives them back. A fuse_map takes a kernel's loop index to an element of a node:
 * composing the maps of views and broadcasts folds them into one affine step
 * whenever that is exact (fusion.h, "Index maps").
 *
 * What must stay true: scratch memory is freed only as a whole arena
 * (fuse_scratch_free), except the end of the newest allocation while
 * nothing points into it (scratch_trim: the step a fold saves, a map just
 * made that fuse_map_release gives back); a map composed here is equal (fuse_map_equal) to
 * another exactly when both read the same element for every loop index.
 */
#include "fusion/plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void *fuse_scratch_alloc(scratch *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    chunk *c = a->head;
    if (!c || c->h.cap - c->h.used < bytes) {
        /* the first spare chunk that is big enough, else a new one in place
           of a spare one (so the chunks held never outnumber those of the
           busiest use) */
        chunk **sp = &a->spare;
        while (*sp && (*sp)->h.cap < bytes) sp = &(*sp)->h.next;
        if (*sp) {
            c = *sp;
            *sp = c->h.next;
        } else {
            if (a->spare) {
                chunk *old = a->spare;
                a->spare = old->h.next;
                graph_free(old);
            }
            size_t cap = bytes > 32768 ? bytes : 32768;
            c = graph_malloc(sizeof *c + cap);
            if (!c) return NULL;
            c->h.cap = cap;
        }
        c->h.next = a->head;
        c->h.used = 0;
        a->head = c;
    }
    void *p = (char *)(c + 1) + c->h.used;
    c->h.used += bytes;
    return p;
}

void *fuse_scratch_calloc(scratch *a, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size / 2) return NULL;
    void *p = fuse_scratch_alloc(a, n * size > 0 ? n * size : 1);
    if (p) memset(p, 0, n * size);
    return p;
}

void fuse_scratch_free(scratch *a) {
    fuse_scratch_reset(a);
    while (a->spare) {
        chunk *c = a->spare;
        a->spare = c->h.next;
        graph_free(c);
    }
}

void fuse_scratch_reset(scratch *a) {
    while (a->head) {
        chunk *c = a->head;
        a->head = c->h.next;
        c->h.next = a->spare;
        a->spare = c;
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

fuse_step fuse_make_step(int ndim, const int64_t *shape, int64_t offset, const int64_t *strides) {
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
fuse_step fuse_identity_step(int ndim, const int64_t *shape) {
    int64_t st[LF_MAX_DIMS];
    graph_contiguous_strides(ndim, shape, st);
    return fuse_make_step(ndim, shape, 0, st);
}

bool fuse_step_equal(const fuse_step *a, const fuse_step *b) {
    if (a->ndim != b->ndim || a->offset != b->offset || a->remap != b->remap) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d]) return false;
    if (a->remap)
        for (int d = 0; d < a->ndim; d++)
            if (a->mode[d] != b->mode[d] || a->shift[d] != b->shift[d] || a->ext[d] != b->ext[d]) return false;
    return true;
}

fuse_step fuse_view_step(const lf_node *n) {
    fuse_step s = fuse_make_step(n->ndim, n->shape, n->u.view.offset, n->u.view.strides);
    if (!n->u.view.remapped || n->numel == 0) return s;
    s.remap = true;
    for (int d = 0; d < n->ndim; d++) {
        s.mode[d] = n->u.view.remap[d];
        s.shift[d] = n->u.view.shift[d];
        s.ext[d] = n->u.view.ext[d];
        /* an extent-1 axis reads coordinate remap(0), not 0: keep its stride */
        s.strides[d] = n->u.view.strides[d];
    }
    return s;
}

bool fuse_map_equal(const fuse_map *a, const fuse_map *b) {
    if (a == b) return true;
    if (a->nsteps != b->nsteps) return false;
    for (int k = 0; k < a->nsteps; k++)
        if (!fuse_step_equal(&a->steps[k], &b->steps[k])) return false;
    return true;
}

/* Replaces step a (reading space P, giving a linear index) followed by step b
 * (unravelling that index by b's shape Q) with one step reading P, when that
 * is exact: a's offset and each axis's stride land on single digits of Q and
 * no digit can carry over its whole range. Returns false otherwise. */
static bool fold(const fuse_step *a, const fuse_step *b, fuse_step *out) {
    if (b->remap || a->remap) return false; /* not affine: a step of its own */
    if (shape_numel(a->ndim, a->shape) == 0) {
        *out = fuse_make_step(a->ndim, a->shape, 0, NULL);
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
    *out = fuse_make_step(a->ndim, a->shape, off, strides);
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
            int64_t e = s->shape[d], c = rem % e;
            if (s->remap) c = graph_remap_coord(s->mode[d], c, s->shift[d], s->ext[d]);
            next += c * s->strides[d];
            rem /= e;
        }
        lin = next;
    }
    return lin;
}

/* Gives back the end of the newest allocation of a, p (from
 * fuse_scratch_alloc of had bytes), keeping its first keep bytes: when p
 * is still the last thing allocated from the newest chunk; else nothing. */
static void scratch_trim(scratch *a, void *p, size_t had, size_t keep) {
    chunk *c = a->head;
    had = (had + 15) & ~(size_t)15;
    keep = (keep + 15) & ~(size_t)15;
    if (c && keep < had && (char *)p + had == (char *)(c + 1) + c->h.used) c->h.used -= had - keep;
}

static fuse_map *map_new(scratch *a, int nsteps) {
    fuse_map *m = fuse_scratch_alloc(a, sizeof *m);
    fuse_step *st = fuse_scratch_alloc(a, (size_t)nsteps * sizeof *st);
    if (!m || !st) return NULL;
    m->nsteps = nsteps;
    m->steps = st;
    return m;
}

void fuse_map_release(scratch *a, fuse_map *m) {
    scratch_trim(a, m->steps, (size_t)m->nsteps * sizeof *m->steps, 0);
    scratch_trim(a, m, sizeof *m, 0);
}

fuse_map *fuse_map_identity(scratch *a, const lf_node *n) {
    fuse_map *m = map_new(a, 1);
    if (m) m->steps[0] = fuse_identity_step(n->ndim, n->shape);
    return m;
}

/* m followed by step (which unravels m's result by its own shape), folded.
 * The steps a fold saves are given back to a (a composed map usually folds
 * to one step, and the instances keep one map each: half their memory in a
 * chain of row normalisations). */
fuse_map *fuse_map_compose(scratch *a, const fuse_map *m, const fuse_step *step) {
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
    scratch_trim(a, r->steps, (size_t)(m->nsteps + 1) * sizeof *r->steps, (size_t)r->nsteps * sizeof *r->steps);
    if (shape_numel(r->steps[0].ndim, r->steps[0].shape) == 0) {
        r->steps[0] = fuse_make_step(r->steps[0].ndim, r->steps[0].shape, 0, NULL);
        r->nsteps = 1;
    }
    return r;
}

uint64_t fuse_hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdu;
}

uint64_t fuse_map_hash(uint64_t h, const fuse_map *m) {
    for (int j = 0; j < m->nsteps; j++) {
        const fuse_step *st = &m->steps[j];
        h = fuse_hash_mix(fuse_hash_mix(h, (uint64_t)st->ndim), (uint64_t)st->offset);
        for (int d = 0; d < st->ndim; d++)
            h = fuse_hash_mix(fuse_hash_mix(h, (uint64_t)st->shape[d]), (uint64_t)st->strides[d]);
        if (st->remap)
            for (int d = 0; d < st->ndim; d++)
                h = fuse_hash_mix(fuse_hash_mix(fuse_hash_mix(h, st->mode[d]), (uint64_t)st->shift[d]),
                                  (uint64_t)st->ext[d]);
    }
    return h;
}
