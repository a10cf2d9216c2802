/* backends/cpu/cpu.c: the compiled CPU backend (see cpu.h).
 *
 * The eval is the driver's pipeline (backends/driver.c's backend_eval:
 * backends/program.c's program_eval, program cache, build or reuse, run,
 * statistics, and program_build, plan and in-place decision, per kernel
 * layout, source and memory cache lookup, the misses compiled, binding),
 * with this file's parts (cpu_parts) and its graph_backend entries ready
 * and fall_back. This file adds what is the CPU's: the compiler probe and
 * the interpreter fallback (cpu_ready, cpu_fall_back),
 * the kernels' parameters and partials, the disk level and compiling the
 * misses in units, the pool and the run.
 *
 * Kernel cache, two levels (the mechanism is backends/kcache.c, shared with
 * the CUDA backend):
 *  - in memory, per context: keyed by the FNV hash of the kernel's source
 *    with comments removed (the structure: node ids live only in comments),
 *    confirmed by comparing that text; a hit touches no file system;
 *  - on disk (backends/diskcache.c): the shared object, keyed by the
 *    SHA-256 of that text, the compile flags, the compiler's version line
 *    and the CPU (flags include -march=native), verified on load. An object
 *    is stored only after it loaded and bound here; an entry that fails to
 *    load or bind is removed and rebuilt; a disk miss compiles under the
 *    entry's lock (diskcache_lock), so concurrent processes compile once.
 *    The folder is opened at the context's first compile (kcache_disk_open):
 *    one that is not private to us is not used at all (diskcache.h, Trust).
 * Cold path: a program's kernels are all looked up first; those that miss
 * both levels are compiled together, several kernels to a translation unit
 * and up to one unit per pool thread, compiled at once (backends/cpu/unit.h;
 * "building a program's kernels" below says why the disk keeps the unit's
 * object under each kernel's key). A kernel's functions are named
 * lf_<its disk key>_run etc. in every object (never lf_k_, which only its
 * source says), so an object is bound by the names its key gives.
 * A unit whose kernels call lf_random_normal is linked with one more object,
 * cg_c_random_object compiled once per disk cache (or context) and kept in
 * memory (random_object); the disk key of every kernel hashes its source.
 * A graph's programs (one per output set, graph.h's program cache) cache the
 * lookups themselves: re-evaluating outputs of an unchanged graph evaluated
 * lately goes straight to the kernels (a cpu_program starts with the
 * shared header, backends/program.h).
 *
 * Compile flags never include a fast-math flag (see codegen/dialect_c.c).
 * -fno-builtin-sin/cos keep GCC from merging sin and cos into sincos, which
 * it cannot vectorize. Nor -fno-trapping-math: under it GCC 12 rewrites
 * (double)(int32_t)x as trunc(x) in scalar code, so a float -> integer ->
 * float cast of -0.5 gave -0.0 instead of +0.0 (issue 12, item 5). Without
 * the flag 5 of the 76 distinct bench kernels compile differently, all still
 * vectorized (benches/RESULTS.md, "Compile flags").
 */
#include "backends/cpu/cpu.h"

#include "backends/cpu/cc.h"
#include "backends/cpu/pool.h"
#include "backends/cpu/sort.h"
#include "backends/cpu/sort_kernel.h"
#include "backends/cpu/unit.h"
#include "backends/diskcache.h"
#include "backends/host.h"
#include "backends/kcache.h"
#include "backends/program.h"
#include "backends/sha256.h"
#include "codegen/codegen.h"

#include <dlfcn.h>
#include <unistd.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    PARALLEL_MIN_ELEMENTS = 1 << 16, /* below: the calling thread alone */
    ELEMENT_GRAIN = 256              /* chunk boundaries (elements) */
};

/* cc_flags[1] is replaced by -march=$LF_CPU_MARCH when that is set (e.g.
 * x86-64-v3 for valgrind, which does not decode AVX-512). */
static const char *const cc_flags[] = {
    "-O3", "-march=native", "-std=c11", "-fPIC", "-shared", "-fno-math-errno",
    "-ffp-contract=off", "-fno-semantic-interposition",
    "-fvisibility=hidden", "-fno-builtin-sin", "-fno-builtin-cos", "-fno-builtin-sinf",
    "-fno-builtin-cosf", "-w", NULL};
static const char *const libs_vector[] = {"-lmvec", "-lm", NULL};
static const char *const libs_scalar[] = {"-lm", NULL};

/* ---- the in-memory kernel cache ---------------------------------------------------------- */

/* A loaded shared object, shared by the kernels bound from it (a unit of
 * several kernels is loaded once): each kentry bound to it holds a
 * reference, and so does the code that loaded it until it is done binding. */
typedef struct so_ref {
    void *handle;                   /* dlopen handle */
    int refs;                       /* holders; dlclose'd at 0 */
} so_ref;

typedef struct kentry {
    kcache_entry base;              /* hash, text, chain (backends/kcache.h) */
    so_ref *so;                     /* the object its functions are in */
    cg_run_fn run;                  /* ELEMENTWISE, INNER, OUTER */
    cg_pass_fn pass[FUSE_MAX_PASSES]; /* FULL */
    cg_fin_fn fin[FUSE_MAX_PASSES];
    cg_epi_fn epi;
    cg_row_fn row;
    cg_pass_fn scan;                /* SCAN: blocks from their offsets (also
                                       run, pass[0], fin[0]) */
    cg_sort_fn keys;                /* sort kernels: keys into the work array, */
    cg_run_fn raw;                  /* and values (backends/cpu/sort_kernel.c) */
} kentry;

typedef struct cpu_state {
    cpu_pool *pool;
    int compiler;                   /* 0 not probed, 1 works, -1 none */
    char *cc_version;               /* first line of `cc --version` */
    char *cc_problem;               /* why there is none */
    char *no_tmp;                   /* why $TMPDIR cannot hold a compile (CC_NO_TMP from
                                       the probe or a compile of this eval), else NULL */
    bool vector_math;               /* libmvec declared simd */
    bool vector_math_off;           /* the -march lacks AVX2: no libmvec */
    char *cpu_id;                   /* CPU model and flags (for -march=native) */
    char *cache_dir;                /* disk cache folder, NULL if none */
    bool warned;                    /* the fallback warning was printed */
    int64_t parallel_min;           /* elements below which one thread runs a
                                       kernel ($LF_CPU_PARALLEL_MIN, a test hook) */
    int64_t stream_min;             /* bytes an elementwise kernel moves above
                                       which its stores stream (stream_threshold) */
    char march[80];                 /* the -march flag used */
    const char *flags[32];          /* cc_flags with it */
    kcache kernels;                 /* in-memory kernel cache (kentry) */
    cpu_sort_cache *sort_cache;     /* sorts' kept work memory (made on first use) */
    void *robj;                     /* cg_c_random_object compiled (random_object), NULL not yet */
    size_t robj_len;                /* its bytes */
} cpu_state;

/* Loads an object held in memory: a reference for the caller, or NULL with
 * *why (NULL: out of memory). */
static so_ref *so_load(const void *bytes, size_t len, char **why) {
    so_ref *r = graph_malloc(sizeof *r);
    *why = NULL;
    if (!r) return NULL;
    r->handle = cc_dlopen_bytes(bytes, len, why);
    if (!r->handle) {
        graph_free(r);
        return NULL;
    }
    r->refs = 1;
    return r;
}

static void so_unref(so_ref *r) {
    if (r && --r->refs == 0) {
        dlclose(r->handle);
        graph_free(r);
    }
}

static void kentry_release(kcache_entry *base, void *arg) {
    (void)arg;
    so_unref(((kentry *)base)->so);
}

static void state_free(void *p) {
    cpu_state *cs = p;
    if (!cs) return;
    cpu_pool_free(cs->pool);
    cpu_sort_cache_free(cs->sort_cache);
    kcache_clear(&cs->kernels, kentry_release, NULL);
    graph_free(cs->cc_version);
    graph_free(cs->cc_problem);
    graph_free(cs->no_tmp);
    graph_free(cs->cpu_id);
    graph_free(cs->robj);
    graph_free(cs->cache_dir);
    graph_free(cs);
}

/* Streaming stores (non-temporal, codegen/emit_c.c) pay off for a kernel
 * whose loads and stores together outgrow the last-level cache: its output
 * would be evicted before anyone read it, and a plain store first reads
 * each line it fills. On this project's 2-CPU machine (L3 260 MiB), a
 * 2^26-element float copy (512 MiB moved) ran 1.46x faster with them, one
 * of 2^24 (128 MiB) slower (benches/measured/61-cpu-kernels.md). The
 * threshold is the last-level cache's size as sysconf reports it (L3, else
 * L2, else 32 MiB); $LF_CPU_STREAM_MIN (bytes) overrides it, a test hook. */
static int64_t stream_threshold(void) {
    const char *e = getenv("LF_CPU_STREAM_MIN");
    if (e && *e) return atoll(e);
    long b = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    b = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (b <= 0) b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return b > 0 ? (int64_t)b : (int64_t)32 << 20;
}

static cpu_state *get_state(lf_ctx *ctx) {
    if (ctx->state[LF_BACKEND_CPU]) return ctx->state[LF_BACKEND_CPU];
    cpu_state *cs = graph_calloc(1, sizeof *cs);
    if (!cs) return NULL;
    cs->pool = cpu_pool_new(ctx->opt.threads);
    if (!cs->pool) {
        graph_free(cs);
        return NULL;
    }
    const char *march = getenv("LF_CPU_MARCH");
    snprintf(cs->march, sizeof cs->march, "-march=%s", march && *march ? march : "native");
    for (int i = 0; cc_flags[i]; i++) cs->flags[i] = i == 1 ? cs->march : cc_flags[i];
    if (march && *march) cs->vector_math_off = !strstr(march, "v3") && !strstr(march, "v4") && strcmp(march, "native");
    const char *pm = getenv("LF_CPU_PARALLEL_MIN");
    cs->parallel_min = pm ? atoll(pm) : PARALLEL_MIN_ELEMENTS;
    cs->stream_min = stream_threshold();
    ctx->state[LF_BACKEND_CPU] = cs;
    return cs;
}

/* The CPU model and flag lines of /proc/cpuinfo (what -march=native sees). */
static char *read_cpu_id(void) {
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[4096], buf[8192] = "";
    size_t used = 0;
    if (fp) {
        int found = 0;
        while (found < 2 && fgets(line, sizeof line, fp)) {
            if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5)) {
                size_t n = strlen(line);
                if (used + n < sizeof buf) {
                    memcpy(buf + used, line, n + 1);
                    used += n;
                }
                found++;
            }
        }
        fclose(fp);
    }
    return graph_strdup(buf);
}

/* Probes the compiler once per context; false only when out of memory. A
 * temp folder that cannot hold a compile (CC_NO_TMP) is no verdict on the
 * compiler: cs->no_tmp says why, and the next program probes again. */
static bool probe(lf_ctx *ctx, cpu_state *cs) {
    if (cs->compiler) return true;
    char *why = NULL;
    int rc = cc_probe(ctx->opt.compile_timeout, &cs->cc_version, &why);
    if (rc != 0) {
        if (!why) return false; /* no memory for the reason: not a verdict */
        if (rc == CC_NO_TMP) {
            cs->no_tmp = why;
            return true;
        }
        cs->compiler = -1;
        cs->cc_problem = why;
        return true;
    }
    if (!cs->cc_version) return false;
    /* the CPU's identity and the cache folder are part of every disk key:
       out of memory for either is no verdict (a key formed without them
       would store kernels under names they do not own) */
    char *cpu_id = read_cpu_id(), *dir = diskcache_dir(ctx->opt.cache_dir);
    if (!cpu_id || (!dir && diskcache_dir_expected(ctx->opt.cache_dir))) {
        graph_free(cpu_id);
        graph_free(dir);
        graph_free(cs->cc_version);
        cs->cc_version = NULL;
        return false;
    }
    cs->compiler = 1;
    void *mvec = dlopen("libmvec.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (mvec) dlclose(mvec);
#if defined(__x86_64__)
    cs->vector_math = mvec && cs->cc_version && !strstr(cs->cc_version, "clang") && !cs->vector_math_off;
#else
    cs->vector_math = false;
#endif
    cs->cpu_id = cpu_id;
    cs->cache_dir = dir;
    return kcache_disk_open(ctx, &cs->cache_dir) == LF_OK; /* an unsafe folder: NULL, with a warning */
}

/* Resolves the kernel's functions, named <prefix><name>, in the loaded
 * object r; on success e holds a reference to r. False with *why = the
 * missing name (NULL: out of memory). */
static bool bind_functions(kentry *e, const cg_layout *lay, so_ref *r, const char *prefix, char **why) {
    const fuse_kernel *kn = lay->kernel;
    char name[128];
#define SYM(dst, fmt, ...)                                                                         \
    do {                                                                                           \
        int at = snprintf(name, sizeof name, "%s", prefix);                                        \
        snprintf(name + at, sizeof name - (size_t)at, fmt, __VA_ARGS__);                          \
        void *sym = dlsym(r->handle, name);                                                        \
        if (!sym) {                                                                                \
            *why = graph_strdup(name);                                                             \
            return false;                                                                          \
        }                                                                                          \
        memcpy(&(dst), &sym, sizeof sym);                                                          \
    } while (0)
    if (lay->strategy == CG_SCAN) {
        SYM(e->run, "%s", "run");
        SYM(e->pass[0], "%s", "pass0");
        SYM(e->fin[0], "%s", "fin0");
        SYM(e->scan, "%s", "scan");
    } else if (kn->kind == FUSE_KERNEL_SORT) { /* keys, and values for the ones keys do not carry */
        SYM(e->keys, "%s", "run");
        SYM(e->raw, "%s", "raw");
    } else if (kn->kind == FUSE_KERNEL_SCATTER) { /* blocks, then the combine over dst's elements */
        SYM(e->run, "%s", "run");
        SYM(e->row, "%s", "row");
    } else if (lay->strategy != CG_REDUCE_FULL) {
        SYM(e->run, "%s", "run");
    } else {
        for (int q = 0; q < kn->npasses; q++) {
            SYM(e->pass[q], "pass%d", q);
            SYM(e->fin[q], "fin%d", q);
        }
        SYM(e->epi, "%s", "epi");
        if (kn->row) SYM(e->row, "%s", "row");
    }
#undef SYM
    e->so = r;
    r->refs++;
    return true;
}

/* The disk key: SHA-256 of everything the object depends on. v2: kernels
 * are named by their key (sym_prefix), no longer lf_k_. */
static void disk_key(const cpu_state *cs, const char *text, char key[72]) {
    sha256_ctx c;
    uint8_t d[32];
    char hex[65];
    sha256_init(&c);
    static const char tag[] = "lazyfuse cpu kernel v2\n";
    sha256_update(&c, tag, sizeof tag - 1);
    for (int i = 0; cs->flags[i]; i++) sha256_update(&c, cs->flags[i], strlen(cs->flags[i]) + 1);
    const char *const *libs = cs->vector_math ? libs_vector : libs_scalar;
    for (int i = 0; libs[i]; i++) sha256_update(&c, libs[i], strlen(libs[i]) + 1);
    const char *cc = getenv("CC");
    if (cc) sha256_update(&c, cc, strlen(cc) + 1);
    if (cs->cc_version) sha256_update(&c, cs->cc_version, strlen(cs->cc_version) + 1);
    if (cs->cpu_id) sha256_update(&c, cs->cpu_id, strlen(cs->cpu_id) + 1);
    sha256_update(&c, cg_c_random_object, strlen(cg_c_random_object) + 1); /* a kernel may link it */
    sha256_update(&c, text, strlen(text));
    sha256_final(&c, d);
    sha256_hex(d, hex);
    snprintf(key, 72, "%s.so", hex);
}

/* The prefix of a kernel's functions in every object that holds it (the
 * lf_k_ of its source renamed): lf_<its disk key's 64 hex digits>_. Distinct
 * kernels of a unit have distinct keys, so their names never clash, and an
 * object found under a key is bound by the names that key gives. */
static void sym_prefix(const char *key, char prefix[72]) { snprintf(prefix, 72, "lf_%.64s_", key); }

/* Loads kernel key from the disk cache: true on a hit that loads and binds.
 * An entry that verifies but does not load or bind (planted, or stored by a
 * broken compiler) is removed so that the caller rebuilds it; that is never
 * the eval's failure. Running out of memory while loading says nothing about
 * the entry: it is kept, and the eval fails with LF_ERR_NOMEM (so_load and
 * bind_functions leave *why NULL exactly then). */
static lf_status disk_load(lf_ctx *ctx, cpu_state *cs, const cg_layout *lay, const char *key, kentry *e,
                           bool *loaded) {
    void *so = NULL;
    size_t len = 0;
    bool hit = false;
    *loaded = false;
    lf_status status = kcache_disk_get(ctx, cs->cache_dir, key, &so, &len, &hit);
    if (status != LF_OK || !hit) return status;
    char *why = NULL, prefix[72];
    so_ref *r = so_load(so, len, &why);
    sym_prefix(key, prefix);
    if (r && bind_functions(e, lay, r, prefix, &why)) {
        *loaded = true;
    } else if (!why) {
        status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory loading kernel cache entry %s/%s (kept)",
                             cs->cache_dir, key);
    } else {
        if (graph_debug_on("cache"))
            fprintf(stderr, "lazyfuse: kernel cache entry %s/%s %s%s; removed, rebuilding it\n", cs->cache_dir,
                    key, r ? "lacks function " : "does not load: ", why);
        diskcache_remove(cs->cache_dir, key);
    }
    so_unref(r);
    graph_free(why);
    graph_free(so);
    return status;
}

/* ---- building a program's kernels: the cold path --------------------------------------------
 *
 * program_build looks every kernel up in memory first; compile_part looks
 * the misses up on disk. What is left is compiled together (misses_build):
 * each miss's disk lock is taken (diskcache_lock, in the order of the keys,
 * so that no two processes wait on each other in a cycle: a holder of a key
 * only ever waits for a larger one) and the disk looked at
 * again; the rest is split into at most T units (T = the pool's threads, a
 * unit per UNIT_MIN_KERNELS misses at least) compiled at once, one compiler
 * run each (backends/cpu/unit.h). Then, in kernel order, each miss is bound
 * from its unit's object, stored on disk and added to the memory cache.
 *
 * The disk level keeps one entry per kernel, keyed by the kernel's own
 * source as before: the object stored under a kernel's key is the whole
 * object of the unit it was compiled in, and the kernel's functions in it
 * are named by that key (sym_prefix). Splitting a unit's object into one
 * object per kernel would take a link (an ld run) per kernel, a good part of
 * the start-up cost batching removes; storing the unit's object under each
 * key costs disk space only (a unit's object, a few tens of KiB, once per
 * kernel in it) and keeps every lookup as it was: a later program that
 * shares one kernel finds it, in memory or on disk, alone (loading, from
 * disk, its unit's whole object, the siblings' code unused).
 *
 * Errors stay those of compiling one kernel after the other: when a unit of
 * several kernels fails, its kernels are compiled again one by one, in
 * kernel order, so the message is the first failing kernel's own; the
 * misses before it are stored as before, it and those after it are not.
 * (A unit that ran past the time limit is retried the same way, so a
 * program whose kernel 0 alone is too slow waits the limit twice.)
 */

/* A compiler run costs about 28 ms plus about 16 ms a kernel (-O3, this
 * machine: benches/measured/41-cold-start.md); a second unit pays the 28 ms
 * again on another core, which is worth it once each unit gets 2 kernels. */
enum { UNIT_MIN_KERNELS = 2 };

/* A kernel of the program being built that missed the memory cache
 * (program_build's miss, pm) with what compiling it here takes. */
typedef struct miss {
    program_miss *pm;               /* kernel number, root, layout, entry, source */
    kentry *e;                      /* pm->e as the CPU's entry */
    char key[72];                   /* its disk key */
    char prefix[72];                /* its functions' prefix (sym_prefix) */
    int lock;                       /* diskcache_lock's fd, -1 none */
    char *lock_path;
    int unit;                       /* the unit compiling it */
} miss;

/* Adds a loaded miss to the memory cache and lets go of its source and lock. */
static void miss_done(cpu_state *cs, miss *m) {
    diskcache_unlock(m->lock, m->lock_path);
    m->lock = -1;
    m->lock_path = NULL;
    cg_text_free(&m->pm->src);
    kcache_add(&cs->kernels, &m->e->base);
    m->pm->done = true;
}

/* What an entry that was not added to the memory cache holds beyond the
 * entry itself (program_parts.discard): its object's reference. */
static void entry_discard(kcache_entry *base) {
    kentry *e = (kentry *)base;
    so_unref(e->so);
    e->so = NULL;
}

static int by_key(const void *a, const void *b) {
    return strcmp((*(miss *const *)a)->key, (*(miss *const *)b)->key);
}

/* Binds miss m from the object `bytes` (its unit's, or its own), loading it
 * into *r first when *r is NULL (the caller unrefs *r), stores the object
 * under m's key and adds m to the memory cache. */
static lf_status miss_bind(lf_ctx *ctx, cpu_state *cs, miss *m, const void *bytes, size_t len, so_ref **r) {
    char *why = NULL;
    char ns[GRAPH_NODE_STR_CAP];
    if (!*r && !(*r = so_load(bytes, len, &why))) {
        lf_status status = why ? graph_error(ctx, LF_ERR_BACKEND, "eval: loading kernel %d (computing %s) failed: %s",
                                             m->pm->k, graph_node_str(m->pm->root, ns, sizeof ns), why)
                               : graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory loading kernel %d (computing %s)",
                                             m->pm->k, graph_node_str(m->pm->root, ns, sizeof ns));
        graph_free(why);
        return status;
    }
    if (!bind_functions(m->e, m->pm->lay, *r, m->prefix, &why)) {
        lf_status status = graph_error(ctx, LF_ERR_BACKEND, "eval: kernel %d (computing %s) lacks function %s (not cached)",
                                       m->pm->k, graph_node_str(m->pm->root, ns, sizeof ns), why ? why : "?");
        graph_free(why);
        return status;
    }
    kcache_disk_put(cs->cache_dir, m->key, bytes, len);
    miss_done(cs, m);
    return LF_OK;
}

/* The error of miss m's failed compile: the compiler's log names kernel
 * m->pm->k by number, the message by its root node too, which the user can
 * find in the graph (graph_node_str). */
static lf_status compile_failed(lf_ctx *ctx, const miss *m, const char *log) {
    char ns[GRAPH_NODE_STR_CAP];
    graph_node_str(m->pm->root, ns, sizeof ns);
    return log ? graph_error(ctx, LF_ERR_BACKEND, "eval: compiling kernel %d (computing %s) failed: %s", m->pm->k, ns,
                             log)
               : graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory compiling kernel %d (computing %s)", m->pm->k, ns);
}

/* The object of cg_c_random_object (lf_random_normal and its vector
 * variants), which every kernel that calls lf_random_normal is linked with:
 * compiled once per disk cache (stored under random_key) or, without one,
 * once per context, kept in memory (cs->robj). Compiling the normal's body
 * into every such kernel cost about three times a plain kernel's compile
 * (the body, vectorized, again in the vector epilogue and the scalar loop:
 * benches/measured/41-cold-start.md). Returns 0, or the compile's rc with
 * *log (cc_compile_with's message, the caller's to free). */
static int random_object(lf_ctx *ctx, cpu_state *cs, lf_eval_stats *st, char **log) {
    *log = NULL;
    if (cs->robj) return 0;
    char key[72];
    disk_key(cs, "lazyfuse random object\n", key);
    bool hit = false;
    if (cs->cache_dir && kcache_disk_get(ctx, cs->cache_dir, key, &cs->robj, &cs->robj_len, &hit) == LF_OK && hit)
        return 0;
    const char *flags[34];
    int n = 0;
    while (cs->flags[n]) flags[n] = cs->flags[n], n++;
    flags[n++] = "-c"; /* an object; -shared then does nothing */
    flags[n] = NULL;
    int rc = cc_compile(cg_c_random_object, flags, NULL, ctx->opt.compile_timeout, &cs->robj, &cs->robj_len, log);
    st->compiler_runs++;
    if (rc != 0) return rc;
    if (cs->cache_dir) kcache_disk_put(cs->cache_dir, key, cs->robj, cs->robj_len);
    return 0;
}

/* Compiles and loads the misses of m[0..nm) that are not done (see the top
 * of this section). On failure the caller drops every miss. */
static lf_status misses_build(lf_ctx *ctx, cpu_state *cs, miss *m, int nm, lf_eval_stats *st) {
    const char *const *libs = cs->vector_math ? libs_vector : libs_scalar;
    const cg_dialect *d = cg_dialect_c(cs->vector_math);
    size_t prelude_len = strlen(d->prelude) + strlen(cg_prelude_helpers);
    lf_status status = LF_OK;
    miss **left = graph_calloc((size_t)nm, sizeof *left);
    cpu_unit *units = NULL;
    const char **srcs = graph_calloc((size_t)nm, sizeof *srcs), **prefixes = graph_calloc((size_t)nm, sizeof *prefixes);
    int nleft = 0, nunits = 0;
    if (!left || !srcs || !prefixes) goto nomem;
    for (int i = 0; i < nm; i++)
        if (!m[i].pm->done) left[nleft++] = &m[i];
    if (cs->cache_dir && nleft) { /* lock in key order, then look again: built while we waited? */
        qsort(left, (size_t)nleft, sizeof *left, by_key);
        for (int i = 0; i < nleft; i++) {
            miss *mi = left[i];
            bool loaded = false;
            mi->lock = diskcache_lock(cs->cache_dir, mi->key, ctx->opt.compile_timeout + 10, &mi->lock_path);
            if (mi->lock >= 0 && (status = disk_load(ctx, cs, mi->pm->lay, mi->key, mi->e, &loaded)) != LF_OK)
                goto done;
            if (loaded) {
                st->kernels_disk_hits++;
                miss_done(cs, mi);
            }
        }
        nleft = 0; /* back to kernel order */
        for (int i = 0; i < nm; i++)
            if (!m[i].pm->done) left[nleft++] = &m[i];
    }
    if (!nleft) goto done;
    nunits = nleft / UNIT_MIN_KERNELS;
    if (nunits > cpu_pool_threads(cs->pool)) nunits = cpu_pool_threads(cs->pool);
    if (nunits < 1) nunits = 1;
    if (!(units = graph_calloc((size_t)nunits, sizeof *units))) goto nomem;
    for (int u = 0; u < nunits; u++) {
        cpu_unit *c = &units[u];
        c->first = (int)((int64_t)nleft * u / nunits);
        c->count = (int)((int64_t)nleft * (u + 1) / nunits) - c->first;
        for (int i = 0; i < c->count; i++) {
            miss *mi = left[c->first + i];
            mi->unit = u;
            srcs[i] = mi->pm->src.s;
            prefixes[i] = mi->prefix;
        }
        if (!(c->text = cpu_unit_source(prelude_len, c->count, srcs, prefixes))) goto nomem;
        for (int i = 0; i < c->count && !c->obj; i++)
            if (strstr(srcs[i] + prelude_len, CG_C_RANDOM_NORMAL_CALL)) {
                char *log = NULL;
                int rc = random_object(ctx, cs, st, &log);
                if (rc != 0) { /* the random object is the kernel's: its compile failed */
                    status = compile_failed(ctx, left[c->first + i], log);
                    if (rc == CC_NO_TMP && log) cs->no_tmp = log;
                    else graph_free(log);
                    goto done;
                }
                c->obj = cs->robj;
                c->obj_len = cs->robj_len;
            }
    }
    cpu_units_compile(cs->pool, units, nunits, cs->flags, libs, ctx->opt.compile_timeout);
    st->compiler_runs += nunits;
    for (int u = 0; u < nunits; u++)
        if (units[u].rc == CC_NO_TMP && units[u].log) { /* no kernel can be built now: cpu_fall_back decides */
            status = compile_failed(ctx, left[units[u].first], units[u].log);
            cs->no_tmp = units[u].log;
            units[u].log = NULL;
            goto done;
        }
    so_ref **loaded = graph_calloc((size_t)nunits, sizeof *loaded);
    bool *unloadable = graph_calloc((size_t)nunits, sizeof *unloadable);
    if (!loaded || !unloadable) {
        graph_free(loaded);
        graph_free(unloadable);
        goto nomem;
    }
    /* a unit of several kernels that compiled but does not load (say one
       kernel needs a symbol the libm lacks) is redone kernel by kernel too,
       so the failure is its own kernel's and the others are cached */
    for (int u = 0; u < nunits && status == LF_OK; u++) {
        char *why = NULL;
        if (units[u].rc != 0 || units[u].count < 2 || (loaded[u] = so_load(units[u].so, units[u].len, &why))) continue;
        if (why) unloadable[u] = true;
        else status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory loading compiled kernels");
        graph_free(why);
    }
    for (int i = 0; i < nleft && status == LF_OK; i++) {
        miss *mi = left[i];
        cpu_unit *c = &units[mi->unit];
        if (c->rc == 0 && !unloadable[mi->unit]) {
            status = miss_bind(ctx, cs, mi, c->so, c->len, &loaded[mi->unit]);
        } else if (c->count == 1) {
            status = compile_failed(ctx, mi, c->log);
        } else { /* the unit failed: this kernel alone, for its own message */
            cpu_unit one = {0};
            so_ref *r = NULL;
            const char *src1[1] = {mi->pm->src.s}, *pre1[1] = {mi->prefix};
            if (!(one.text = cpu_unit_source(prelude_len, 1, src1, pre1))) {
                status = compile_failed(ctx, mi, NULL);
                break;
            }
            one.rc = cc_compile_with(one.text, c->obj, c->obj_len, cs->flags, libs, ctx->opt.compile_timeout, &one.so,
                                     &one.len, &one.log);
            st->compiler_runs++;
            status = one.rc ? compile_failed(ctx, mi, one.log) : miss_bind(ctx, cs, mi, one.so, one.len, &r);
            if (one.rc == CC_NO_TMP && one.log) {
                cs->no_tmp = one.log;
                one.log = NULL;
            }
            so_unref(r);
            graph_free(one.text);
            graph_free(one.so);
            graph_free(one.log);
        }
        if (status == LF_OK) st->kernels_compiled++;
    }
    for (int u = 0; u < nunits; u++) so_unref(loaded[u]);
    graph_free(loaded);
    graph_free(unloadable);
    goto done;
nomem:
    status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory compiling the program's kernels");
done:
    if (units)
        for (int u = 0; u < nunits; u++) {
            graph_free(units[u].text);
            graph_free(units[u].so);
            graph_free(units[u].log);
        }
    graph_free(units);
    graph_free(left);
    graph_free(srcs);
    graph_free(prefixes);
    return status;
}

/* ---- programs -------------------------------------------------------------------------------- */

/* A long scan's groups (scan_lookback): 16 blocks of LF_SCAN_BLOCK, 256 KiB
 * of f32 per input, which stay in a core's L2 between the two reads. */
enum { SCAN_GROUP_BLOCKS = 16 };

typedef struct cpu_kernel {
    cg_layout *lay;                 /* loop nest and accesses */
    int64_t *P;                     /* parameters */
    kentry *fns;                    /* compiled functions (owned by the cache) */
    void **B;                       /* buffer pointers, set per eval */
    cg_partial *part;               /* FULL: partials, work x reductions; SCAN of
                                       one long row: the blocks' totals/offsets */
    cg_value *carry;                /* SCAN of one long row: per group of
                                       SCAN_GROUP_BLOCKS blocks, the fold up to its
                                       end (scan_lookback) */
    atomic_int *ready;              /* per group: its carry is published */
    int64_t ngroups;                /* groups of the row */
    int64_t lanes;                  /* scan_lookback: groups g go to lane g mod lanes */
    cg_value R[LF_MAX_ARGS];        /* FULL: finished reductions */
    int pass;                       /* FULL: the pass being run */
    int32_t err;                    /* gather loads: the index-error flag (B[lay->err_buf]) */
} cpu_kernel;

typedef struct cpu_program {
    program base;                   /* outputs, plan, statistics (backends/program.h) */
    cpu_kernel *k;                  /* base.s->nkernels */
    void **blocks;                  /* temporaries' memory blocks */
    void **stage;                   /* per output: where it is written when an index
                                       check runs before it is complete (kept across
                                       evals: no page faults each time), or NULL */
} cpu_program;

static void program_free(void *p) {
    cpu_program *pr = p;
    if (!pr) return;
    if (pr->k)
        for (int i = 0; i < pr->base.s->nkernels; i++) {
            graph_free(pr->k[i].lay);
            graph_free(pr->k[i].P);
            graph_free(pr->k[i].B);
            graph_free(pr->k[i].part);
            graph_free(pr->k[i].carry);
            graph_free(pr->k[i].ready);
        }
    if (pr->blocks)
        for (int b = 0; b < pr->base.s->nblocks; b++) graph_free(pr->blocks[b]);
    if (pr->stage)
        for (int i = 0; i < pr->base.n; i++) graph_free(pr->stage[i]);
    graph_free(pr->stage);
    graph_free(pr->blocks);
    graph_free(pr->k);
    program_release(&pr->base);
    graph_free(pr);
}

/* The CPU's parts of program_build (backends/program.h). */
static program *create_part(void *state) {
    (void)state;
    cpu_program *pr = graph_calloc(1, sizeof *pr);
    return pr ? &pr->base : NULL;
}

static kcache *cache_part(void *state) { return &((cpu_state *)state)->kernels; }

static const cg_dialect *dialect_part(const void *state) {
    return cg_dialect_c(((const cpu_state *)state)->vector_math);
}

/* The temporaries' blocks and the kernels' array. */
static lf_status prepare_part(lf_ctx *ctx, void *state, program *p) {
    (void)state;
    cpu_program *pr = (cpu_program *)p;
    const fuse_schedule *s = p->s;
    pr->k = graph_calloc((size_t)s->nkernels + 1, sizeof *pr->k);
    pr->blocks = graph_calloc((size_t)s->nblocks + 1, sizeof *pr->blocks);
    if (!pr->k || !pr->blocks) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the CPU program");
    for (int b = 0; b < s->nblocks; b++)
        if (s->block_bytes[b] && !(pr->blocks[b] = graph_malloc(s->block_bytes[b])))
            return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the CPU program");
    return LF_OK;
}

/* Kernel k's parameters, buffer pointers, and the partials of a full
 * reduction, a long scan or a scatter. */
static lf_status prepare_kernel_part(lf_ctx *ctx, void *state, program *p, int k, cg_layout *lay) {
    cpu_state *cs = state;
    cpu_program *pr = (cpu_program *)p;
    const fuse_schedule *s = p->s;
    cpu_kernel *ck = &pr->k[k];
    ck->lay = lay;
    ck->P = graph_calloc((size_t)lay->nparams + 1, sizeof *ck->P);
    ck->B = graph_calloc((size_t)lay->nbufs + 1, sizeof *ck->B);
    if (!ck->P || !ck->B) goto nomem;
    cg_fill_params(lay, ck->P);
    if (lay->param_stream >= 0) ck->P[lay->param_stream] = cg_stream_bytes(lay) > cs->stream_min;
    if (lay->strategy == CG_REDUCE_FULL) {
        int most = 1;
        for (int q = 0; q < s->kernels[k].npasses; q++) {
            int nq = cg_pass_reductions(&s->kernels[k], q);
            if (nq > most) most = nq;
        }
        ck->part = graph_calloc((size_t)(lay->work + 1) * (size_t)most, sizeof *ck->part);
        if (!ck->part) goto nomem;
    }
    if (lay->strategy == CG_SCAN && lay->work == 1 && cg_scan_blocks(lay) > 1) {
        /* one long row: the blocks' totals and offsets (scan_kernel) */
        ck->ngroups = (cg_scan_blocks(lay) + SCAN_GROUP_BLOCKS - 1) / SCAN_GROUP_BLOCKS;
        ck->part = graph_calloc((size_t)cg_scan_blocks(lay) + 1, sizeof *ck->part);
        ck->carry = graph_calloc((size_t)ck->ngroups, sizeof *ck->carry);
        ck->ready = graph_calloc((size_t)ck->ngroups, sizeof *ck->ready);
        if (!ck->part || !ck->carry || !ck->ready) goto nomem;
    } else if (lay->part_buf >= 0) { /* a scatter's partials: blocks x dst elements */
        ck->part = graph_calloc((size_t)lay->part_entries + 1, sizeof *ck->part);
        if (!ck->part) goto nomem;
    }
    return LF_OK;
nomem:
    return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the CPU program");
}

/* The misses: the disk first (kernel order, no lock), then misses_build. */
static lf_status compile_part(lf_ctx *ctx, void *state, program_miss *pm, int nm, lf_eval_stats *st) {
    cpu_state *cs = state;
    miss *m = graph_calloc((size_t)nm, sizeof *m);
    if (!m) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory compiling the program's kernels");
    lf_status status = LF_OK;
    for (int i = 0; i < nm; i++) {
        m[i] = (miss){.pm = &pm[i], .e = (kentry *)pm[i].e, .lock = -1};
        disk_key(cs, pm[i].e->text, m[i].key);
        sym_prefix(m[i].key, m[i].prefix);
    }
    for (int i = 0; i < nm && status == LF_OK; i++) {
        bool loaded = false;
        status = disk_load(ctx, cs, pm[i].lay, m[i].key, m[i].e, &loaded);
        if (status == LF_OK && loaded) {
            st->kernels_disk_hits++;
            miss_done(cs, &m[i]);
        }
    }
    if (status == LF_OK) status = misses_build(ctx, cs, m, nm, st);
    for (int i = 0; i < nm; i++) diskcache_unlock(m[i].lock, m[i].lock_path); /* a failed build's */
    graph_free(m);
    return status;
}

static void bind_part(program *p, int k, kcache_entry *e) { ((cpu_program *)p)->k[k].fns = (kentry *)e; }

/* ---- running ------------------------------------------------------------------------------------ */

static void run_range(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    cpu_kernel *ck = arg;
    ck->fns->run(ck->B, ck->P, begin, end);
}

static void pass_range(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    cpu_kernel *ck = arg;
    ck->fns->pass[ck->pass](ck->B, ck->P, ck->R, begin, end, ck->part);
}

static void row_range(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    cpu_kernel *ck = arg;
    ck->fns->row(ck->B, ck->P, ck->R, begin, end);
}

/* One long row over the pool's threads, in groups of SCAN_GROUP_BLOCKS
 * blocks taken round-robin (group g by lane g mod T): a lane folds its
 * group's block totals (lf_k_pass0: the row's first read, which leaves the
 * group in the core's cache), waits for group g-1's carry, chains the
 * offsets from it (lf_k_fin0) and publishes its own carry, then scans the
 * group from the cache (lf_k_scan). The row crosses memory once each way,
 * as a copy does, instead of being read twice; the folds are those of the
 * three-step order (codegen.h), so the result is the same bit for bit. A
 * lane only waits for a smaller group, whose lane never waits for a larger
 * one, and a thread given several lanes (one thread, or fewer threads than
 * lanes) takes its groups in increasing order: no wait can deadlock. */
static void scan_lookback(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    cpu_kernel *ck = arg;
    int64_t nb = cg_scan_blocks(ck->lay), lanes = ck->lanes;
    for (int64_t round = 0; round * lanes + begin < ck->ngroups; round++)
        for (int64_t lane = begin; lane < end; lane++) {
            int64_t g = round * lanes + lane;
            if (g >= ck->ngroups) break;
            int64_t b0 = g * SCAN_GROUP_BLOCKS, b1 = nb - b0 < SCAN_GROUP_BLOCKS ? nb : b0 + SCAN_GROUP_BLOCKS;
            ck->fns->pass[0](ck->B, ck->P, NULL, b0, b1, ck->part);
            cg_value carry[2] = {{0}, {.i = g > 0}}; /* group 0 starts from the identity */
            if (g > 0) {
                for (unsigned spins = 0; !atomic_load_explicit(&ck->ready[g - 1], memory_order_acquire); spins++)
                    if (spins > 64) sched_yield(); /* the machine may be busier than the pool */
                carry[0] = ck->carry[g - 1];
            }
            ck->fns->fin[0](ck->P, carry, ck->part + b0, b1 - b0);
            ck->carry[g] = carry[0];
            atomic_store_explicit(&ck->ready[g], 1, memory_order_release);
            ck->fns->scan(ck->B, ck->P, NULL, b0, b1, ck->part);
        }
}

/* A scan kernel: rows in parallel, each in one pass; one long row over
 * several threads by scan_lookback. The result is the same either way (the
 * order of lazyfuse.h). */
static void scan_kernel(cpu_pool *pool, int64_t min_par, cpu_kernel *ck) {
    const cg_layout *lay = ck->lay;
    int64_t nb = cg_scan_blocks(lay);
    if (lay->work == 1 && ck->part && nb >= 2 && min_par == 0 && cpu_pool_threads(pool) > 1) {
        for (int64_t g = 0; g < ck->ngroups; g++) atomic_store_explicit(&ck->ready[g], 0, memory_order_relaxed);
        ck->lanes = cpu_pool_threads(pool);
        cpu_pool_run(pool, scan_lookback, ck, ck->lanes, 1, 0);
        return;
    }
    cpu_pool_run(pool, run_range, ck, lay->work, 1, min_par);
}

static void run_kernel(cpu_pool *pool, int64_t parallel_min, cpu_kernel *ck) {
    const cg_layout *lay = ck->lay;
    const fuse_kernel *kn = lay->kernel;
    if (kn->kind == FUSE_KERNEL_SCATTER) { /* blocks in parallel into their partials, then dst's elements */
        int64_t min_par = kn->numel + kn->scatter->numel < parallel_min ? INT64_MAX : 0;
        if (lay->work) cpu_pool_run(pool, run_range, ck, lay->work, 1, min_par);
        if (kn->scatter->numel) cpu_pool_run(pool, row_range, ck, kn->scatter->numel, ELEMENT_GRAIN, min_par);
        return;
    }
    if (lay->work == 0 && lay->strategy != CG_REDUCE_FULL) return;
    /* below the threshold of total work, the calling thread runs it alone */
    int64_t elems = kn->numel * (kn->npasses + (kn->row ? 1 : 0));
    int64_t min_par = elems < parallel_min ? INT64_MAX : 0;
    switch (lay->strategy) {
    case CG_ELEMENTWISE: cpu_pool_run(pool, run_range, ck, lay->work, ELEMENT_GRAIN, min_par); return;
    case CG_REDUCE_INNER:
    case CG_REDUCE_OUTER: cpu_pool_run(pool, run_range, ck, lay->work, 1, min_par); return;
    case CG_SCAN: scan_kernel(pool, min_par, ck); return;
    case CG_REDUCE_FULL:
        for (int q = 0; q < kn->npasses; q++) {
            ck->pass = q;
            cpu_pool_run(pool, pass_range, ck, lay->work, 1, min_par);
            ck->fns->fin[q](ck->P, ck->R, ck->part, lay->work);
        }
        ck->fns->epi(ck->B, ck->P, ck->R);
        if (kn->row) cpu_pool_run(pool, row_range, ck, lay->work, 1, min_par);
        return;
    }
}

/* program_parts.run: runs the program (a cpu_program of state cs) writing
 * into dsts; fails only before any kernel runs, or when a kernel with
 * gather loads flags an index out of range: outputs stored at or after the
 * first such kernel are written to fresh memory, so that a failed eval
 * changes no output buffer. */
static lf_status run_part(lf_ctx *ctx, void *state, void *p, lf_buffer *const *dsts, lf_eval_stats *st) {
    cpu_state *cs = state;
    cpu_program *pr = p;
    const fuse_schedule *s = pr->base.s;
    int n = pr->base.n;
    void **data = graph_calloc((size_t)s->nslots + 1, sizeof *data);
    void **fresh = graph_calloc((size_t)n + 1, sizeof *fresh);
    const lf_buffer **ins = graph_calloc((size_t)s->nslots + 1, sizeof *ins);
    bool *unsafe = graph_calloc(2 * ((size_t)n + 1), sizeof *unsafe), *own_input = unsafe ? unsafe + n + 1 : NULL;
    int nin = 0;
    lf_status status = LF_OK;
    if (!data || !fresh || !ins || !unsafe) goto nomem;
    for (int j = 0; j < s->nslots; j++)
        if (s->slots[j].kind == FUSE_SLOT_INPUT) ins[nin++] = fuse_slot_buffer(&s->slots[j]);
    if (!graph_dst_aliases(n, dsts, nin, ins, unsafe, own_input)) goto nomem;
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        if (sl->kind == FUSE_SLOT_INPUT) data[j] = fuse_slot_buffer(sl)->data;
        else if (sl->kind == FUSE_SLOT_TEMP) data[j] = pr->blocks[sl->block];
    }
    /* outputs: in place when nothing reads the buffer, no other output names it
       and no kernel that may fail (gather index checks) runs before it is
       complete; or written into an input it reads only at the position
       written (fuse_output_in_place) when no kernel at all may fail (a failed
       eval must leave that input as it was) */
    int first_check = s->nkernels;
    for (int k = s->nkernels - 1; k >= 0; k--)
        if (pr->k[k].lay->err_buf >= 0 || pr->k[k].lay->kernel->sort) first_check = k; /* sorts: memory */
    for (int i = 0; i < n; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        if (sl->kind != FUSE_SLOT_OUTPUT || sl->output != i) continue;
        lf_buffer *d = dsts[i];
        bool in_place = own_input[i] && first_check == s->nkernels && fuse_output_in_place(s, i, d);
        if ((!unsafe[i] || in_place) && sl->def < first_check) {
            data[s->out_slot[i]] = d->data;
            st->outputs_in_place += unsafe[i];
        } else if (!unsafe[i] && sl->bytes) { /* behind an index check: the program's staging */
            if (!pr->stage && !(pr->stage = graph_calloc((size_t)n, sizeof *pr->stage))) goto nomem;
            if (!pr->stage[i] && !(pr->stage[i] = graph_malloc(sl->bytes))) goto nomem;
            data[s->out_slot[i]] = pr->stage[i];
            fresh[i] = NULL;
        } else if (sl->bytes) {
            if (!(fresh[i] = graph_malloc(sl->bytes))) goto nomem;
            data[s->out_slot[i]] = fresh[i];
        }
    }
    /* nothing below can fail but an index check, before any output is touched */
    for (int k = 0; k < s->nkernels; k++) {
        cpu_kernel *ck = &pr->k[k];
        for (int b = 0; b < ck->lay->nbufs; b++)
            ck->B[b] = ck->lay->buf_slot[b] == -2  ? (void *)ck->part
                       : ck->lay->buf_slot[b] < 0 ? (void *)&ck->err
                                                  : data[ck->lay->buf_slot[b]];
        ck->err = 0;
        if (ck->lay->kernel->nscalars) cg_fill_scalars(ck->lay, ck->P); /* lf_scalar_set */
        const fuse_kernel *kn = ck->lay->kernel;
        if (kn->kind == FUSE_KERNEL_SORT) { /* keys, the sort runtime, the slots (sort_kernel.c) */
            if (!cs->sort_cache) cs->sort_cache = cpu_sort_cache_new(); /* NULL: plain allocations */
            cpu_sort_job job = {ck->lay, ck->fns->keys, ck->fns->raw, ck->B, ck->P, NULL, NULL, cs->sort_cache};
            for (int j = 0; j < kn->nstores; j++) {
                const lf_node *sn = s->slots[kn->stores[j].slot].node;
                if (sn == kn->sort_values) job.values = data[kn->stores[j].slot];
                if (sn == kn->sort_indices) job.indices = data[kn->stores[j].slot];
            }
            if ((status = cpu_run_sort(ctx, cs->pool, cs->parallel_min, &job)) != LF_OK) goto done;
            continue;
        }
        run_kernel(cs->pool, cs->parallel_min, ck);
        if (ck->err) {
            status = fuse_report_index_error(s, k, data);
            goto done;
        }
    }
    for (int i = 0; i < n; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        const void *src = sl->kind == FUSE_SLOT_OUTPUT ? data[s->out_slot[i]] : fuse_slot_buffer(sl)->data;
        bool staged = pr->stage && pr->stage[i] && sl->output == i && data[s->out_slot[i]] == pr->stage[i];
        if (sl->kind == FUSE_SLOT_OUTPUT && sl->output == i && !fresh[i] && !staged) continue; /* in place */
        lf_buffer *d = dsts[i];
        if (staged && !d->wrapped && !d->pinned && !d->strided && d->storage == d->bytes && sl->bytes == d->bytes) {
            /* the staged block becomes the buffer's storage and the old one the
               next eval's stage: no copy (the buffer is the library's own and
               its address was never handed out; both blocks are graph_malloc'd
               of the same size) */
            void *t = d->data;
            d->data = pr->stage[i];
            pr->stage[i] = t;
            continue;
        }
        if (d->bytes && src != d->data) {
            memmove(d->data, src, d->bytes);
            st->bytes_staged += d->bytes;
        }
    }
    goto done;
nomem:
    status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory running the CPU program");
done:
    if (fresh)
        for (int i = 0; i < n; i++) graph_free(fresh[i]);
    graph_free(fresh);
    graph_free(data);
    graph_free(ins);
    graph_free(unsafe);
    return status;
}

static const program_parts cpu_parts = {
    .what = "kernel",
    .entry_size = sizeof(kentry),
    .create = create_part,
    .free = program_free,
    .cache = cache_part,
    .dialect = dialect_part,
    .prepare = prepare_part,
    .prepare_kernel = prepare_kernel_part,
    .compile = compile_part,
    .discard = entry_discard,
    .bind = bind_part,
    .run = run_part,
};

/* $TMPDIR cannot hold a compile now (cs->no_tmp, from the probe or a
 * compile of this eval: cc.h's CC_NO_TMP, a full disk or a missing folder).
 * Returns whether the schedule interpreter runs the eval instead:
 * LF_COMPILE_REQUIRE: no, the eval fails with LF_ERR_BACKEND (the message
 * is set). LF_COMPILE_AUTO: yes, after a one-line warning that says why
 * (once per context, shared with the no compiler warning); the driver puts
 * back the message a failed compile set. Either way the reason is dropped,
 * so the next program probes and compiles again (the disk may have room by
 * then). Nothing ran before this: the buffers are untouched. */
static bool no_tmp_fallback(lf_ctx *ctx, cpu_state *cs) {
    char *why = cs->no_tmp;
    cs->no_tmp = NULL;
    if (ctx->opt.compile == LF_COMPILE_REQUIRE) {
        graph_free(why);
        return false;
    }
    if (!cs->warned)
        fprintf(stderr,
                "lazyfuse: cannot compile kernels (%s); the CPU backend runs the schedule interpreter instead, "
                "which is much slower. Make room there, or set TMPDIR to a writable folder with room.\n",
                why);
    cs->warned = true;
    graph_free(why);
    return true;
}

/* graph_backend.ready: compiled kernels, or the schedule interpreter
 * (backends/host.c) when kernels cannot be compiled and the context allows
 * the fallback (LF_COMPILE_AUTO with no working compiler or no room to
 * compile in $TMPDIR, LF_COMPILE_NEVER), or when the context's buffers live
 * on a device (a test switching ctx->backend). */
static lf_status cpu_ready(lf_ctx *ctx, void **state, bool *on_host) {
    if (ctx->opt.compile == LF_COMPILE_NEVER || graph_ctx_on_device(ctx)) {
        *on_host = true;
        return LF_OK;
    }
    cpu_state *cs = get_state(ctx);
    if (!cs) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory starting the CPU backend");
    /* a compiler, before any program is looked up or built (probe returns at
       once once it found one; a cached program implies it did) */
    if (!probe(ctx, cs)) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory probing the C compiler");
    if (cs->no_tmp) {
        if (ctx->opt.compile == LF_COMPILE_REQUIRE)
            graph_error(ctx, LF_ERR_BACKEND, "eval: cannot compile kernels: %s", cs->no_tmp);
        if (!no_tmp_fallback(ctx, cs)) return LF_ERR_BACKEND;
        *on_host = true;
        return LF_OK;
    }
    if (cs->compiler < 0) {
        if (ctx->opt.compile == LF_COMPILE_REQUIRE)
            return graph_error(ctx, LF_ERR_BACKEND, "eval: no working C compiler: %s",
                               cs->cc_problem ? cs->cc_problem : "?");
        if (!cs->warned)
            fprintf(stderr,
                    "lazyfuse: no working C compiler (%s); the CPU backend runs the schedule "
                    "interpreter instead, which is much slower. Install gcc or set CC.\n",
                    cs->cc_problem ? cs->cc_problem : "?");
        cs->warned = true;
        *on_host = true;
        return LF_OK;
    }
    *state = cs;
    return LF_OK;
}

/* graph_backend.fall_back: a build that failed because $TMPDIR had no room
 * (only a compile sets cs->no_tmp: nothing ran) goes to the interpreter
 * where the context allows it (no_tmp_fallback). */
static bool cpu_fall_back(lf_ctx *ctx, void *state) {
    cpu_state *cs = state;
    return cs->no_tmp && no_tmp_fallback(ctx, cs);
}

lf_status cpu_set_threads(lf_ctx *ctx, int threads) {
    cpu_state *cs = get_state(ctx);
    cpu_pool *p = cs ? cpu_pool_new(threads) : NULL;
    if (!p) return graph_error(ctx, LF_ERR_NOMEM, "cpu_set_threads: out of memory");
    cpu_pool_free(cs->pool);
    cs->pool = p;
    ctx->opt.threads = threads;
    return LF_OK;
}

/* ---- the backend's table entry (graph/backend.h) ------------------------------------------ */

static lf_status cpu_open(lf_ctx *ctx, char *why, size_t cap) {
    (void)ctx, (void)why, (void)cap; /* the state is made on first use */
    return LF_OK;
}

static void cpu_close(lf_ctx *ctx) {
    state_free(ctx->state[LF_BACKEND_CPU]);
    ctx->state[LF_BACKEND_CPU] = NULL;
}

const graph_backend cpu_backend = {
    .id = LF_BACKEND_CPU,
    .name = "cpu",
    .label = "CPU",
    .open = cpu_open,
    .close = cpu_close,
    /* host memory: no buffer entries */
    .parts = &cpu_parts,
    .ready = cpu_ready,
    .fall_back = cpu_fall_back,
    .device_name = host_device_name,
};
