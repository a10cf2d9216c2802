/* benches/lazyfuse_bench.c: lazyfuse-bench, the fusion benchmark.
 *
 * Runs the seed cases (tools/seed_examples.c builds them by name) on float32,
 * each fused and unfused (fusion off) in a fresh context, and a STREAM-style
 * copy measured in the same process as the bandwidth limit; prints a table,
 * or with --json one JSON object per line. Per case and mode: build the graph
 * once, eval once cold (first_s: planning plus compilation), once more warm,
 * then time --reps evals (median). Each context gets a fresh kernel-cache
 * folder unless --cache-dir says otherwise, so first_s is a cold compile.
 * Fused and unfused outputs are compared; the stencil cases (stencil9,
 * conv3x3) are also checked against a plain C loop over the same input.
 * A last "overhead" case times re-evaluating a built triad at n = 1024, and
 * rebuilding it each time (the in-memory kernel cache).
 * --sweep runs the copy and every case at each n = 2^LO .. 2^HI (matmul and
 * overhead once, at the end), with a progress line on stderr per step.
 * --save-outputs writes each case's output (at the last n) as raw float32 so
 * that benches/peers/ can check other systems against lazyfuse.
 * Issue 16: the copy is measured twice at every n, STREAM's loop and with
 * non-temporal stores (--copy picks the % copy reference); the
 * transcendental cases and the stencils run beside c_handfused, a hand-written one-pass C
 * loop (benches/handfused.c, -O3 -march=native, libmvec) on the same
 * threads, timed interleaved with lazyfuse's eval; --matmul-n takes a list
 * of sides for the contraction cases.
 *
 * What must stay true:
 * - gbps counts graph inputs and outputs only (each input read once, each
 *   output written once), from the shapes of the buffers bound; never
 *   temporaries. stream_copy counts 2 * n * 4 bytes per copy (read + write),
 *   as STREAM does, so the ratio is fused traffic over copy traffic.
 * - Only the evals (or the copy) are inside the timed regions; clocks are
 *   CLOCK_MONOTONIC (CUDA copy: events).
 * - The copy runs on as many threads as the contexts use.
 * - Bad flags: a message and exit 2. A case that fails prints lf_errmsg and
 *   the others still run; the exit status is then 1. Nothing aborts.
 * - With --json, stdout holds only JSON lines; progress goes to stderr.
 */
#include "lazyfuse.h"
#include "backend_arg.h"
#include "seed_examples.h"
#include "spca.h"
#ifdef LF_BENCH_HANDFUSED
#include "handfused.h"
#include "timed_eval.h"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define PROG "lazyfuse-bench"
#define OVERHEAD_N 1024     /* elements of the overhead case's triad */
#define OVERHEAD_ITERS 2000 /* timed iterations of each overhead mode */
#define AUTO_REPS_SECONDS 0.5
#define AUTO_REPS_MIN 5
#define AUTO_REPS_MAX 200
#define SLOW_EVAL_S 1.0       /* a contraction whose eval takes longer ... */
#define SLOW_EVAL_REPS 3      /* ... gets this many timed reps (auto reps only) */
#define SWEEP_LO 10         /* --sweep with no range: n = 2^10 .. 2^26 */
#define SWEEP_HI 26
#define SWEEP_MAX_SIZES 64
#define MATMUL_MAX_SIDES 8  /* --matmul-n 256,512,1024: at most this many sides */

/* ---- cases ------------------------------------------------------------- */

typedef enum case_shape {
    SHAPE_ELEMWISE, /* main input(s) of n elements (sum_of_squares too) */
    SHAPE_ROWS,     /* softmax: 4096 rows of max(1, n / 4096) */
    SHAPE_MATMUL,   /* n x n times n x n, n = --matmul-n */
    SHAPE_SQUARE,   /* an s x s output, s = floor(sqrt(n / 4)): 2048 at the
                       default n = 2^24 (conv3x3) */
    SHAPE_SAMPLES   /* --samples rows or samples, whatever --n (topk_rows,
                       spca); in a sweep they run once, after it */
} case_shape;

typedef struct bench_case {
    const char *name;    /* on the command line and in JSON */
    const char *seed;    /* the seed example it builds */
    case_shape shape;    /* how --n maps to the builder's size */
    int ninputs;         /* f32 graph inputs, each of the main input's shape */
    double tol;          /* largest fused/unfused relative difference */
    /* stencils: f32 input elements for builder size s (traffic: read once;
       NULL: ninputs x the main input) */
    int64_t (*in_numel)(int64_t s);
    /* stencils: recomputes output 0 (numel elements) of builder size s with a
       plain C loop and returns the largest relative difference (NAN when out
       of memory); NULL: no such check */
    double (*ref_diff)(int64_t s, const float *out, int64_t numel);
} bench_case;

static int64_t stencil9_in(int64_t s);
static int64_t conv3x3_in(int64_t s);
static int64_t layer_norm_in(int64_t s);
static int64_t matmul_vec_in(int64_t s);
static int64_t batched_in(int64_t s);
static int64_t matvec_in(int64_t s);
static int64_t stencil5x5_in(int64_t s);
static int64_t conv1d_in(int64_t s);
static int64_t embedding_in(int64_t s);
static double stencil9_ref(int64_t s, const float *out, int64_t numel);
static double conv3x3_ref(int64_t s, const float *out, int64_t numel);

/* ninputs mirrors tools/seed_examples.c (its builders bind their buffers and
 * drop them, so the program cannot enumerate them); gbps depends on it. */
static const bench_case cases[] = {
    {"gaussian_pdf", "gaussian_pdf", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},
    {"polar_distance", "polar_distance", SHAPE_ELEMWISE, 4, 1e-4, NULL, NULL},
    {"pow_const", "pow_const", SHAPE_ELEMWISE, 4, 1e-4, NULL, NULL}, /* polar_distance, ** lf_const(0.5) */
    {"hypot", "hypot", SHAPE_ELEMWISE, 2, 1e-4, NULL, NULL},
    {"triad", "triad", SHAPE_ELEMWISE, 3, 1e-4, NULL, NULL},
    {"chain8", "chain8", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},
    {"sum_of_squares", "sum_of_squares", SHAPE_ELEMWISE, 1, 1e-3, NULL, NULL},
    {"softmax_rows", "softmax_rows", SHAPE_ROWS, 1, 1e-4, NULL, NULL},
    {"matmul_zip_reduce", "matmul_zip_reduce", SHAPE_MATMUL, 2, 1e-3, NULL, NULL},
    {"chain32", "chain", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},
    {"random_fused", "random_fused", SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"random_fill", "random_fill", SHAPE_ELEMWISE, 0, 0, NULL, NULL},
    {"cumsum", "cumsum", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},
    {"cumsum_rows", "cumsum_rows", SHAPE_ROWS, 1, 1e-4, NULL, NULL},
    {"scan_fused", "scan_fused", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},
    {"gather_perm", "gather_perm", SHAPE_ELEMWISE, 3, 0, NULL, NULL},  /* x f32 + p i64: 12 bytes an element */
    {"gather_rows", "gather_rows", SHAPE_ELEMWISE, 2, 0, NULL, NULL},  /* x f32 + idx i32 */
    {"histogram", "histogram", SHAPE_ELEMWISE, 1, 0, NULL, NULL},      /* x f32; 256 i64 out */
    {"const_sweep", NULL, SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL},        /* own runner (own_cases) */
    {"e2e_gaussian", "gaussian_pdf", SHAPE_ELEMWISE, 1, 1e-4, NULL, NULL}, /* run_e2e_gaussian: wrapped host arrays */
    {"inplace_axpy", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},          /* own runner: x = x*0.5 + 1 into x */
    /* n outputs from n + 8 inputs (the input comes padded): 8n + 32 bytes */
    {"stencil9", "stencil9", SHAPE_ELEMWISE, 1, 1e-5, stencil9_in, stencil9_ref},
    /* s x s outputs (s = floor(sqrt(n / 4)), 2048 at n = 2^24) from [s+2, s+2];
       9 weights are lf_consts (not traffic) */
    {"conv3x3", "conv3x3", SHAPE_SQUARE, 1, 1e-5, conv3x3_in, conv3x3_ref},
    /* issue 15, own runners (run_sorted): outputs are checked exactly
       between the modes (spca: also against the plain C program) */
    {"sort_f32", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},     /* n f32 keys -> sorted f32 */
    /* issue 30: one row of n f32 keys in the other distributions (sort_keys_fill),
       sorted (f32 out) and argsorted (i64 out) */
    {"sort_normal", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"sort_sorted", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"sort_reversed", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"sort_few", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_f32", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_normal", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_sorted", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_reversed", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_few", NULL, SHAPE_ELEMWISE, 1, 0, NULL, NULL},
    {"argsort_rows", NULL, SHAPE_ROWS, 1, 0, NULL, NULL},     /* [4096, n/4096] f32 -> i64 */
    {"topk_rows", NULL, SHAPE_SAMPLES, 1, 0, NULL, NULL},     /* [S, 1000] f32 -> [S, 10] f32 + i64 */
    {"spca", NULL, SHAPE_SAMPLES, 0, 1e-5, NULL, NULL},       /* S samples, p = 1000, d = 3, k = 10 */
    /* issue 16: a row case (x [4096, n/4096] and gamma, beta of the row) and
       the contractions, whose side is --matmul-n (each of its list) */
    {"layer_norm", "layer_norm", SHAPE_ROWS, 1, 1e-4, layer_norm_in, NULL},
    {"matmul_bias_relu", "matmul_bias_relu", SHAPE_MATMUL, 2, 1e-3, matmul_vec_in, NULL}, /* A, B, bias */
    {"matmul_scaled", "matmul_scaled", SHAPE_MATMUL, 2, 1e-3, matmul_vec_in, NULL},       /* A, B, s */
    {"batched_matmul", "batched_matmul", SHAPE_MATMUL, 2, 1e-3, batched_in, NULL},        /* 8 x [n/2]^2 each */
    {"matvec", "matvec", SHAPE_MATMUL, 1, 1e-3, matvec_in, NULL},                         /* A, x */
    /* issue 30: where a plain or tiled C loop was ahead (tools/seed_examples.c) */
    {"stencil5x5", "stencil5x5", SHAPE_SQUARE, 1, 1e-5, stencil5x5_in, NULL},  /* [s+4]^2 in, s^2 out */
    {"conv1d_31", "conv1d_31", SHAPE_ELEMWISE, 1, 1e-5, conv1d_in, NULL},      /* n + 30 in, n out */
    {"bincount2", "bincount2", SHAPE_ELEMWISE, 1, 1e-12, NULL, NULL},         /* x f32; 256 i64 + 256 f32 out */
    {"embedding", "embedding", SHAPE_ELEMWISE, 1, 0, embedding_in, NULL},      /* idx n/64 i32, rows of a 1 MiB table */
    {"kmeans_assign", "kmeans_assign", SHAPE_ELEMWISE, 1, 0, NULL, NULL},     /* x [n/16, 16] f32; i64 [n/16] out */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define SOFTMAX_ROWS 4096
#define SPCA_SAMPLES 64000  /* (4 / epsilon)^d with epsilon = 0.1, d = 3 */
#define SPCA_P 1000         /* features; also topk_rows' row length */
#define SPCA_D 3
#define SPCA_K 10           /* also topk_rows' k */
#define SPCA_SEED 2014      /* the samples' lf_random seed (as lazyfuse-spca's default) */
#define SORT_X_SEED 43      /* seed_fill_f32 seeds of the sort cases' inputs, in [-1, 1) */
#define ARGSORT_X_SEED 47
#define TOPK_X_SEED 53

/* ---- options ------------------------------------------------------------ */

typedef struct options {
    int64_t n;              /* --n */
    int64_t matmul_n;       /* the side the contraction cases run at now */
    int64_t matmul_sides[MATMUL_MAX_SIDES]; /* --matmul-n's list, ascending */
    int nmatmul;            /* its length */
    lf_backend backend;     /* --backend */
    bool run_fused, run_unfused; /* --mode */
    int reps;               /* --reps; 0: auto */
    int threads;            /* --threads as given (0: all CPUs) */
    int nthreads;           /* threads actually used: threads or online CPUs */
    bool json;              /* --json */
    int copy;               /* --copy: the reference copy, a copy_kind (0 loop, 1 memcpy, 2 nt) */
    bool selected[NCASES];  /* --case */
    bool overhead;          /* "overhead" selected */
    const char *cache_dir;  /* --cache-dir DIR; NULL: fresh folders (or "default") */
    bool cache_default;     /* --cache-dir default: the library's own folder */
    bool sweep;             /* --sweep */
    int sweep_lo, sweep_hi, sweep_step; /* exponents of 2 */
    bool n_given;           /* --n was given (excludes --sweep) */
    const char *save_dir;   /* --save-outputs DIR */
    int64_t samples;        /* --samples: topk_rows' rows, spca's samples */
} options;

static int usage(FILE *f) {
    fprintf(f,
            "usage: " PROG " [options]\n"
            "  --n N            elements of the main input (default 16777216 = 2^24);\n"
            "                   softmax_rows uses 4096 rows of N/4096\n"
            "  --sweep [LO:HI[:STEP]]  run at every n = 2^LO, 2^(LO+STEP), .., 2^HI\n"
            "                   (default 10:26:1; HI is always included) instead of one --n;\n"
            "                   matmul_zip_reduce and overhead run once, after the sweep;\n"
            "                   softmax_rows is left out where n < 4096. A progress line per\n"
            "                   step goes to stderr\n"
            "  --case NAME      run only these cases (repeatable or comma list; see --list)\n"
            "  --backend B      cpu (default) or cuda\n"
            "  --mode M         fused, unfused or both (default both)\n"
            "  --reps R         timed evals per case and mode (default: ~0.5 s worth, 5..200)\n"
            "  --threads T      worker threads of the contexts and the copy (default 0: all CPUs)\n"
            "  --matmul-n M[,M..]  side of matmul_zip_reduce and the other contraction cases\n"
            "                   (default 256); a comma list (up to 8) runs them at each side,\n"
            "                   after the other cases\n"
            "  --samples S      rows of topk_rows and samples of spca (default 64000)\n"
            "  --copy K         the stream_copy that %% copy is against: loop (default,\n"
            "                   STREAM's), memcpy or nt (non-temporal stores); the loop and\n"
            "                   the nt copy are measured at every n whatever K is\n"
            "  --cache-dir D    kernel disk cache of every context: a folder, or 'default'\n"
            "                   (the library's); without it each case and mode gets a fresh\n"
            "                   empty folder (removed at exit), so first_s is a cold compile\n"
            "  --save-outputs D write each case's output, at the (last) n, to D/CASE.f32 (raw\n"
            "                   float32, C order; the fused one when fused ran); D is created\n"
            "  --json           one JSON object per line on stdout, progress on stderr\n"
            "  --list           list the cases and exit\n"
            "  --help           this text\n");
    return f == stderr ? 2 : 0;
}

static int bad_flag(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    return 2;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int find_case(const char *name, size_t len) {
    for (int i = 0; i < NCASES; i++)
        if (strlen(cases[i].name) == len && !strncmp(cases[i].name, name, len)) return i;
    return -1;
}

/* Marks the cases of a comma-separated list; 0 or a bad-flag exit code. */
static int select_cases(options *o, const char *list) {
    const char *s = list;
    for (;;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        int k = find_case(s, len);
        if (k >= 0) o->selected[k] = true;
        else if (len == 8 && !strncmp(s, "overhead", 8)) o->overhead = true;
        else if (len == 3 && !strncmp(s, "all", 3)) {
            for (int i = 0; i < NCASES; i++) o->selected[i] = true;
            o->overhead = true;
        } else
            return bad_flag("--case: unknown case '%.*s'", (int)len, s);
        if (!end) return 0;
        s = end + 1;
    }
}

static const char *own_case_what(const bench_case *c);

static void list_cases(void) {
    for (int i = 0; i < NCASES; i++) {
        const seed_example *ex = cases[i].seed ? seed_find(cases[i].seed) : NULL;
        printf("%-18s %s\n", cases[i].name, ex ? ex->what : own_case_what(&cases[i]));
    }
    printf("%-18s host time per eval of a built triad at n = %d, and per rebuild + eval\n",
           "overhead", OVERHEAD_N);
}

/* --sweep's "LO:HI[:STEP]" (exponents of 2, 0 <= LO <= HI <= 40, STEP >= 1),
 * or the default range when range is NULL; 0 or a bad-flag exit code. */
static int parse_sweep(options *o, const char *range) {
    o->sweep = true;
    o->sweep_lo = SWEEP_LO, o->sweep_hi = SWEEP_HI, o->sweep_step = 1;
    if (!range) return 0;
    int lo, hi, step = 1, used = 0;
    int got = sscanf(range, "%d:%d%n:%d%n", &lo, &hi, &used, &step, &used);
    if (got < 2 || range[used] || lo < 0 || hi < lo || hi > 40 || step < 1)
        return bad_flag("--sweep: expected LO:HI or LO:HI:STEP with 0 <= LO <= HI <= 40 and "
                        "STEP >= 1 (exponents of 2), got '%s'", range);
    o->sweep_lo = lo, o->sweep_hi = hi, o->sweep_step = step;
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* --matmul-n's "M" or "M1,M2,..": sides in 1..65536, sorted ascending,
 * repeats dropped; o->matmul_n is the first. 0 or a bad-flag exit code. */
static int parse_sides(options *o, const char *list) {
    o->nmatmul = 0;
    for (const char *s = list;;) {
        const char *end = strchr(s, ',');
        char one[32];
        size_t len = end ? (size_t)(end - s) : strlen(s);
        int64_t v;
        if (len >= sizeof one) len = sizeof one - 1;
        memcpy(one, s, len);
        one[len] = '\0';
        if (!parse_i64(one, 1, 1 << 16, &v))
            return bad_flag("--matmul-n: expected integers in 1..65536 (a comma list), got '%s'", list);
        if (o->nmatmul == MATMUL_MAX_SIDES)
            return bad_flag("--matmul-n: at most %d sides, got '%s'", MATMUL_MAX_SIDES, list);
        o->matmul_sides[o->nmatmul++] = v;
        if (!end) break;
        s = end + 1;
    }
    qsort(o->matmul_sides, (size_t)o->nmatmul, sizeof o->matmul_sides[0], cmp_i64);
    int k = 0;
    for (int i = 0; i < o->nmatmul; i++)
        if (!k || o->matmul_sides[i] != o->matmul_sides[k - 1]) o->matmul_sides[k++] = o->matmul_sides[i];
    o->nmatmul = k;
    o->matmul_n = o->matmul_sides[0];
    return 0;
}

/* Parses argv into *o; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->n = (int64_t)1 << 24;
    o->matmul_n = 256;
    o->matmul_sides[0] = 256, o->nmatmul = 1;
    o->samples = SPCA_SAMPLES;
    o->backend = LF_BACKEND_CPU;
    o->run_fused = o->run_unfused = true;
    bool any_case = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char flag[32];
        const char *eq = strchr(a, '=');
        size_t flen = eq && !strncmp(a, "--", 2) ? (size_t)(eq - a) : strlen(a);
        if (flen >= sizeof flag) return bad_flag("unknown option '%s'", a);
        memcpy(flag, a, flen);
        flag[flen] = '\0';
        bool has_eq = eq && flen != strlen(a);
        if (has_eq && (!strcmp(flag, "--help") || !strcmp(flag, "--list") || !strcmp(flag, "--json")))
            return bad_flag("%s takes no value", flag);
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) return usage(stdout);
        if (!strcmp(flag, "--list")) {
            list_cases();
            return 0;
        }
        if (!strcmp(flag, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(flag, "--sweep")) {
            /* the range is optional: "--sweep", "--sweep=10:20", "--sweep 10:20" */
            const char *range = has_eq ? eq + 1
                                : i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9' ? argv[++i]
                                : NULL;
            int rc = parse_sweep(o, range);
            if (rc) return rc;
            continue;
        }
        static const char *const with_value[] = {"--n", "--case", "--backend", "--mode", "--reps",
                                                 "--threads", "--matmul-n", "--copy", "--samples",
                                                 "--cache-dir", "--save-outputs"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known = known || !strcmp(flag, with_value[k]);
        if (!known) return bad_flag("unknown option '%s'", a);
        if (has_eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return bad_flag("%s needs a value", flag);
        int64_t v;
        if (!strcmp(flag, "--n")) {
            if (!parse_i64(val, 1, (int64_t)1 << 40, &v))
                return bad_flag("--n: expected an integer in 1..2^40, got '%s'", val);
            o->n = v;
            o->n_given = true;
        } else if (!strcmp(flag, "--save-outputs")) {
            if (!*val) return bad_flag("--save-outputs: empty folder name");
            o->save_dir = val;
        } else if (!strcmp(flag, "--matmul-n")) {
            int rc = parse_sides(o, val);
            if (rc) return rc;
        } else if (!strcmp(flag, "--samples")) {
            if (!parse_i64(val, 1, (int64_t)1 << 30, &v))
                return bad_flag("--samples: expected an integer in 1..2^30, got '%s'", val);
            o->samples = v;
        } else if (!strcmp(flag, "--reps")) {
            if (!parse_i64(val, 1, 1000000, &v))
                return bad_flag("--reps: expected an integer in 1..1000000, got '%s'", val);
            o->reps = (int)v;
        } else if (!strcmp(flag, "--threads")) {
            if (!parse_i64(val, 0, 4096, &v))
                return bad_flag("--threads: expected an integer in 0..4096, got '%s'", val);
            o->threads = (int)v;
        } else if (!strcmp(flag, "--backend")) {
            lf_backend b;
            if (backend_from_name(val, &b) && (b == LF_BACKEND_CPU || b == LF_BACKEND_CUDA)) o->backend = b;
            else return bad_flag("--backend: expected cpu or cuda, got '%s'", val);
        } else if (!strcmp(flag, "--mode")) {
            if (!strcmp(val, "fused")) o->run_fused = true, o->run_unfused = false;
            else if (!strcmp(val, "unfused")) o->run_fused = false, o->run_unfused = true;
            else if (!strcmp(val, "both")) o->run_fused = o->run_unfused = true;
            else return bad_flag("--mode: expected fused, unfused or both, got '%s'", val);
        } else if (!strcmp(flag, "--cache-dir")) {
            if (!*val) return bad_flag("--cache-dir: empty folder name");
            o->cache_default = !strcmp(val, "default");
            o->cache_dir = o->cache_default ? NULL : val;
        } else if (!strcmp(flag, "--copy")) {
            if (!strcmp(val, "loop")) o->copy = 0;
            else if (!strcmp(val, "memcpy")) o->copy = 1;
            else if (!strcmp(val, "nt")) o->copy = 2;
            else return bad_flag("--copy: expected loop, memcpy or nt, got '%s'", val);
        } else { /* --case */
            int rc = select_cases(o, val);
            if (rc) return rc;
            any_case = true;
        }
    }
    if (!any_case) {
        for (int i = 0; i < NCASES; i++) o->selected[i] = true;
        o->overhead = true;
    }
    if (o->sweep && o->n_given) return bad_flag("--n and --sweep exclude each other");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->nthreads = o->threads ? o->threads : (cpus > 0 ? (int)cpus : 1);
    return -1;
}

/* ---- helpers -------------------------------------------------------------- */

/* Every eval goes through bench_eval (timed_eval.h): lf_eval, then the wait
 * for the device, so a clock read (bench_now) after it follows the kernels
 * on CUDA. */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of t[0..n); sorts t. */
static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* --reps, or enough reps to take AUTO_REPS_SECONDS at one_s each. */
static int pick_reps(const options *o, double one_s) {
    if (o->reps) return o->reps;
    double r = one_s > 0 ? ceil(AUTO_REPS_SECONDS / one_s) : AUTO_REPS_MAX;
    return r < AUTO_REPS_MIN ? AUTO_REPS_MIN : r > AUTO_REPS_MAX ? AUTO_REPS_MAX : (int)r;
}

/* A JSON number, or null for NaN and infinities (JSON has neither). */
static void json_num(const char *key, double v, const char *fmt) {
    if (isfinite(v)) {
        printf(",\"%s\":", key);
        printf(fmt, v);
    } else
        printf(",\"%s\":null", key);
}

/* A JSON string: s quoted, with quotes, backslashes and control characters
 * escaped. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

/* Element i of a host array of dtype t, as a double. */
static double elem(const void *p, lf_dtype t, int64_t i) {
    switch (t) {
    case LF_BOOL: return ((const unsigned char *)p)[i];
    case LF_I32: return ((const int32_t *)p)[i];
    case LF_I64: return (double)((const int64_t *)p)[i];
    case LF_F32: return ((const float *)p)[i];
    case LF_F64: return ((const double *)p)[i];
    default: return NAN;
    }
}

/* Largest relative difference of a from the baseline b (n elements of t).
 * Each difference is divided by the larger magnitude of the pair, but by no
 * less than 1e-3 of b's largest finite magnitude, so elements near zero (a
 * cosine's roots, a sum that cancels) are compared at the array's scale.
 * NaN matches only NaN, an infinity only itself (else the result is inf). */
static double max_rel_diff(const void *a, const void *b, lf_dtype t, int64_t n) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double y = fabs(elem(b, t, i));
        if (isfinite(y) && y > scale) scale = y;
    }
    double floor_mag = scale * 1e-3 > DBL_MIN ? scale * 1e-3 : DBL_MIN;
    for (int64_t i = 0; i < n; i++) {
        double x = elem(a, t, i), y = elem(b, t, i);
        if (isnan(x) || isnan(y)) {
            if (isnan(x) && isnan(y)) continue;
            return INFINITY;
        }
        if (x == y) continue;
        if (isinf(x) || isinf(y)) return INFINITY;
        double m = fmax(fmax(fabs(x), fabs(y)), floor_mag);
        double d = fabs(x - y) / m;
        if (d > worst) worst = d;
    }
    return worst;
}

/* "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or a fallback. */
static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5)) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, cap, "%s", colon);
        break;
    }
    fclose(f);
}

/* ---- a team of threads: the copies and the c_handfused references --------- */

/* A job over [0, n): each of nthreads workers (the calling thread is worker
 * 0) runs fn on its own static chunk, the w-th of nthreads near-equal
 * ranges, so a job that first-touches memory puts each page with the thread
 * that later works on it. Threads are made once and released by a barrier;
 * only the work between the start and end barriers is timed. */
typedef struct team team;
typedef void (*team_fn)(const team *t, int64_t lo, int64_t hi);

typedef struct team_arg {
    team *t;
    int index;
} team_arg;

struct team {
    int nthreads;                    /* the team, the calling thread included */
    pthread_t *tids;                 /* helper threads 1 .. nthreads-1 */
    team_arg *args;                  /* their arguments */
    pthread_mutex_t gate;            /* held while the team is formed */
    pthread_barrier_t start, done;   /* around each job */
    int64_t n;                       /* the range of the current job */
    team_fn fn;                      /* the current job; NULL: quit */
    void *arg;                       /* the job's data */
};

static void team_chunk(team *t, int w) {
    int64_t T = t->nthreads, q = t->n / T, rem = t->n % T;
    int64_t lo = q * w + (w < rem ? w : rem), hi = lo + q + (w < rem);
    t->fn(t, lo, hi);
}

static void *team_worker(void *arg) {
    team_arg *a = arg;
    team *t = a->t;
    /* wait until the team is complete and its barriers exist */
    pthread_mutex_lock(&t->gate);
    pthread_mutex_unlock(&t->gate);
    for (;;) {
        pthread_barrier_wait(&t->start);
        if (!t->fn) return NULL;
        team_chunk(t, a->index);
        pthread_barrier_wait(&t->done);
    }
}

/* Runs fn over [0, n) on every worker; returns the seconds between the
 * start and the end barrier as the calling thread sees them. */
static double team_run(team *t, team_fn fn, void *arg, int64_t n) {
    t->fn = fn, t->arg = arg, t->n = n;
    double t0 = bench_now();
    pthread_barrier_wait(&t->start);
    team_chunk(t, 0);
    pthread_barrier_wait(&t->done);
    return bench_now() - t0;
}

/* Forms a team of nthreads: fewer, with a message, if a thread cannot be
 * made (the barriers are sized afterwards). False when out of memory. */
static bool team_start(team *t, int nthreads, const char *what) {
    memset(t, 0, sizeof *t);
    t->tids = calloc((size_t)nthreads, sizeof *t->tids);
    t->args = calloc((size_t)nthreads, sizeof *t->args);
    if (!t->tids || !t->args) {
        free(t->tids), free(t->args);
        return false;
    }
    pthread_mutex_init(&t->gate, NULL);
    pthread_mutex_lock(&t->gate);
    int k = 1;
    for (; k < nthreads; k++) {
        t->args[k] = (team_arg){t, k};
        int e = pthread_create(&t->tids[k], NULL, team_worker, &t->args[k]);
        if (e) {
            fprintf(stderr, PROG ": %s: pthread_create: %s; %d threads\n", what, strerror(e), k);
            break;
        }
    }
    t->nthreads = k;
    pthread_barrier_init(&t->start, NULL, (unsigned)k);
    pthread_barrier_init(&t->done, NULL, (unsigned)k);
    pthread_mutex_unlock(&t->gate);
    return true;
}

static void team_stop(team *t) {
    t->fn = NULL;
    pthread_barrier_wait(&t->start); /* the workers see no job and return */
    for (int w = 1; w < t->nthreads; w++) pthread_join(t->tids[w], NULL);
    pthread_barrier_destroy(&t->start);
    pthread_barrier_destroy(&t->done);
    pthread_mutex_destroy(&t->gate);
    free(t->tids);
    free(t->args);
}

/* ---- STREAM-style copies on the host ---------------------------------------- */

/* The reference copy is STREAM's: a plain loop dst[i] = src[i], compiled
 * with ordinary stores as lazyfuse's own kernels are. benches/meson.build
 * passes -fno-tree-loop-distribute-patterns so GCC keeps it a loop instead
 * of calling memcpy (glibc's memcpy switches to non-temporal stores on large
 * blocks, which skip the write-allocate read and report a higher figure than
 * STREAM's Copy). --copy memcpy measures that variant instead, --copy nt the
 * nt copy below. Whatever the reference, the loop and the nt copy are both
 * measured at every n and reported on the stream_copy line. */
static void copy_loop(float *restrict dst, const float *restrict src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* The copy with non-temporal stores (_mm_stream_ps, SSE: every x86-64):
 * the stores go to memory through write-combining buffers without reading
 * the destination's lines first (no write-allocate), so it moves 2 x n x 4
 * bytes where the loop moves 3 x n x 4: the limit for a kernel whose output
 * is larger than the last-level cache and is stored with streaming stores.
 * Below that size it is slower than the loop (the output leaves the cache).
 * Elsewhere than x86-64 there is no such copy (nt_ok false). */
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define HAVE_NT_COPY 1
static void copy_nt(float *restrict dst, const float *restrict src, int64_t n) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = src[i];
    for (; i + 16 <= n; i += 16) { /* one 64-byte line per iteration */
        __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
        __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);
        _mm_stream_ps(dst + i, a);
        _mm_stream_ps(dst + i + 4, b);
        _mm_stream_ps(dst + i + 8, c);
        _mm_stream_ps(dst + i + 12, d);
    }
    for (; i < n; i++) dst[i] = src[i];
    _mm_sfence(); /* the streamed lines are globally visible before the end barrier */
}
#else
#define HAVE_NT_COPY 0
#endif

/* The last-level cache's bytes as glibc reports them (L3, else L2), or 0. */
static long last_level_cache(void) {
    long b = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    b = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (b <= 0) b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return b > 0 ? b : 0;
}

typedef enum copy_kind { COPY_LOOP, COPY_MEMCPY, COPY_NT } copy_kind;
static const char *const copy_names[] = {"loop", "memcpy", "nt"};

typedef struct copy_job {
    float *src, *dst;
    copy_kind kind;
} copy_job;

static void copy_init_fn(const team *t, int64_t lo, int64_t hi) {
    copy_job *j = t->arg;
    for (int64_t i = lo; i < hi; i++) {
        j->src[i] = (float)(i % 1000) * 0.001f;
        j->dst[i] = 0;
    }
}

static void copy_fn(const team *t, int64_t lo, int64_t hi) {
    copy_job *j = t->arg;
    if (j->kind == COPY_MEMCPY) memcpy(j->dst + lo, j->src + lo, (size_t)(hi - lo) * sizeof(float));
#if HAVE_NT_COPY
    else if (j->kind == COPY_NT) copy_nt(j->dst + lo, j->src + lo, hi - lo);
#endif
    else copy_loop(j->dst + lo, j->src + lo, hi - lo);
}

typedef struct copy_result {
    bool ok;
    double median_s, gbps;     /* the reference (--copy) */
    int reps;
    bool check_ok;
    char what[64];             /* "loop, 2 threads" or the GPU's name */
    copy_kind kind;            /* the reference's kind (host) */
    /* the other copies measured at the same n (host): the plain loop and
       the non-temporal one (the reference's own figures when it is one) */
    bool loop_ok, nt_ok;
    double loop_gbps, nt_gbps, nt_median_s;
} copy_result;

/* Times copies of kind k (a warm-up, one to size the reps, then the reps);
 * the median in *median_s, false when out of memory. */
static bool time_copy(const options *o, team *tm, copy_job *j, copy_kind k, double *median_s, int *reps_out) {
    j->kind = k;
    team_run(tm, copy_fn, j, o->n); /* warm-up */
    int reps = pick_reps(o, team_run(tm, copy_fn, j, o->n));
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return false;
    for (int r = 0; r < reps; r++) t[r] = team_run(tm, copy_fn, j, o->n);
    *median_s = median(t, reps);
    *reps_out = reps;
    free(t);
    return true;
}

static bool host_copy(const options *o, copy_result *r) {
    if (o->copy == COPY_NT && !HAVE_NT_COPY) {
        fprintf(stderr, PROG ": stream_copy: --copy nt: no non-temporal store on this machine\n");
        return false;
    }
    copy_job j = {malloc((size_t)o->n * sizeof(float)), malloc((size_t)o->n * sizeof(float)), COPY_LOOP};
    team tm;
    if (!j.src || !j.dst || !team_start(&tm, o->nthreads, "stream_copy")) {
        fprintf(stderr, PROG ": stream_copy: out of memory for 2 x %" PRId64 " floats\n", o->n);
        free(j.src), free(j.dst);
        return false;
    }
    double bytes = 2.0 * (double)o->n * sizeof(float);
    team_run(&tm, copy_init_fn, &j, o->n);
    r->kind = o->copy;
    bool ok = time_copy(o, &tm, &j, o->copy, &r->median_s, &r->reps);
    if (ok) {
        r->gbps = bytes / r->median_s / 1e9;
        r->check_ok = memcmp(j.src, j.dst, (size_t)o->n * sizeof(float)) == 0;
        snprintf(r->what, sizeof r->what, "%s, %d thread%s", copy_names[o->copy], tm.nthreads,
                 tm.nthreads == 1 ? "" : "s");
    }
    int reps;
    double med;
    if (ok && o->copy == COPY_LOOP) r->loop_ok = true, r->loop_gbps = r->gbps;
    else if (ok && time_copy(o, &tm, &j, COPY_LOOP, &med, &reps)) r->loop_ok = true, r->loop_gbps = bytes / med / 1e9;
    if (ok && o->copy == COPY_NT) r->nt_ok = true, r->nt_gbps = r->gbps, r->nt_median_s = r->median_s;
    else if (ok && HAVE_NT_COPY && time_copy(o, &tm, &j, COPY_NT, &med, &reps)) {
        r->nt_ok = true, r->nt_median_s = med, r->nt_gbps = bytes / med / 1e9;
        if (memcmp(j.src, j.dst, (size_t)o->n * sizeof(float)) != 0) r->check_ok = false;
    }
    team_stop(&tm);
    free(j.src), free(j.dst);
    if (!ok) fprintf(stderr, PROG ": stream_copy: out of memory\n");
    return ok;
}

/* ---- STREAM-style copy on a CUDA device -------------------------------------
 * With --backend cuda the limit is device memory: cuMemcpyDtoD of n floats,
 * timed with events. libcuda is opened at run time, as the library does, so
 * the program builds and runs without it. */

typedef int cu_result;                 /* CUresult; 0 is CUDA_SUCCESS */
typedef unsigned long long cu_devptr;  /* CUdeviceptr */

typedef struct cuda_api {
    void *lib;
    cu_result (*init)(unsigned);
    cu_result (*device_get)(int *, int);
    cu_result (*device_get_name)(char *, int, int);
    cu_result (*primary_retain)(void **, int);
    cu_result (*primary_release)(int);
    cu_result (*ctx_set_current)(void *);
    cu_result (*mem_alloc)(cu_devptr *, size_t);
    cu_result (*mem_free)(cu_devptr);
    cu_result (*memset_d32)(cu_devptr, unsigned, size_t);
    cu_result (*memcpy_dtod)(cu_devptr, cu_devptr, size_t);
    cu_result (*event_create)(void **, unsigned);
    cu_result (*event_record)(void *, void *);
    cu_result (*event_sync)(void *);
    cu_result (*event_elapsed)(float *, void *, void *);
    cu_result (*event_destroy)(void *);
} cuda_api;

/* Opens libcuda and finds every entry point; NULL, or why not. */
static const char *cuda_load(cuda_api *c) {
    static char why[256];
    memset(c, 0, sizeof *c);
    const char *env = getenv("LF_CUDA_LIBRARY"); /* as the library: a test's fake driver */
    c->lib = env && *env ? dlopen(env, RTLD_NOW | RTLD_LOCAL) : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib && !(env && *env)) c->lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : "libcuda.so.1 not found");
        return why;
    }
    struct { void **fp; const char *name; } syms[] = {
        {(void **)&c->init, "cuInit"},
        {(void **)&c->device_get, "cuDeviceGet"},
        {(void **)&c->device_get_name, "cuDeviceGetName"},
        {(void **)&c->primary_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&c->primary_release, "cuDevicePrimaryCtxRelease"},
        {(void **)&c->ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&c->mem_alloc, "cuMemAlloc_v2"},
        {(void **)&c->mem_free, "cuMemFree_v2"},
        {(void **)&c->memset_d32, "cuMemsetD32_v2"},
        {(void **)&c->memcpy_dtod, "cuMemcpyDtoD_v2"},
        {(void **)&c->event_create, "cuEventCreate"},
        {(void **)&c->event_record, "cuEventRecord"},
        {(void **)&c->event_sync, "cuEventSynchronize"},
        {(void **)&c->event_elapsed, "cuEventElapsedTime"},
        {(void **)&c->event_destroy, "cuEventDestroy_v2"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *s = dlsym(c->lib, syms[i].name);
        if (!s) {
            snprintf(why, sizeof why, "libcuda has no %s", syms[i].name);
            dlclose(c->lib);
            c->lib = NULL;
            return why;
        }
        memcpy(syms[i].fp, &s, sizeof s); /* object to function pointer, as POSIX allows */
    }
    return NULL;
}

static bool cuda_copy(const options *o, copy_result *r) {
    cuda_api c;
    const char *why = cuda_load(&c);
    if (why) {
        fprintf(stderr, PROG ": stream_copy: cannot use the CUDA driver: %s\n", why);
        return false;
    }
    int dev = 0;
    void *ctx = NULL, *e0 = NULL, *e1 = NULL;
    cu_devptr src = 0, dst = 0;
    size_t bytes = (size_t)o->n * sizeof(float);
    double *t = NULL;
    bool ok = false;
    const char *step = "cuInit";
    cu_result e = c.init(0);
    if (!e) step = "cuDeviceGet", e = c.device_get(&dev, 0);
    if (!e) step = "cuDevicePrimaryCtxRetain", e = c.primary_retain(&ctx, dev);
    if (!e) step = "cuCtxSetCurrent", e = c.ctx_set_current(ctx);
    if (!e) step = "cuMemAlloc", e = c.mem_alloc(&src, bytes);
    if (!e) e = c.mem_alloc(&dst, bytes);
    if (!e) step = "cuMemsetD32", e = c.memset_d32(src, 0x3f800000u, (size_t)o->n);
    if (!e) step = "cuEventCreate", e = c.event_create(&e0, 0);
    if (!e) e = c.event_create(&e1, 0);
    float ms = 0;
    for (int k = 0; !e && k < 3; k++) { /* two warm-ups, then one to size the reps */
        step = "cuMemcpyDtoD";
        e = c.event_record(e0, NULL);
        if (!e) e = c.memcpy_dtod(dst, src, bytes);
        if (!e) e = c.event_record(e1, NULL);
        if (!e) e = c.event_sync(e1);
        if (!e) e = c.event_elapsed(&ms, e0, e1);
    }
    int reps = pick_reps(o, ms * 1e-3);
    if (!e && !(t = malloc((size_t)reps * sizeof *t))) step = "malloc", e = -1;
    for (int k = 0; !e && k < reps; k++) {
        e = c.event_record(e0, NULL);
        if (!e) e = c.memcpy_dtod(dst, src, bytes);
        if (!e) e = c.event_record(e1, NULL);
        if (!e) e = c.event_sync(e1);
        if (!e) e = c.event_elapsed(&ms, e0, e1);
        if (!e) t[k] = ms * 1e-3;
    }
    if (!e) {
        r->reps = reps;
        r->median_s = median(t, reps);
        r->gbps = 2.0 * (double)bytes / r->median_s / 1e9;
        r->check_ok = true; /* not read back: the driver reported success */
        char name[48] = "CUDA device";
        c.device_get_name(name, (int)sizeof name, dev);
        snprintf(r->what, sizeof r->what, "%s", name);
        ok = true;
    } else
        fprintf(stderr, PROG ": stream_copy: %s failed (CUresult %d)\n", step, e);
    free(t);
    if (e0) c.event_destroy(e0);
    if (e1) c.event_destroy(e1);
    if (src) c.mem_free(src);
    if (dst) c.mem_free(dst);
    if (ctx) c.primary_release(dev);
    dlclose(c.lib);
    return ok;
}

/* ---- one case in one mode ---------------------------------------------------- */

typedef struct run_result {
    bool ok;
    int64_t n;                       /* elements reported (matmul: its side) */
    double first_s, median_s, gbps;  /* cold eval, median timed eval */
    int first_compiled, first_runs;  /* the cold eval's kernels compiled and compiler runs */
    int reps, kernels;
    size_t temp_bytes;               /* lf_eval_stats.bytes_materialized */
    size_t traffic;                  /* graph input + output bytes */
    int nout;
    lf_dtype dtype[SEED_MAX_OUTS];
    int64_t numel[SEED_MAX_OUTS];
    void *host[SEED_MAX_OUTS];       /* the outputs, read back after the timed evals */
    double out_sum;                  /* sum of output 0's elements, in double */
    int ref_state;                   /* plain C loop check (ref_diff): 1 ok, -1
                                        mismatch, 0 not made */
    double ref_diff;                 /* its largest relative difference */
    char saved[4200];                /* --save-outputs: the file written, else "" */
    struct {                         /* the c_handfused reference (fused mode), if ran */
        bool ran, check_ok;
        double median_s, lf_median_s;  /* its median, lazyfuse's in the same (interleaved) reps */
        double diff;                   /* largest relative difference from lazyfuse fused's output */
        int reps, threads;
    } hand;
} run_result;

static void run_result_free(run_result *r) {
    for (int k = 0; k < SEED_MAX_OUTS; k++) free(r->host[k]);
    memset(r, 0, sizeof *r);
}

/* ---- kernel cache folders ----------------------------------------------------
 * By default every context gets its own empty disk-cache folder under one
 * mkdtemp root, so each first eval compiles cold (no entry left by an earlier
 * run or by the other mode); the root is removed at exit. */

static char cache_root[4096]; /* "" when not in use */

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    if (remove(path) != 0) fprintf(stderr, PROG ": cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

static void cache_root_make(const options *o) {
    if (o->cache_dir || o->cache_default) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(cache_root, sizeof cache_root, "%s/lazyfuse-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache_root)) {
        fprintf(stderr, PROG ": warning: mkdtemp %s: %s; using the default kernel cache, so "
                        "first_s may not be a cold compile\n", cache_root, strerror(errno));
        cache_root[0] = '\0';
    }
}

static void cache_root_remove(void) {
    if (cache_root[0]) nftw(cache_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    cache_root[0] = '\0';
}

/* "fresh", "reused", "default" or "dir": how first_s is to be read. In a
 * sweep each case and mode keeps its folder across the sizes, so after the
 * first size the folder is "reused" (a kernel whose source does not depend
 * on n is a disk-cache hit). */
static bool first_size = true;
static const char *cache_kind(const options *o) {
    return o->cache_dir ? "dir" : cache_root[0] ? (first_size ? "fresh" : "reused") : "default";
}

/* A context on the chosen backend with fusion on or off; tag names its fresh
 * cache folder and, when the context cannot be made, the message printed. */
static lf_ctx *make_ctx(const options *o, bool fused, const char *tag) {
    char dir[4200];
    lf_ctx_options co;
    lf_ctx_options_init(&co);
    co.backend = o->backend;
    co.fusion = fused ? 1 : 0;
    co.threads = o->threads;
    co.cache_dir = o->cache_dir;
    if (cache_root[0]) {
        snprintf(dir, sizeof dir, "%s/%s-%s", cache_root, tag, fused ? "fused" : "unfused");
        co.cache_dir = dir;
    }
    lf_ctx *ctx = lf_ctx_new(&co);
    if (!ctx) fprintf(stderr, PROG ": %s %s: %s\n", tag, fused ? "fused" : "unfused", lf_errmsg(NULL));
    return ctx;
}

/* The size handed to the seed builder, and the main input's element count. */
static int64_t builder_size(const options *o, const bench_case *c, int64_t *main_numel) {
    switch (c->shape) {
    case SHAPE_ROWS: {
        int64_t cols = o->n / SOFTMAX_ROWS > 0 ? o->n / SOFTMAX_ROWS : 1;
        *main_numel = SOFTMAX_ROWS * cols;
        return cols;
    }
    case SHAPE_MATMUL: *main_numel = o->matmul_n * o->matmul_n; return o->matmul_n;
    case SHAPE_SQUARE: {
        int64_t q = o->n / 4, s = (int64_t)sqrt((double)q);
        while (s * s > q) s--;
        while ((s + 1) * (s + 1) <= q) s++;
        if (s < 1) s = 1;
        *main_numel = s * s;
        return s;
    }
    default: *main_numel = o->n; return o->n;
    }
}

/* ---- e2e_gaussian: what a C program spends around the kernel ---------------
 * gaussian_pdf on the caller's own arrays: x and y wrapped (lf_buffer_wrap),
 * each repetition evaluates into y and uses the result (sums it), with no
 * copy in or out. In the same process and the same repetitions, interleaved
 * so that they share the machine's noise: the eval alone (lazyfuse-owned
 * buffers, nothing copied or used) and the path before wrapping
 * (lf_buffer_write + eval + lf_buffer_read, then the same use). median_s is
 * the wrapped path's; a line on stderr gives the three medians and the
 * ratios (issue 14's target: wrapped within 1.15x of the eval alone). The
 * use is a checksum of every E2E_USE_STRIDE-th element, the same in both
 * paths, so the difference between them is the copies (a full pass of a
 * dependent double sum would cost several evals by itself). On a CUDA
 * context host arrays cannot be wrapped: the copy path is then the measured
 * one. */
#define E2E_USE_STRIDE 1024
static bool run_e2e_gaussian(const options *o, const bench_case *c, bool fused, run_result *r) {
    memset(r, 0, sizeof *r);
    const char *mode = fused ? "fused" : "unfused";
    lf_ctx *ctx = make_ctx(o, fused, c->name);
    if (!ctx) return false;
    int64_t n = o->n;
    r->n = n;
    bool host = lf_ctx_backend(ctx) != LF_BACKEND_CUDA;
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    float *back = malloc((size_t)(n ? n : 1) * sizeof *back);
    double *t = NULL;
    uint32_t st = 1;
    for (int64_t i = 0; x && i < n; i++) { /* uniform in [-3, 3), as the seed example */
        st = st * 1664525u + 1013904223u;
        x[i] = -3 + 6 * (float)(st >> 8) / 16777216.0f;
    }
    /* a graph per path, so that each path plans and runs its own program */
    lf_graph *g = lf_graph_new(ctx), *g2 = lf_graph_new(ctx);
    lf_buffer *xw = NULL, *yw = NULL;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n), *yb = lf_buffer_new(ctx, LF_F32, 1, &n);
    if (host && x && y) {
        xw = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, x, NULL, NULL);
        yw = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, y, NULL, NULL);
    }
    bool ok = g && g2 && back && xb && yb && (!host || (xw && yw)) && lf_buffer_write(xb, x, (size_t)n * 4) == LF_OK;
    static const char *pdf = "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)";
    lf_node *ow = host && ok ? lf_zipwith(g, lf_fn_parse(g, pdf), 3,
                                          (lf_node *[]){lf_input(g, xw), lf_const(g, LF_F32, 0), lf_const(g, LF_F32, 1)})
                             : NULL;
    lf_node *ob = ok ? lf_zipwith(g2, lf_fn_parse(g2, pdf), 3,
                                  (lf_node *[]){lf_input(g2, xb), lf_const(g2, LF_F32, 0), lf_const(g2, LF_F32, 1)})
                     : NULL;
    lf_graph *gw = host ? g : g2;
    if (!host) ow = ob, yw = yb;
    float *yout = host ? y : back;
    ok = ok && ow && ob;
    volatile double use = 0;
    /* one eval of each path (compiles), then timing one wrapped eval picks reps */
    if (ok) {
        double t0 = bench_now();
        ok = bench_eval(ctx, gw, 1, &ow, &yw) == LF_OK;
        r->first_s = bench_now() - t0;
    }
    ok = ok && bench_eval(ctx, g2, 1, &ob, &yb) == LF_OK;
    if (ok) {
        double t0 = bench_now();
        ok = bench_eval(ctx, gw, 1, &ow, &yw) == LF_OK;
        r->reps = pick_reps(o, bench_now() - t0);
        ok = ok && (t = malloc(3 * (size_t)r->reps * sizeof *t));
    }
    for (int k = 0; ok && k < r->reps; k++)
        for (int j = 0; ok && j < 3; j++) { /* the three paths, first in turn (thread wake-ups) */
            int path = (j + k) % 3;
            double t0 = bench_now(), acc = 0;
            if (path == 0) { /* wrapped: eval into y, use y */
                ok = bench_eval(ctx, gw, 1, &ow, &yw) == LF_OK && (host || lf_buffer_read(yw, back, (size_t)n * 4) == LF_OK);
                for (int64_t i = 0; i < n; i += E2E_USE_STRIDE) acc += yout[i];
            } else if (path == 1) { /* the eval alone */
                ok = bench_eval(ctx, g2, 1, &ob, &yb) == LF_OK;
            } else { /* copies: write x, eval, read y, use it */
                ok = lf_buffer_write(xb, x, (size_t)n * 4) == LF_OK && bench_eval(ctx, g2, 1, &ob, &yb) == LF_OK &&
                     lf_buffer_read(yb, back, (size_t)n * 4) == LF_OK;
                for (int64_t i = 0; i < n; i += E2E_USE_STRIDE) acc += back[i];
            }
            use = acc;
            t[path * r->reps + k] = bench_now() - t0;
        }
    (void)use;
    if (ok) {
        double wrapped = median(t, r->reps), alone = median(t + r->reps, r->reps);
        double copied = median(t + 2 * r->reps, r->reps);
        r->median_s = wrapped;
        fprintf(stderr,
                PROG ": e2e_gaussian %s n=%" PRId64 ": %s+eval+use %.6f s, eval alone %.6f s (%.3fx), "
                     "write+eval+read+use %.6f s (%.3fx of eval alone), %d reps\n",
                mode, n, host ? "wrap" : "(no wrap on cuda) read", wrapped, alone, wrapped / alone, copied,
                copied / alone, r->reps);
        lf_eval_stats es;
        lf_ctx_last_stats(ctx, &es);
        r->kernels = es.kernels;
        r->temp_bytes = es.bytes_materialized;
        r->traffic = 2 * (size_t)n * sizeof(float);
        r->gbps = (double)r->traffic / r->median_s / 1e9;
        r->nout = 1;
        r->dtype[0] = LF_F32;
        r->numel[0] = n;
        r->host[0] = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (r->host[0]) memcpy(r->host[0], yout, (size_t)n * sizeof(float));
        r->out_sum = 0;
        for (int64_t i = 0; i < n; i++) r->out_sum += yout[i];
        r->ok = true;
    } else {
        fprintf(stderr, PROG ": %s %s: %s\n", c->name, mode, lf_errmsg(ctx));
    }
    free(t);
    lf_ctx_destroy(ctx); /* before the arrays the wrapped buffers point into */
    free(x);
    free(y);
    free(back);
    return ok;
}

/* ---- inplace_axpy: an output written into its own input ----------------------
 * x = x*0.5 + 1 evaluated into x's buffer (in place: lf_eval_stats says 1
 * output in place, 0 bytes staged) and, interleaved in the same repetitions,
 * the same graph evaluated into another buffer y (out of place). median_s is
 * the in-place eval's; a line on stderr gives both medians and their ratio
 * (issue 14's target: in place within 1.1x of out of place). x converges to
 * 2 over the repetitions (no overflow, no subnormals); the output checked is
 * one in-place eval of the initial x. */
static bool run_inplace_axpy(const options *o, const bench_case *c, bool fused, run_result *r) {
    memset(r, 0, sizeof *r);
    const char *mode = fused ? "fused" : "unfused";
    lf_ctx *ctx = make_ctx(o, fused, c->name);
    if (!ctx) return false;
    int64_t n = o->n;
    r->n = n;
    float *x0 = malloc((size_t)(n ? n : 1) * sizeof *x0);
    for (int64_t i = 0; x0 && i < n; i++) x0[i] = (float)(i % 1000) * 0.01f - 5;
    lf_graph *g = lf_graph_new(ctx);
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n), *yb = lf_buffer_new(ctx, LF_F32, 1, &n);
    bool ok = x0 && g && xb && yb && lf_buffer_write(xb, x0, (size_t)n * 4) == LF_OK;
    lf_node *y = ok ? lf_add(g, lf_mul(g, lf_input(g, xb), lf_const(g, LF_F32, 0.5)), lf_const(g, LF_F32, 1)) : NULL;
    ok = ok && y;
    double *t = NULL;
    lf_eval_stats es;
    memset(&es, 0, sizeof es);
    if (ok) { /* both programs (into x, into y) are planned and compiled here */
        double t0 = bench_now();
        ok = bench_eval(ctx, g, 1, &y, &xb) == LF_OK && lf_ctx_last_stats(ctx, &es) == LF_OK;
        r->first_s = bench_now() - t0;
        ok = ok && bench_eval(ctx, g, 1, &y, &yb) == LF_OK;
        t0 = bench_now();
        ok = ok && bench_eval(ctx, g, 1, &y, &xb) == LF_OK;
        r->reps = pick_reps(o, bench_now() - t0);
        ok = ok && (t = malloc(2 * (size_t)r->reps * sizeof *t));
    }
    for (int k = 0; ok && k < r->reps; k++)
        for (int j = 0; ok && j < 2; j++) { /* each path first in turn */
            int path = (j + k) % 2;
            double t0 = bench_now();
            ok = bench_eval(ctx, g, 1, &y, path ? &yb : &xb) == LF_OK;
            t[path * r->reps + k] = bench_now() - t0;
        }
    r->host[0] = ok ? malloc((size_t)(n ? n : 1) * sizeof(float)) : NULL;
    ok = ok && r->host[0] && lf_buffer_write(xb, x0, (size_t)n * 4) == LF_OK && bench_eval(ctx, g, 1, &y, &xb) == LF_OK &&
         lf_buffer_read(xb, r->host[0], (size_t)n * 4) == LF_OK;
    if (ok) {
        double inplace = median(t, r->reps), outofplace = median(t + r->reps, r->reps);
        r->median_s = inplace;
        fprintf(stderr,
                PROG ": inplace_axpy %s n=%" PRId64 ": into x %.6f s (%d in place, %zu bytes staged), into y "
                     "%.6f s; in place / out of place %.3fx, %d reps\n",
                mode, n, inplace, es.outputs_in_place, es.bytes_staged, outofplace, inplace / outofplace, r->reps);
        r->kernels = es.kernels;
        r->temp_bytes = es.bytes_materialized;
        r->traffic = 2 * (size_t)n * sizeof(float);
        r->gbps = (double)r->traffic / r->median_s / 1e9;
        r->nout = 1;
        r->dtype[0] = LF_F32;
        r->numel[0] = n;
        r->out_sum = 0;
        const float *h = r->host[0];
        for (int64_t i = 0; i < n; i++) r->out_sum += h[i];
        r->ok = true;
    } else {
        fprintf(stderr, PROG ": %s %s: %s\n", c->name, mode, lf_errmsg(ctx));
    }
    free(t);
    free(x0);
    lf_ctx_destroy(ctx);
    return ok;
}

/* ---- c_handfused: the hand-written references (handfused.c) -----------------
 * For gaussian_pdf, polar_distance, hypot, softmax_rows, layer_norm,
 * stencil5x5 and conv1d_31, in the fused mode on the CPU backend: handfused.c's one-pass C loop on the
 * same inputs, split over --threads threads as stream_copy is (a team made
 * once, static chunks of the elements or rows), timed in the same
 * repetitions as lazyfuse's eval, interleaved (each first in turn, after an
 * untimed 2 ms sleep, so that neither finds the other's threads spinning),
 * so both medians share the machine's noise. Its output is checked against
 * lazyfuse's fused output at the peers' tolerance (HANDFUSED_TOL). Reported
 * as mode "c_handfused" (table row and JSON line) with lazyfuse_speedup =
 * its median over lazyfuse fused's (above 1: lazyfuse is faster). */
#define HANDFUSED_TOL 1e-3 /* as benches/peers/common.py's PEER_TOL: another math library's rounding */
#define HANDFUSED_GAP_NS 2000000 /* untimed sleep before each timed run of either (2 ms) */

typedef struct hf_input {
    uint32_t seed;     /* seed_fill_f32's */
    float lo, hi;
    bool row_vector;   /* one value per column (gamma, beta), not the main input's shape */
} hf_input;

/* The inputs of tools/seed_examples.c's builders, in their order; a drift
 * shows as a MISMATCH of the c_handfused check. */
static const struct {
    const char *name;
    hf_input in[4];
} hf_inputs[] = {
    {"gaussian_pdf", {{1, -3, 3, false}}},
    {"polar_distance", {{2, 0.5f, 1.5f, false}, {3, -3.14159f, 3.14159f, false}, {4, 0.5f, 1.5f, false},
                        {5, -3.14159f, 3.14159f, false}}},
    {"hypot", {{6, -10, 10, false}, {7, -10, 10, false}}},
    {"softmax_rows", {{9, -4, 4, false}}},
    {"layer_norm", {{SEED_LAYER_NORM_X, SEED_LAYER_NORM_X_LO, SEED_LAYER_NORM_X_HI, false},
                    {SEED_LAYER_NORM_GAMMA, 0.5f, 1.5f, true}, {SEED_LAYER_NORM_BETA, -1, 1, true}}},
    {"conv1d_31", {{SEED_CONV1D_X, -1, 1, false}}},
    {"stencil5x5", {{SEED_STENCIL5X5_X, -1, 1, false}}},
};

#ifdef LF_BENCH_HANDFUSED
static void hf_team_fn(const team *t, int64_t lo, int64_t hi) {
    const hf_case *hc = ((const void *const *)t->arg)[0];
    const hf_args *a = ((const void *const *)t->arg)[1];
    hc->run(a, lo, hi);
}
#endif

/* Runs case c's reference beside lazyfuse's eval of (g, outs, dst), after
 * run_case's timed evals (r holds their results, host[0] the output);
 * fills r->hand. cols: the row length (row cases); numel: the main input's
 * element count (the stencils': the output's). Nothing when the case has no
 * reference. */
static void run_handfused(const options *o, const bench_case *c, lf_ctx *ctx, lf_graph *g, int nout, lf_node *const *outs,
                          lf_buffer *const *dst, int64_t numel, int64_t cols, run_result *r) {
    int k = -1;
    for (size_t i = 0; i < sizeof hf_inputs / sizeof hf_inputs[0]; i++)
        if (!strcmp(hf_inputs[i].name, c->name)) k = (int)i;
    if (k < 0 || o->backend != LF_BACKEND_CPU) return;
#ifndef LF_BENCH_HANDFUSED
    (void)g, (void)nout, (void)outs, (void)dst, (void)numel, (void)cols, (void)r;
    static bool said;
    if (!said) fprintf(stderr, PROG ": c_handfused: not built (benches/meson.build found no libmvec or the "
                               "compiler lacks -march=native / -fopenmp-simd)\n");
    said = true;
#else
    const hf_case *hc = hf_find(c->name);
    if (!hc || !r->host[0] || r->dtype[0] != LF_F32) return;
    /* stencils: the input is the output (numel elements) and its halo */
    int64_t out_numel = numel, in_numel = numel;
    if (hc->halo_dims == 1) in_numel = numel + hc->halo;
    if (hc->halo_dims == 2) {
        int64_t side = (int64_t)llround(sqrt((double)numel));
        in_numel = (side + hc->halo) * (side + hc->halo);
        cols = side;
    }
    if (out_numel != r->numel[0]) {
        fprintf(stderr, PROG ": %s: c_handfused: the reference's output has %" PRId64 " elements, lazyfuse's %" PRId64
                        "\n", c->name, out_numel, r->numel[0]);
        return;
    }
    hf_args a = {.cols = cols};
    float *in[4] = {NULL};
    bool ok = (a.out = malloc((size_t)(out_numel ? out_numel : 1) * sizeof(float))) != NULL;
    for (int i = 0; ok && i < hc->ninputs; i++) {
        const hf_input *s = &hf_inputs[k].in[i];
        int64_t len = s->row_vector ? cols : in_numel;
        ok = (in[i] = malloc((size_t)(len ? len : 1) * sizeof(float))) != NULL;
        if (ok) seed_fill_f32(in[i], len, s->lo, s->hi, s->seed);
        a.in[i] = in[i];
    }
    team tm;
    double *t = ok ? malloc(2 * (size_t)r->reps * sizeof *t) : NULL;
    ok = t && team_start(&tm, o->nthreads, "c_handfused");
    if (ok) {
        const void *job[2] = {hc, &a};
        int64_t range = hc->rows ? out_numel / (cols ? cols : 1) : out_numel;
        /* first touch of the output by the team, and a warm-up */
        team_run(&tm, hf_team_fn, (void *)job, range);
        for (int rep = 0; ok && rep < r->reps; rep++)
            for (int j = 0; ok && j < 2; j++) { /* each first in turn */
                int path = (j + rep) % 2;
                /* an idle gap first: lazyfuse's pool workers spin for a while
                   after a run (backends/cpu/pool.c), which on a small machine
                   would take a core from the team timed next; after the gap
                   both start with their threads asleep */
                nanosleep(&(struct timespec){0, HANDFUSED_GAP_NS}, NULL);
                if (path) {
                    t[r->reps + rep] = team_run(&tm, hf_team_fn, (void *)job, range);
                } else {
                    double t0 = bench_now();
                    ok = bench_eval(ctx, g, nout, outs, dst) == LF_OK;
                    t[rep] = bench_now() - t0;
                }
            }
        team_stop(&tm);
    }
    if (ok) {
        r->hand.ran = true;
        r->hand.lf_median_s = median(t, r->reps);
        r->hand.median_s = median(t + r->reps, r->reps);
        r->hand.reps = r->reps;
        r->hand.threads = o->nthreads;
        r->hand.diff = max_rel_diff(a.out, r->host[0], LF_F32, out_numel);
        r->hand.check_ok = r->hand.diff <= HANDFUSED_TOL;
        if (!r->hand.check_ok)
            fprintf(stderr, PROG ": warning: %s: c_handfused differs from lazyfuse fused by %.3g (relative) > %g\n",
                    c->name, r->hand.diff, HANDFUSED_TOL);
    } else
        fprintf(stderr, PROG ": %s: c_handfused: out of memory or eval failed: %s\n", c->name,
                lf_errmsg(NULL));
    free(t);
    for (int i = 0; i < 4; i++) free(in[i]);
    free(a.out);
#endif
}

static bool run_case(const options *o, const bench_case *c, bool fused, run_result *r) {
    if (!strcmp(c->name, "e2e_gaussian")) return run_e2e_gaussian(o, c, fused, r);
    memset(r, 0, sizeof *r);
    const seed_example *ex = seed_find(c->seed);
    const char *mode = fused ? "fused" : "unfused";
    if (!ex) {
        fprintf(stderr, PROG ": %s: no seed example '%s'\n", c->name, c->seed);
        return false;
    }
    lf_ctx *ctx = make_ctx(o, fused, c->name);
    if (!ctx) return false;
    int64_t main_numel;
    int64_t size = builder_size(o, c, &main_numel);
    r->n = c->shape == SHAPE_MATMUL ? o->matmul_n : main_numel;
    lf_graph *g = lf_graph_new(ctx);
    lf_node *outs[SEED_MAX_OUTS];
    lf_buffer *dst[SEED_MAX_OUTS] = {NULL};
    double *t = NULL;
    const char *step = "build";
    int nout = g ? ex->build(ctx, g, size, outs) : 0;
    bool ok = nout > 0;
    for (int k = 0; ok && k < nout; k++) ok = (dst[k] = lf_buffer_new_like(ctx, outs[k])) != NULL;
    if (ok) {
        step = "eval";
        double t0 = bench_now();
        ok = bench_eval(ctx, g, nout, outs, dst) == LF_OK;
        r->first_s = bench_now() - t0;
        lf_eval_stats st;
        if (ok && lf_ctx_last_stats(ctx, &st) == LF_OK) {
            r->first_compiled = st.kernels_compiled;
            r->first_runs = st.compiler_runs;
        }
    }
    if (ok) {
        double t0 = bench_now(), one;
        ok = bench_eval(ctx, g, nout, outs, dst) == LF_OK;
        one = bench_now() - t0;
        r->reps = pick_reps(o, one);
        /* a contraction at a large side can take seconds an eval (side 1024):
           3 timed reps, still a median, unless --reps says otherwise */
        if (c->shape == SHAPE_MATMUL && !o->reps && one > SLOW_EVAL_S) r->reps = SLOW_EVAL_REPS;
    }
    if (ok && !(t = malloc((size_t)r->reps * sizeof *t))) {
        fprintf(stderr, PROG ": %s %s: out of memory\n", c->name, mode);
        lf_ctx_destroy(ctx);
        return false;
    }
    for (int k = 0; ok && k < r->reps; k++) {
        double t0 = bench_now();
        ok = bench_eval(ctx, g, nout, outs, dst) == LF_OK;
        t[k] = bench_now() - t0;
    }
    if (!ok) {
        fprintf(stderr, PROG ": %s %s: %s failed: %s\n", c->name, mode, step, lf_errmsg(ctx));
        free(t);
        lf_ctx_destroy(ctx);
        return false;
    }
    r->median_s = median(t, r->reps);
    free(t);
    lf_eval_stats st;
    lf_ctx_last_stats(ctx, &st);
    r->kernels = st.kernels;
    /* temp_bytes: bytes_materialized, "bytes of the intermediates this
     * schedule stores": what is written to memory beyond inputs and outputs
     * (temp_bytes_avoided is the opposite, what fusion did not store). */
    r->temp_bytes = st.bytes_materialized;
    r->traffic = (size_t)(c->in_numel ? c->in_numel(size) : c->ninputs * main_numel) * sizeof(float);
    r->nout = nout;
    for (int k = 0; k < nout; k++) {
        size_t bytes = lf_buffer_bytes(dst[k]);
        r->traffic += bytes;
        r->dtype[k] = lf_buffer_dtype(dst[k]);
        r->numel[k] = lf_buffer_numel(dst[k]);
        r->host[k] = malloc(bytes ? bytes : 1);
        if (r->host[k] && lf_buffer_read(dst[k], r->host[k], bytes) != LF_OK) {
            free(r->host[k]);
            r->host[k] = NULL;
        }
    }
    if (c->ref_diff && r->host[0] && r->dtype[0] == LF_F32) {
        r->ref_diff = c->ref_diff(size, r->host[0], r->numel[0]);
        r->ref_state = r->ref_diff <= c->tol ? 1 : -1;
        if (r->ref_state < 0)
            fprintf(stderr, PROG ": %s %s: differs from the plain C loop by %g (relative)\n", c->name, mode,
                    r->ref_diff);
    }
    r->out_sum = NAN;
    if (r->host[0]) {
        r->out_sum = 0;
        for (int64_t i = 0; i < r->numel[0]; i++) r->out_sum += elem(r->host[0], r->dtype[0], i);
    }
    /* a fused schedule that stores no intermediate reads each input once and
     * writes each output once: its statistics must agree with the traffic
     * counted here (else cases[].ninputs has drifted from the seed builder) */
    if (fused && st.bytes_materialized == 0 && st.bytes_read + st.bytes_written != r->traffic)
        fprintf(stderr, PROG ": warning: %s: counted %zu bytes of inputs and outputs, the schedule "
                        "moves %zu\n", c->name, r->traffic, st.bytes_read + st.bytes_written);
    r->gbps = (double)r->traffic / r->median_s / 1e9;
    r->ok = true;
    if (fused) run_handfused(o, c, ctx, g, nout, outs, dst, main_numel, c->shape == SHAPE_ROWS ? size : 0, r);
    lf_ctx_destroy(ctx);
    return true;
}

/* "ok", "MISMATCH" or "n/a" (one mode only, or outputs not read back). */
static const char *compare(const bench_case *c, const run_result *f, const run_result *u, double *diff) {
    *diff = NAN;
    if (f->ref_state < 0 || u->ref_state < 0) return "MISMATCH"; /* vs the plain C loop */
    if (!f->ok || !u->ok || f->nout != u->nout) return "n/a";
    double worst = 0;
    for (int k = 0; k < f->nout; k++) {
        if (!f->host[k] || !u->host[k] || f->numel[k] != u->numel[k] || f->dtype[k] != u->dtype[k])
            return "n/a";
        double d = max_rel_diff(f->host[k], u->host[k], f->dtype[k], f->numel[k]);
        if (!(d <= worst)) worst = d;
    }
    *diff = worst;
    return worst <= c->tol ? "ok" : "MISMATCH";
}

/* ---- stencils: the plain C loops their outputs are checked against ---------- */

static int64_t stencil9_in(int64_t s) { return s + 8; }
static int64_t conv3x3_in(int64_t s) { return (s + 2) * (s + 2); }
/* issue 16's cases: x [4096, s] and gamma, beta [s]; A, B [s, s] and a
 * vector of s; SEED_BATCH pairs of [m, m]; A [s, s] and x [s] */
static int64_t layer_norm_in(int64_t s) { return SOFTMAX_ROWS * s + 2 * s; }
static int64_t matmul_vec_in(int64_t s) { return 2 * s * s + s; }
static int64_t batched_in(int64_t s) {
    int64_t m = seed_batched_side(s);
    return 2 * SEED_BATCH * m * m;
}
static int64_t matvec_in(int64_t s) { return s * s + s; }
/* issue 30: the padded image; the padded signal; the index (the table's rows
 * are read from cache, but each output element is one f32 read) */
static int64_t stencil5x5_in(int64_t s) { return (s + 4) * (s + 4); }
static int64_t conv1d_in(int64_t s) { return s + 30; }
static int64_t embedding_in(int64_t s) { return s + s / SEED_EMBED_DIM; }

/* Unfused, a contraction stores its broadcast product (I x J x K floats, 4
 * GiB at side 1024): above this the unfused mode is left out, with a
 * message (benches/peers/numpy_peer.py has the same limit). */
#define UNFUSED_PRODUCT_MAX 1073741824.0

/* The bytes of the broadcast product of a contraction case at side s
 * (matvec: none beyond A's size). */
static double unfused_product_bytes(const bench_case *c, int64_t s) {
    double m = (double)s;
    if (!strcmp(c->name, "matvec")) return 4 * m * m;
    if (!strcmp(c->name, "batched_matmul")) {
        double b = (double)seed_batched_side(s);
        return 4.0 * SEED_BATCH * b * b * b;
    }
    return 4 * m * m * m;
}

/* The multiply-adds of a contraction case at side s, times 2 (GFLOP/s). */
static double case_flops(const bench_case *c, int64_t s) {
    double m = (double)s;
    if (!strcmp(c->name, "matvec")) return 2 * m * m;
    if (!strcmp(c->name, "batched_matmul")) {
        double b = (double)seed_batched_side(s);
        return 2.0 * SEED_BATCH * b * b * b;
    }
    return 2 * m * m * m;
}

static double rel_diff(float got, float want) {
    if (isnan(got) && isnan(want)) return 0;
    double d = fabs((double)got - (double)want) / (fabs((double)want) + 1e-30);
    return isnan(d) ? INFINITY : d;
}

/* y[i] = (x[i] + ... + x[i+8]) / 9, summed left to right in f32 as the graph is. */
static double stencil9_ref(int64_t s, const float *out, int64_t numel) {
    float *x = malloc((size_t)(s + 8) * sizeof *x);
    if (!x || numel != s) {
        free(x);
        return NAN;
    }
    seed_fill_f32(x, s + 8, -1, 1, SEED_STENCIL9_X);
    double worst = 0;
    for (int64_t i = 0; i < s; i++) {
        float acc = x[i];
        for (int k = 1; k < 9; k++) acc += x[i + k];
        double d = rel_diff(out[i], acc / 9.0f);
        if (d > worst) worst = d;
    }
    free(x);
    return worst;
}

/* y[i,j] = sum over the taps t = (dy, dx) of x[i+dy, j+dx] * w[t], in tap order in f32. */
static double conv3x3_ref(int64_t s, const float *out, int64_t numel) {
    int64_t p = s + 2;
    float *x = malloc((size_t)(p * p) * sizeof *x);
    if (!x || numel != s * s) {
        free(x);
        return NAN;
    }
    seed_fill_f32(x, p * p, -1, 1, SEED_CONV3X3_X);
    double worst = 0;
    for (int64_t i = 0; i < s; i++)
        for (int64_t j = 0; j < s; j++) {
            float acc = 0;
            for (int t = 0; t < 9; t++) {
                float v = x[(i + t / 3) * p + j + t % 3] * seed_conv3x3_w[t];
                acc = t ? acc + v : v;
            }
            double d = rel_diff(out[i * s + j], acc);
            if (d > worst) worst = d;
        }
    free(x);
    return worst;
}

/* ---- overhead: a built triad re-evaluated, and rebuilt each time ------------ */

typedef struct overhead_result {
    bool ok;
    double median_s[3];   /* cached_reeval, rebuild_reeval (each until the device is
                             done), cached_host (lf_eval alone: the host's time to
                             queue a cached program; the wait comes after the clock) */
    int kernels[3];
    size_t temp_bytes[3];
    bool check_ok;
} overhead_result;

static lf_node *triad_of(lf_graph *g, lf_buffer *const *in) {
    return lf_add(g, lf_mul(g, lf_input(g, in[0]), lf_input(g, in[1])), lf_input(g, in[2]));
}

static bool run_overhead(const options *o, overhead_result *r) {
    memset(r, 0, sizeof *r);
    lf_ctx *ctx = make_ctx(o, true, "overhead");
    if (!ctx) return false;
    int64_t n = OVERHEAD_N;
    float host[3][OVERHEAD_N], out[OVERHEAD_N];
    lf_buffer *in[3] = {NULL}, *dst = lf_buffer_new(ctx, LF_F32, 1, &n);
    bool ok = dst != NULL;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < OVERHEAD_N; i++) host[k][i] = (float)((i * (k + 3)) % 17) * 0.125f - 1.0f;
        in[k] = lf_buffer_new(ctx, LF_F32, 1, &n);
        ok = ok && in[k] && lf_buffer_write(in[k], host[k], sizeof host[k]) == LF_OK;
    }
    static double t[OVERHEAD_ITERS];
    lf_eval_stats st;
    /* cached: one graph, evaluated once to warm up, then OVERHEAD_ITERS times */
    lf_graph *g = ok ? lf_graph_new(ctx) : NULL;
    lf_node *y = g ? triad_of(g, in) : NULL;
    ok = y && bench_eval(ctx, g, 1, &y, &dst) == LF_OK;
    for (int k = 0; ok && k < OVERHEAD_ITERS; k++) {
        double t0 = bench_now();
        ok = bench_eval(ctx, g, 1, &y, &dst) == LF_OK;
        t[k] = bench_now() - t0;
    }
    if (ok) {
        r->median_s[0] = median(t, OVERHEAD_ITERS);
        lf_ctx_last_stats(ctx, &st);
        r->kernels[0] = st.kernels;
        r->temp_bytes[0] = st.bytes_materialized;
    }
    /* cached, host time: the clock stops when lf_eval returns (on CUDA: the
       launches are queued), the wait for the device follows untimed */
    for (int k = 0; ok && k < OVERHEAD_ITERS; k++) {
        double t0 = bench_now();
        ok = lf_eval(g, 1, &y, &dst) == LF_OK;
        t[k] = bench_now() - t0;
        ok = ok && lf_ctx_synchronize(ctx) == LF_OK;
    }
    if (ok) {
        r->median_s[2] = median(t, OVERHEAD_ITERS);
        r->kernels[2] = r->kernels[0];
        r->temp_bytes[2] = r->temp_bytes[0];
    }
    lf_graph_free(g);
    /* rebuilt: a new graph of the same structure per iteration (one warm-up) */
    for (int k = -1; ok && k < OVERHEAD_ITERS; k++) {
        double t0 = bench_now();
        g = lf_graph_new(ctx);
        y = g ? triad_of(g, in) : NULL;
        ok = y && bench_eval(ctx, g, 1, &y, &dst) == LF_OK;
        lf_graph_free(g);
        if (k >= 0) t[k] = bench_now() - t0;
    }
    if (ok) {
        r->median_s[1] = median(t, OVERHEAD_ITERS);
        lf_ctx_last_stats(ctx, &st);
        r->kernels[1] = st.kernels;
        r->temp_bytes[1] = st.bytes_materialized;
        ok = lf_buffer_read(dst, out, sizeof out) == LF_OK;
    }
    if (ok) {
        r->check_ok = true;
        for (int i = 0; i < OVERHEAD_N; i++) {
            float want = host[0][i] * host[1][i] + host[2][i];
            if (!(fabsf(out[i] - want) <= 1e-5f * (1 + fabsf(want)))) r->check_ok = false;
        }
    } else
        fprintf(stderr, PROG ": overhead: %s\n", lf_errmsg(ctx));
    r->ok = ok;
    lf_ctx_destroy(ctx);
    return ok;
}

/* ---- const_sweep: a new constant each eval, no compile ----------------------- */

#define CONST_SWEEP_EVALS 100

/* gaussian_pdf((x - m) / s) over x with m and s lf_const nodes; *m_out is m. */
static lf_node *const_sweep_graph(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **m_out) {
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    bool ok = xb && h;
    for (int64_t i = 0; ok && i < n; i++) h[i] = (float)((i * 7919) % 2000) * 0.004f - 4.0f;
    if (ok && n) ok = lf_buffer_write(xb, h, (size_t)n * sizeof *h) == LF_OK;
    free(h);
    lf_node *x = ok ? lf_input(g, xb) : NULL;
    lf_buffer_free(xb); /* the graph keeps it */
    lf_fn *f = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    *m_out = lf_const(g, LF_F32, 0.0);
    lf_node *y = lf_zipwith(g, f, 3, (lf_node *[]){x, *m_out, lf_const(g, LF_F32, 1.25)});
    return x ? y : NULL;
}

/* CONST_SWEEP_EVALS evals of one graph at n, each after lf_scalar_set of the
 * mean: the median time of (scalar_set + eval) in *median_s; *compiled sums
 * kernels_compiled over them, *reused counts program_reused. */
static bool const_sweep_evals(lf_ctx *ctx, lf_graph *g, lf_node *m, lf_node *y, lf_buffer *dst,
                              double *median_s, int *compiled, int *reused) {
    double t[CONST_SWEEP_EVALS];
    *compiled = *reused = 0;
    for (int k = 0; k < CONST_SWEEP_EVALS; k++) {
        double t0 = bench_now();
        bool ok = lf_scalar_set(g, m, 0.01 * (k + 1)) == LF_OK && bench_eval(ctx, g, 1, &y, &dst) == LF_OK;
        t[k] = bench_now() - t0;
        if (!ok) return false;
        lf_eval_stats st;
        lf_ctx_last_stats(ctx, &st);
        *compiled += st.kernels_compiled;
        *reused += st.program_reused;
    }
    *median_s = median(t, CONST_SWEEP_EVALS);
    return true;
}

static bool run_const_sweep(const options *o, const bench_case *c, bool fused, run_result *r) {
    memset(r, 0, sizeof *r);
    const char *mode = fused ? "fused" : "unfused";
    lf_ctx *ctx = make_ctx(o, fused, c->name);
    if (!ctx) return false;
    r->n = o->n;
    lf_graph *g = lf_graph_new(ctx), *g1 = lf_graph_new(ctx);
    lf_node *m = NULL, *m1 = NULL;
    lf_node *y = g ? const_sweep_graph(ctx, g, o->n, &m) : NULL;
    lf_node *y1 = g1 ? const_sweep_graph(ctx, g1, 1, &m1) : NULL; /* n = 1: host time alone */
    lf_buffer *dst = y ? lf_buffer_new_like(ctx, y) : NULL, *dst1 = y1 ? lf_buffer_new_like(ctx, y1) : NULL;
    bool ok = dst && dst1;
    if (ok) { /* the first eval compiles (or finds the kernels on disk) */
        double t0 = bench_now();
        ok = bench_eval(ctx, g, 1, &y, &dst) == LF_OK;
        r->first_s = bench_now() - t0;
    }
    int compiled = 0, reused = 0, compiled1 = 0, reused1 = 0;
    double host_s = NAN;
    ok = ok && const_sweep_evals(ctx, g, m, y, dst, &r->median_s, &compiled, &reused);
    ok = ok && bench_eval(ctx, g1, 1, &y1, &dst1) == LF_OK &&
         const_sweep_evals(ctx, g1, m1, y1, dst1, &host_s, &compiled1, &reused1);
    if (!ok) {
        fprintf(stderr, PROG ": %s %s: %s\n", c->name, mode, lf_errmsg(ctx));
        lf_ctx_destroy(ctx);
        return false;
    }
    r->reps = CONST_SWEEP_EVALS;
    lf_eval_stats st;
    lf_ctx_last_stats(ctx, &st);
    r->kernels = st.kernels;
    r->temp_bytes = st.bytes_materialized;
    r->traffic = 2 * (size_t)o->n * sizeof(float);
    r->nout = 1;
    r->dtype[0] = LF_F32;
    r->numel[0] = o->n;
    size_t bytes = lf_buffer_bytes(dst);
    r->host[0] = malloc(bytes ? bytes : 1);
    if (r->host[0] && lf_buffer_read(dst, r->host[0], bytes) != LF_OK) {
        free(r->host[0]);
        r->host[0] = NULL;
    }
    r->out_sum = NAN;
    if (r->host[0]) {
        r->out_sum = 0;
        for (int64_t i = 0; i < o->n; i++) r->out_sum += ((const float *)r->host[0])[i];
    }
    r->gbps = (double)r->traffic / r->median_s / 1e9;
    r->ok = true;
    bool good = compiled + compiled1 == 0 && reused == CONST_SWEEP_EVALS && reused1 == CONST_SWEEP_EVALS;
    FILE *info = o->json ? stderr : stdout;
    fprintf(info, "const_sweep %s: %d evals each with a new lf_const value: kernels compiled after the "
                  "first eval %d, program reused %d/%d; host time per eval at n = 1 (scalar_set + eval, "
                  "median): %.2f us%s\n", mode, CONST_SWEEP_EVALS, compiled + compiled1, reused + reused1,
            2 * CONST_SWEEP_EVALS, host_s * 1e6, good ? "" : "  <- EXPECTED NO COMPILE AND REUSE");
    if (o->json) {
        printf("{\"case\":\"const_sweep\",\"backend\":\"%s\",\"mode\":\"%s_host\",\"n\":1",
               o->backend == LF_BACKEND_CUDA ? "cuda" : "cpu", mode);
        json_num("median_us", host_s * 1e6, "%.3f");
        printf(",\"reps\":%d,\"kernels_compiled\":%d,\"program_reused\":%d,\"check\":\"%s\"}\n",
               CONST_SWEEP_EVALS, compiled + compiled1, reused + reused1, good ? "ok" : "MISMATCH");
    }
    lf_ctx_destroy(ctx);
    return good;
}

/* ---- sorts and spca (issue 15): graphs built here ------------------------------
 * sort_f32: lf_sort of n f32 keys (ascending). argsort_rows: lf_argsort
 * along the rows of [4096, n/4096] f32 (i64 out). topk_rows: lf_topk (k = 10,
 * largest) along the rows of [--samples, 1000] f32: values and indices; its
 * GB/s counts the input bytes only (the issue's measure against
 * stream_copy). The keys are seed_fill_f32 values in [-1, 1) (24 bits, so
 * 2^24 keys hold many ties: stable order matters), which
 * benches/peers/common.py regenerates. Outputs are compared exactly between
 * the modes. spca: tools/spca_graph.c's graph (the seed's sparse PCA,
 * p = 1000, d = 3, k = 10, --samples samples, lf_random seed SPCA_SEED) into
 * opt_x, best and val[best]; then the samples alone (output 1, saved for the
 * peers, which run on the same numbers), and the hand-written C program
 * (tools/spca_ref.c) on them with 2 threads, timed in the same repetitions
 * as lazyfuse's eval, interleaved: a line on stderr (and with --json a line
 * of mode "c_2threads") gives both medians, the ratio, and the schedule's
 * temporaries against the size of one S x p array (the issue asks for none
 * of that size). lazyfuse's opt_x and best are checked against the C
 * program's. */

/* The key distributions of the one-row sort cases (issue 30), each made from
 * seed_fill_f32 values so that benches/peers/common.py (sort_keys) rebuilds
 * them bit for bit: uniform in [-1, 1) (24-bit values, so ties at 2^24);
 * normal-like, the sum of 4 uniform streams (seeds s..s+3; exact in double,
 * one rounding to f32: a bell of sd 1.15 on [-4, 4)); sorted and reversed,
 * the ramp 2i/n - 1 in double rounded to f32, up and down; few, 16 distinct
 * values floor(8u)/8. */
typedef enum { KEYS_UNIFORM, KEYS_NORMAL, KEYS_SORTED, KEYS_REVERSED, KEYS_FEW } sort_keys;

static bool sort_keys_fill(float *h, int64_t n, sort_keys dist, uint32_t seed) {
    if (dist == KEYS_SORTED || dist == KEYS_REVERSED) {
        for (int64_t i = 0; i < n; i++)
            h[i] = (float)((double)(dist == KEYS_SORTED ? i : n - 1 - i) / (double)n * 2.0 - 1.0);
        return true;
    }
    seed_fill_f32(h, n, -1, 1, seed);
    if (dist == KEYS_FEW)
        for (int64_t i = 0; i < n; i++) h[i] = floorf(h[i] * 8.0f) / 8.0f;
    if (dist != KEYS_NORMAL) return true;
    float *u = malloc((size_t)(n ? n : 1) * sizeof *u);
    double *sum = malloc((size_t)(n ? n : 1) * sizeof *sum);
    if (!u || !sum) return free(u), free(sum), false;
    for (int64_t i = 0; i < n; i++) sum[i] = h[i];
    for (uint32_t k = 1; k < 4; k++) {
        seed_fill_f32(u, n, -1, 1, seed + k);
        for (int64_t i = 0; i < n; i++) sum[i] += u[i];
    }
    for (int64_t i = 0; i < n; i++) h[i] = (float)sum[i];
    free(u), free(sum);
    return true;
}

/* The one-row sort cases: their distribution (and whether the case is an
 * argsort), or false for another case. */
static bool sort_case_keys(const char *name, sort_keys *dist, bool *arg) {
    static const struct { const char *name; sort_keys dist; } suffix[] = {
        {"f32", KEYS_UNIFORM}, {"normal", KEYS_NORMAL}, {"sorted", KEYS_SORTED},
        {"reversed", KEYS_REVERSED}, {"few", KEYS_FEW}};
    *arg = !strncmp(name, "argsort_", 8);
    const char *rest = *arg ? name + 8 : !strncmp(name, "sort_", 5) ? name + 5 : NULL;
    for (size_t i = 0; rest && i < sizeof suffix / sizeof suffix[0]; i++)
        if (!strcmp(rest, suffix[i].name)) return *dist = suffix[i].dist, true;
    return false;
}

/* An f32 input of the given shape filled by seed_fill_f32 in [-1, 1). */
static lf_node *lcg_input(lf_ctx *ctx, lf_graph *g, int ndim, const int64_t *shape, uint32_t seed) {
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, ndim, shape);
    int64_t n = b ? lf_buffer_numel(b) : 0;
    float *h = b ? malloc((size_t)(n ? n : 1) * sizeof *h) : NULL;
    if (h) seed_fill_f32(h, n, -1, 1, seed);
    lf_node *x = h && lf_buffer_write(b, h, (size_t)n * sizeof *h) == LF_OK ? lf_input(g, b) : NULL;
    free(h);
    lf_buffer_free(b); /* the graph keeps it */
    return x;
}

#define SORTED_MAX_OUTS 3
typedef struct sorted_graph {
    int nout;                       /* outputs evaluated together */
    lf_node *outs[SORTED_MAX_OUTS];
    size_t in_bytes;                /* graph input bytes */
    bool input_only;                /* GB/s counts input bytes only (topk_rows) */
    int64_t n;                      /* the n reported */
    spca_nodes spca;                /* spca only */
    float *Vd;                      /* spca only: the host copy of Vd [p, d] */
} sorted_graph;

static bool build_sorted(const options *o, const bench_case *c, lf_ctx *ctx, lf_graph *g, sorted_graph *sg) {
    memset(sg, 0, sizeof *sg);
    sort_keys dist;
    bool arg;
    if (sort_case_keys(c->name, &dist, &arg)) {
        lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &o->n);
        float *h = b ? malloc((size_t)(o->n ? o->n : 1) * sizeof *h) : NULL;
        lf_node *x = h && sort_keys_fill(h, o->n, dist, SORT_X_SEED) &&
                             lf_buffer_write(b, h, (size_t)o->n * sizeof *h) == LF_OK
                         ? lf_input(g, b)
                         : NULL;
        free(h);
        lf_buffer_free(b); /* the graph keeps it */
        sg->outs[0] = x ? (arg ? lf_argsort(g, x, 0, false) : lf_sort(g, x, 0, false)) : NULL;
        sg->nout = 1, sg->in_bytes = (size_t)o->n * 4, sg->n = o->n;
    } else if (!strcmp(c->name, "argsort_rows")) {
        int64_t cols = o->n / SOFTMAX_ROWS > 0 ? o->n / SOFTMAX_ROWS : 1, sh[2] = {SOFTMAX_ROWS, cols};
        lf_node *x = lcg_input(ctx, g, 2, sh, ARGSORT_X_SEED);
        sg->outs[0] = x ? lf_argsort(g, x, 1, false) : NULL;
        sg->nout = 1, sg->in_bytes = (size_t)(SOFTMAX_ROWS * cols) * 4, sg->n = SOFTMAX_ROWS * cols;
    } else if (!strcmp(c->name, "topk_rows")) {
        int64_t sh[2] = {o->samples, SPCA_P};
        lf_node *x = lcg_input(ctx, g, 2, sh, TOPK_X_SEED);
        sg->outs[0] = x ? lf_topk(g, x, SPCA_K, 1, true) : NULL;
        sg->outs[1] = x ? lf_argtopk(g, x, SPCA_K, 1, true) : NULL;
        if (!sg->outs[1]) sg->outs[0] = NULL;
        sg->nout = 2, sg->in_bytes = (size_t)(o->samples * SPCA_P) * 4, sg->n = o->samples;
        sg->input_only = true;
    } else { /* spca */
        int64_t sh[2] = {SPCA_P, SPCA_D};
        sg->Vd = malloc(SPCA_P * SPCA_D * sizeof *sg->Vd);
        lf_buffer *vb = sg->Vd ? lf_buffer_new(ctx, LF_F32, 2, sh) : NULL;
        if (vb) seed_fill_f32(sg->Vd, SPCA_P * SPCA_D, -1, 1, SPCA_VD_SEED);
        bool ok = vb && lf_buffer_write(vb, sg->Vd, SPCA_P * SPCA_D * sizeof *sg->Vd) == LF_OK &&
                  spca_graph(g, lf_input(g, vb), o->samples, SPCA_K, SPCA_SEED, &sg->spca) == LF_OK;
        lf_buffer_free(vb);
        sg->outs[0] = ok ? sg->spca.opt_x : NULL, sg->outs[1] = sg->spca.best, sg->outs[2] = sg->spca.val;
        sg->nout = 3, sg->in_bytes = SPCA_P * SPCA_D * 4, sg->n = o->samples;
    }
    return sg->outs[0] != NULL;
}

/* spca, after lazyfuse's timed evals: the samples (r->host[1]), the C
 * program's check and, in the fused mode, its timing on 2 threads. */
static bool spca_extras(const options *o, lf_ctx *ctx, lf_graph *g, sorted_graph *sg, lf_buffer *const *dst,
                        bool fused, run_result *r) {
    int64_t S = o->samples, dS[2] = {SPCA_D, S};
    lf_buffer *cb = lf_buffer_new(ctx, LF_F32, 2, dS);
    float *C = malloc((size_t)(SPCA_D * S) * sizeof *C), *ref_x = malloc(SPCA_P * sizeof *ref_x);
    int64_t best = -1;
    bool ok = cb && C && ref_x && bench_eval(ctx, g, 1, &sg->spca.C, &cb) == LF_OK &&
              lf_buffer_read(cb, C, (size_t)(SPCA_D * S) * sizeof *C) == LF_OK &&
              lf_buffer_read(dst[1], &best, sizeof best) == LF_OK;
    spca_ref_result ref;
    ok = ok && spca_ref(sg->Vd, C, SPCA_P, SPCA_D, S, SPCA_K, 1, ref_x, &ref) == 0;
    if (!ok) {
        fprintf(stderr, PROG ": spca: the samples or the plain C program: %s\n", lf_errmsg(ctx));
        free(C), free(ref_x);
        return false;
    }
    double worst = 0;
    const float *x = r->host[0];
    for (int64_t i = 0; x && i < SPCA_P; i++) {
        double e = fabs((double)x[i] - ref_x[i]) / fmax(fabs((double)ref_x[i]), 1e-3);
        if (!(e <= worst)) worst = e;
    }
    r->ref_diff = best == ref.best ? worst : INFINITY;
    r->ref_state = x && r->ref_diff <= 1e-5 ? 1 : -1;
    if (r->ref_state < 0)
        fprintf(stderr, PROG ": spca %s: best sample %" PRId64 " (plain C: %" PRId64 "), opt_x differs by %g\n",
                fused ? "fused" : "unfused", best, ref.best, worst);
    free(r->host[1]);
    r->host[1] = C, r->dtype[1] = LF_F32, r->numel[1] = SPCA_D * S, r->nout = 2;
    if (fused) { /* lazyfuse and the C program on 2 threads, interleaved */
        double *t = malloc(2 * (size_t)r->reps * sizeof *t);
        for (int k = 0; t && ok && k < r->reps; k++)
            for (int j = 0; ok && j < 2; j++) {
                int path = (j + k) % 2;
                double t0 = bench_now();
                if (path) ok = spca_ref(sg->Vd, C, SPCA_P, SPCA_D, S, SPCA_K, 2, ref_x, &ref) == 0;
                else ok = bench_eval(ctx, g, sg->nout, sg->outs, dst) == LF_OK && lf_buffer_read(dst[1], &best, 8) == LF_OK;
                t[path * r->reps + k] = bench_now() - t0;
            }
        if (t && ok) {
            double lf = median(t, r->reps), hand = median(t + r->reps, r->reps);
            lf_eval_stats st;
            lf_ctx_last_stats(ctx, &st);
            size_t sp = (size_t)S * SPCA_P * 4;
            fprintf(stderr, PROG ": spca S=%" PRId64 ": lazyfuse %.3f ms, hand-written C (2 threads) %.3f ms: "
                            "%.2fx; %d kernels, temporaries %zu bytes (bytes_materialized; one S x p array is "
                            "%zu: %s), temp_bytes_avoided %zu; %d reps\n",
                    S, lf * 1e3, hand * 1e3, hand / lf, st.kernels, st.bytes_materialized, sp,
                    st.bytes_materialized < sp ? "none of that size" : "ONE OR MORE OF THAT SIZE",
                    st.temp_bytes_avoided, r->reps);
            if (o->json) {
                printf("{\"case\":\"spca\",\"backend\":\"%s\",\"mode\":\"c_2threads\",\"n\":%" PRId64,
                       o->backend == LF_BACKEND_CUDA ? "cuda" : "cpu", S);
                json_num("median_s", hand, "%.9g");
                json_num("lazyfuse_median_s", lf, "%.9g");
                json_num("lazyfuse_speedup", hand / lf, "%.4f");
                printf(",\"reps\":%d,\"threads\":2,\"temp_bytes\":%zu,\"sxp_bytes\":%zu}\n", r->reps,
                       st.bytes_materialized, sp);
            }
        }
        free(t);
    }
    free(ref_x);
    return ok;
}

static bool run_sorted(const options *o, const bench_case *c, bool fused, run_result *r) {
    memset(r, 0, sizeof *r);
    const char *mode = fused ? "fused" : "unfused";
    lf_ctx *ctx = make_ctx(o, fused, c->name);
    if (!ctx) return false;
    lf_graph *g = lf_graph_new(ctx);
    sorted_graph sg;
    lf_buffer *dst[SORTED_MAX_OUTS] = {NULL};
    double *t = NULL;
    const char *step = "build";
    bool ok = g && build_sorted(o, c, ctx, g, &sg);
    r->n = sg.n;
    for (int k = 0; ok && k < sg.nout; k++) ok = (dst[k] = lf_buffer_new_like(ctx, sg.outs[k])) != NULL;
    if (ok) {
        step = "eval";
        double t0 = bench_now();
        ok = bench_eval(ctx, g, sg.nout, sg.outs, dst) == LF_OK;
        r->first_s = bench_now() - t0;
        lf_eval_stats st;
        if (ok && lf_ctx_last_stats(ctx, &st) == LF_OK) r->first_compiled = st.kernels_compiled, r->first_runs = st.compiler_runs;
        t0 = bench_now();
        ok = ok && bench_eval(ctx, g, sg.nout, sg.outs, dst) == LF_OK;
        r->reps = pick_reps(o, bench_now() - t0);
        ok = ok && (t = malloc((size_t)r->reps * sizeof *t));
    }
    for (int k = 0; ok && k < r->reps; k++) {
        double t0 = bench_now();
        ok = bench_eval(ctx, g, sg.nout, sg.outs, dst) == LF_OK;
        t[k] = bench_now() - t0;
    }
    if (ok) {
        r->median_s = median(t, r->reps);
        lf_eval_stats st;
        lf_ctx_last_stats(ctx, &st);
        r->kernels = st.kernels;
        r->temp_bytes = st.bytes_materialized;
        r->traffic = sg.in_bytes;
        r->nout = sg.nout < SEED_MAX_OUTS ? sg.nout : SEED_MAX_OUTS;
        for (int k = 0; k < sg.nout; k++) {
            size_t bytes = lf_buffer_bytes(dst[k]);
            if (!sg.input_only) r->traffic += bytes;
            if (k >= r->nout) continue;
            r->dtype[k] = lf_buffer_dtype(dst[k]);
            r->numel[k] = lf_buffer_numel(dst[k]);
            r->host[k] = malloc(bytes ? bytes : 1);
            ok = ok && r->host[k] && lf_buffer_read(dst[k], r->host[k], bytes) == LF_OK;
        }
        r->gbps = (double)r->traffic / r->median_s / 1e9;
        r->out_sum = 0;
        for (int64_t i = 0; ok && i < r->numel[0]; i++) r->out_sum += elem(r->host[0], r->dtype[0], i);
        step = "read back";
    }
    if (ok && !strcmp(c->name, "spca")) ok = spca_extras(o, ctx, g, &sg, dst, fused, r);
    if (!ok) fprintf(stderr, PROG ": %s %s: %s failed: %s\n", c->name, mode, step,
                     g && lf_graph_status(g) != LF_OK ? lf_graph_errmsg(g) : lf_errmsg(ctx));
    r->ok = ok;
    free(t);
    free(sg.Vd);
    lf_ctx_destroy(ctx);
    return ok;
}

/* ---- cases with a runner of their own (seed NULL in cases[]) ------------------- */

typedef struct own_case {
    const char *name;    /* as in cases[] */
    bool (*run)(const options *o, const bench_case *c, bool fused, run_result *r); /* as run_case */
    const char *what;    /* one line for --list */
} own_case;

static const own_case own_cases[] = {
    {"const_sweep", run_const_sweep,
     "gaussian_pdf with lf_const mean and sigma, 100 evals each with a new mean (lf_scalar_set)"},
    {"inplace_axpy", run_inplace_axpy, "x = x*0.5 + 1 evaluated into x's own buffer, beside the same into y"},
    {"sort_f32", run_sorted, "lf_sort of n f32 keys, ascending (stable, NaN last)"},
    {"sort_normal", run_sorted, "lf_sort of n normal-like f32 keys (sum of 4 uniforms)"},
    {"sort_sorted", run_sorted, "lf_sort of n f32 keys already ascending"},
    {"sort_reversed", run_sorted, "lf_sort of n f32 keys in descending order"},
    {"sort_few", run_sorted, "lf_sort of n f32 keys of 16 distinct values"},
    {"argsort_f32", run_sorted, "lf_argsort of n uniform f32 keys (i64 positions)"},
    {"argsort_normal", run_sorted, "lf_argsort of n normal-like f32 keys"},
    {"argsort_sorted", run_sorted, "lf_argsort of n f32 keys already ascending"},
    {"argsort_reversed", run_sorted, "lf_argsort of n f32 keys in descending order"},
    {"argsort_few", run_sorted, "lf_argsort of n f32 keys of 16 distinct values"},
    {"argsort_rows", run_sorted, "lf_argsort along the rows of [4096, n/4096] f32 (i64 positions)"},
    {"topk_rows", run_sorted, "lf_topk k = 10 (largest) along rows of [--samples, 1000] f32; GB/s counts the input"},
    {"spca", run_sorted, "the seed's sparse PCA (tools/spca_graph.c), p = 1000, d = 3, k = 10, --samples samples; "
                         "beside the hand-written C on 2 threads"},
};

/* The runner of case c, or NULL for a seed case. */
static const own_case *own_case_of(const bench_case *c) {
    if (c->seed) return NULL;
    for (size_t i = 0; i < sizeof own_cases / sizeof own_cases[0]; i++)
        if (!strcmp(own_cases[i].name, c->name)) return &own_cases[i];
    return NULL;
}

static const char *own_case_what(const bench_case *c) {
    const own_case *oc = own_case_of(c);
    return oc ? oc->what : "?";
}

/* ---- output ---------------------------------------------------------------------- */

static const char *backend_str(const options *o) { return o->backend == LF_BACKEND_CUDA ? "cuda" : "cpu"; }

static void json_case(const options *o, const bench_case *c, const char *mode, const run_result *r,
                      const char *check, double diff, double speedup, double copy_gbps, double nt_gbps) {
    printf("{\"case\":\"%s\",\"backend\":\"%s\",\"mode\":\"%s\",\"n\":%" PRId64, c->name,
           backend_str(o), mode, r->n);
    json_num("median_s", r->median_s, "%.9g");
    json_num("gbps", r->gbps, "%.4f");
    printf(",\"kernels\":%d,\"temp_bytes\":%zu", r->kernels, r->temp_bytes);
    json_num("first_s", r->first_s, "%.9g");
    printf(",\"first_compiled\":%d,\"first_compiler_runs\":%d", r->first_compiled, r->first_runs);
    printf(",\"reps\":%d,\"threads\":%d,\"bytes\":%zu,\"cache\":\"%s\"", r->reps, o->nthreads,
           r->traffic, cache_kind(o));
    json_num("pct_of_stream_copy", copy_gbps > 0 ? 100 * r->gbps / copy_gbps : NAN, "%.2f");
    if (nt_gbps > 0) json_num("pct_of_nt_copy", 100 * r->gbps / nt_gbps, "%.2f");
    if (c->shape == SHAPE_MATMUL) {
        printf(",\"matmul_n\":%" PRId64, o->matmul_n);
        json_num("gflops", case_flops(c, o->matmul_n) / r->median_s / 1e9, "%.4f");
    }
    if (!isnan(speedup)) json_num("speedup", speedup, "%.4f");
    printf(",\"check\":\"%s\"", check);
    if (!isnan(diff)) json_num("max_rel_diff", diff, "%.3g");
    if (r->host[0]) {
        printf(",\"out_numel\":%" PRId64, r->numel[0]);
        json_num("out_sum", r->out_sum, "%.9g");
    }
    if (r->saved[0]) {
        printf(",\"output\":");
        json_str(r->saved);
    }
    printf("}\n");
}

/* The c_handfused line of case c (r: lazyfuse fused's result, r->hand ran). */
static void json_hand(const options *o, const bench_case *c, const run_result *r, double copy_gbps,
                      double nt_gbps) {
    double gbps = (double)r->traffic / r->hand.median_s / 1e9;
    printf("{\"case\":\"%s\",\"backend\":\"%s\",\"mode\":\"c_handfused\",\"n\":%" PRId64, c->name,
           backend_str(o), r->n);
    json_num("median_s", r->hand.median_s, "%.9g");
    json_num("gbps", gbps, "%.4f");
    printf(",\"kernels\":1,\"temp_bytes\":0,\"reps\":%d,\"threads\":%d,\"bytes\":%zu", r->hand.reps,
           r->hand.threads, r->traffic);
    json_num("pct_of_stream_copy", copy_gbps > 0 ? 100 * gbps / copy_gbps : NAN, "%.2f");
    if (nt_gbps > 0) json_num("pct_of_nt_copy", 100 * gbps / nt_gbps, "%.2f");
    json_num("lazyfuse_median_s", r->hand.lf_median_s, "%.9g");
    json_num("lazyfuse_speedup", r->hand.median_s / r->hand.lf_median_s, "%.4f");
    printf(",\"check\":\"%s\"", r->hand.check_ok ? "ok" : "MISMATCH");
    json_num("max_rel_diff", r->hand.diff, "%.3g");
#ifdef LF_BENCH_HANDFUSED
    printf(",\"compiled\":");
    json_str(hf_compiled_with);
#endif
    printf("}\n");
}

static void fmt_opt(char *buf, size_t cap, double v, const char *fmt) {
    if (isfinite(v)) snprintf(buf, cap, fmt, v);
    else snprintf(buf, cap, "-");
}

static void table_case(const bench_case *c, const options *o, const char *mode, const run_result *r,
                       const char *check, double speedup, double copy_gbps) {
    char pct[16], sp[16], gf[16];
    fmt_opt(pct, sizeof pct, copy_gbps > 0 ? 100 * r->gbps / copy_gbps : NAN, "%.1f%%");
    fmt_opt(sp, sizeof sp, speedup, "%.2fx");
    fmt_opt(gf, sizeof gf, c->shape == SHAPE_MATMUL ? case_flops(c, o->matmul_n) / r->median_s / 1e9 : NAN, "%.2f");
    printf("%-18s %-11s %7d %9.1f %9.2f %10.3f %8.2f %7s %8s %8s  %s\n", c->name, mode, r->kernels,
           (double)r->temp_bytes / 1e6, r->first_s * 1e3, r->median_s * 1e3, r->gbps, pct, sp, gf,
           check);
}

/* The c_handfused row: its median, GB/s and % copy; under speedup its
 * median over lazyfuse fused's in the same interleaved reps. */
static void table_hand(const bench_case *c, const run_result *r, double copy_gbps) {
    double gbps = (double)r->traffic / r->hand.median_s / 1e9;
    char pct[16], sp[16];
    fmt_opt(pct, sizeof pct, copy_gbps > 0 ? 100 * gbps / copy_gbps : NAN, "%.1f%%");
    fmt_opt(sp, sizeof sp, r->hand.median_s / r->hand.lf_median_s, "%.2fx");
    printf("%-18s %-11s %7s %9s %9s %10.3f %8.2f %7s %8s %8s  %s\n", c->name, "c_handfused", "-", "-", "-",
           r->hand.median_s * 1e3, gbps, pct, sp, "-", r->hand.check_ok ? "ok" : "MISMATCH");
}

static void table_header(void) {
    printf("%-18s %-11s %7s %9s %9s %10s %8s %7s %8s %8s  %s\n", "case", "mode", "kernels", "temp MB",
           "first ms", "median ms", "GB/s", "% copy", "speedup", "GFLOP/s", "check");
}

/* ---- sweep sizes, progress, saved outputs -------------------------------------- */

/* The sizes to run: --n, or the sweep's powers of two (the largest always). */
static int sweep_sizes(const options *o, int64_t *sizes) {
    if (!o->sweep) {
        sizes[0] = o->n;
        return 1;
    }
    int k = 0;
    for (int e = o->sweep_lo; e <= o->sweep_hi && k < SWEEP_MAX_SIZES; e += o->sweep_step)
        sizes[k++] = (int64_t)1 << e;
    if (sizes[k - 1] != (int64_t)1 << o->sweep_hi) sizes[k++] = (int64_t)1 << o->sweep_hi;
    return k;
}

/* Whether case c runs at size n of this run (in a sweep, or with several
 * --matmul-n sides, the contractions run after it, once per side; in a
 * sweep the --samples cases once after it; and softmax_rows, 4096 rows,
 * needs n >= 4096). */
static bool runs_at(const options *o, const bench_case *c, int64_t n) {
    if (c->shape == SHAPE_MATMUL && o->nmatmul > 1) return false;
    if (!o->sweep) return true;
    if (c->shape == SHAPE_MATMUL || c->shape == SHAPE_SAMPLES) return false;
    return c->shape != SHAPE_ROWS || n >= SOFTMAX_ROWS;
}

/* Whether case c runs after the sizes (see runs_at). */
static bool runs_after(const options *o, const bench_case *c) {
    if (c->shape == SHAPE_MATMUL) return o->sweep || o->nmatmul > 1;
    return c->shape == SHAPE_SAMPLES && o->sweep;
}

static int prog_done, prog_total;
static double prog_t0;

/* "2^20" for powers of two, else the number. */
static void fmt_n(char *buf, size_t cap, int64_t n) {
    if (n > 0 && (n & (n - 1)) == 0) {
        int e = 0;
        while (((int64_t)1 << e) != n) e++;
        snprintf(buf, cap, "2^%d", e);
    } else
        snprintf(buf, cap, "%" PRId64, n);
}

/* One progress line on stderr before each step, in --json and --sweep runs
 * (a plain table run prints its rows as they come). */
static void progress(const options *o, const char *what, int64_t n) {
    prog_done++;
    if (!o->json && !o->sweep) return;
    char nb[32];
    fmt_n(nb, sizeof nb, n);
    fprintf(stderr, PROG ": [%d/%d] %s %s: %s (%.0f s so far)\n", prog_done, prog_total,
            n == o->matmul_n && (strstr(what, "matmul") || strstr(what, "matvec")) ? "side" : "n", nb, what,
            bench_now() - prog_t0);
}

/* Writes the outputs of r to DIR/CASE.f32 (output k > 0: DIR/CASE.k.f32);
 * keeps the first file's name in r->saved. */
static bool save_outputs(const options *o, const bench_case *c, run_result *r) {
    if (mkdir(o->save_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, PROG ": --save-outputs: mkdir %s: %s\n", o->save_dir, strerror(errno));
        return false;
    }
    for (int k = 0; k < r->nout; k++) {
        char path[4200];
        if (k == 0) snprintf(path, sizeof path, "%s/%s.f32", o->save_dir, c->name);
        else snprintf(path, sizeof path, "%s/%s.%d.f32", o->save_dir, c->name, k);
        size_t bytes = (size_t)r->numel[k] * lf_dtype_size(r->dtype[k]);
        FILE *f = r->host[k] ? fopen(path, "wb") : NULL;
        bool ok = f && fwrite(r->host[k], 1, bytes, f) == bytes;
        if (f && fclose(f) != 0) ok = false;
        if (!ok) {
            fprintf(stderr, PROG ": --save-outputs: cannot write %s: %s\n", path,
                    r->host[k] ? strerror(errno) : "output not read back");
            return false;
        }
        if (k == 0) snprintf(r->saved, sizeof r->saved, "%s", path);
    }
    return true;
}

/* Runs one case (both modes as asked) at o->n, compares, prints, saves. */
static bool run_one(const options *o, const bench_case *c, const copy_result *copy, bool save) {
    bool ok = true;
    run_result f = {0}, u = {0};
    int64_t n = c->shape == SHAPE_MATMUL ? o->matmul_n : c->shape == SHAPE_SAMPLES ? o->samples : o->n;
    char what[64];
    if (o->run_fused) {
        snprintf(what, sizeof what, "%s fused", c->name);
        progress(o, what, n);
        if (!(own_case_of(c) ? own_case_of(c)->run(o, c, true, &f) : run_case(o, c, true, &f))) ok = false;
    }
    double product = c->shape == SHAPE_MATMUL ? unfused_product_bytes(c, o->matmul_n) : 0;
    if (o->run_unfused && product > UNFUSED_PRODUCT_MAX) {
        progress(o, "unfused left out", n);
        fprintf(stderr, PROG ": %s unfused at side %" PRId64 ": left out, its broadcast product would be %.1f GiB "
                        "(over %.0f GiB)\n", c->name, o->matmul_n, product / 1073741824.0,
                UNFUSED_PRODUCT_MAX / 1073741824.0);
    } else if (o->run_unfused) {
        snprintf(what, sizeof what, "%s unfused", c->name);
        progress(o, what, n);
        if (!(own_case_of(c) ? own_case_of(c)->run(o, c, false, &u) : run_case(o, c, false, &u))) ok = false;
    }
    double diff;
    const char *check = compare(c, &f, &u, &diff);
    if (!strcmp(check, "MISMATCH"))
        fprintf(stderr, PROG ": warning: %s: fused and unfused outputs differ (max relative "
                        "difference %.3g > %.0e)\n", c->name, diff, c->tol);
    if (save) {
        run_result *r = f.ok ? &f : u.ok ? &u : NULL;
        if (r && !save_outputs(o, c, r)) ok = false;
    }
    double speedup = f.ok && u.ok ? u.median_s / f.median_s : NAN;
    double cg = copy->ok ? copy->gbps : 0, nt = copy->ok && copy->nt_ok ? copy->nt_gbps : 0;
    if (f.ok) {
        if (o->json) json_case(o, c, "fused", &f, check, diff, speedup, cg, nt);
        else table_case(c, o, "fused", &f, check, speedup, cg);
    }
    if (f.ok && f.hand.ran) {
        if (o->json) json_hand(o, c, &f, cg, nt);
        else table_hand(c, &f, cg);
        if (!f.hand.check_ok) ok = false;
    }
    if (u.ok) {
        if (o->json) json_case(o, c, "unfused", &u, check, diff, NAN, cg, nt);
        else table_case(c, o, "unfused", &u, check, NAN, cg);
    }
    fflush(stdout);
    run_result_free(&f);
    run_result_free(&u);
    return ok;
}

/* Measures stream_copy at o->n and reports it; false when it could not run
 * or its check failed. */
static bool run_copy(const options *o, copy_result *copy) {
    FILE *info = o->json ? stderr : stdout;
    memset(copy, 0, sizeof *copy);
    progress(o, "stream_copy", o->n);
    copy->ok = o->backend == LF_BACKEND_CUDA ? cuda_copy(o, copy) : host_copy(o, copy);
    bool ok = copy->ok;
    if (copy->ok) {
        if (!copy->check_ok) {
            fprintf(stderr, PROG ": warning: stream_copy destination differs from its source\n");
            ok = false;
        }
        fprintf(info, "stream_copy (%s): %.2f GB/s (median of %d, %.1f MiB copied each)", copy->what,
                copy->gbps, copy->reps, (double)o->n * sizeof(float) / 1048576.0);
        if (copy->kind != COPY_LOOP && copy->loop_ok) fprintf(info, "; loop %.2f GB/s", copy->loop_gbps);
        if (copy->kind != COPY_NT && copy->nt_ok)
            fprintf(info, "; nt (non-temporal stores) %.2f GB/s, %.2fx the loop", copy->nt_gbps,
                    copy->loop_ok ? copy->nt_gbps / copy->loop_gbps : NAN);
        long llc = o->backend == LF_BACKEND_CUDA ? 0 : last_level_cache();
        if (copy->nt_ok && llc > 0)
            fprintf(info, " (last-level cache %.0f MiB: the copies are %s it)", llc / 1048576.0,
                    2.0 * (double)o->n * sizeof(float) > (double)llc ? "larger than" : "within");
        fprintf(info, "\n");
        if (o->json) {
            printf("{\"case\":\"stream_copy\",\"backend\":\"%s\",\"mode\":\"reference\",\"n\":%" PRId64,
                   backend_str(o), o->n);
            json_num("median_s", copy->median_s, "%.9g");
            json_num("gbps", copy->gbps, "%.4f");
            if (copy->loop_ok) json_num("loop_gbps", copy->loop_gbps, "%.4f");
            if (copy->nt_ok) {
                json_num("nt_gbps", copy->nt_gbps, "%.4f");
                json_num("nt_median_s", copy->nt_median_s, "%.9g");
                if (last_level_cache() > 0) printf(",\"llc_bytes\":%ld", last_level_cache());
            }
            printf(",\"kernels\":1,\"temp_bytes\":0,\"reps\":%d,\"threads\":%d,\"bytes\":%.0f,"
                   "\"copy\":\"%s\",\"check\":\"%s\"}\n",
                   copy->reps, o->backend == LF_BACKEND_CUDA ? 0 : o->nthreads,
                   2.0 * (double)o->n * sizeof(float),
                   o->backend == LF_BACKEND_CUDA ? "cuMemcpyDtoD" : copy_names[copy->kind],
                   copy->check_ok ? "ok" : "MISMATCH");
            fflush(stdout);
        }
    } else
        fprintf(info, "stream_copy: not measured (see above); %% copy left out\n");
    return ok;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    int failed = 0;

    int64_t sizes[SWEEP_MAX_SIZES + 1];
    int nsizes = sweep_sizes(&o, sizes);
    int modes = (int)o.run_fused + (int)o.run_unfused;
    bool matmul_after = false;
    prog_t0 = bench_now();
    for (int si = 0; si < nsizes; si++) {
        prog_total++; /* stream_copy */
        for (int i = 0; i < NCASES; i++)
            if (o.selected[i] && runs_at(&o, &cases[i], sizes[si])) prog_total += modes;
    }
    for (int i = 0; i < NCASES; i++)
        if (o.selected[i] && runs_after(&o, &cases[i]))
            matmul_after = true, prog_total += modes * (cases[i].shape == SHAPE_MATMUL ? o.nmatmul : 1);
    if (o.overhead) prog_total++;

    char model[256];
    cpu_model(model, sizeof model);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *info = o.json ? stderr : stdout;
    char nlo[32], nhi[32];
    fmt_n(nlo, sizeof nlo, sizes[0]);
    fmt_n(nhi, sizeof nhi, sizes[nsizes - 1]);
    if (o.sweep)
        fprintf(info, PROG ": backend %s, %d thread%s, sweep n = %s .. %s (%d sizes), reps %s\n",
                backend_str(&o), o.nthreads, o.nthreads == 1 ? "" : "s", nlo, nhi, nsizes,
                o.reps ? "fixed" : "auto (~0.5 s per case and mode, 5..200)");
    else
        fprintf(info, PROG ": backend %s, %d thread%s, n %" PRId64 ", reps %s\n", backend_str(&o),
                o.nthreads, o.nthreads == 1 ? "" : "s", o.n,
                o.reps ? "fixed" : "auto (~0.5 s per case and mode, 5..200)");
    fprintf(info, "machine: %s, %ld online CPU%s\n", model, cpus, cpus == 1 ? "" : "s");
    cache_root_make(&o);
    if (cache_root[0])
        fprintf(info, "kernel cache: a fresh folder per case and mode under %s (removed at exit): "
                      "first ms is a cold compile%s\n", cache_root,
                o.sweep ? " at the first size (later sizes reuse the folder)" : "");
    else
        fprintf(info, "kernel cache: %s: first ms may be a disk-cache hit\n",
                o.cache_dir ? o.cache_dir : "the library's default folder");

    copy_result copy = {0};
    for (int si = 0; si < nsizes; si++) {
        o.n = sizes[si];
        first_size = si == 0;
        if (o.sweep && !o.json) {
            char nb[32];
            fmt_n(nb, sizeof nb, o.n);
            printf("\n== n = %s (%" PRId64 ")\n", nb, o.n);
        }
        /* the bandwidth limit first, in the same process */
        if (!run_copy(&o, &copy)) failed = 1;
        if (!o.json) {
            printf("\n");
            table_header();
            fflush(stdout);
        }
        for (int i = 0; i < NCASES; i++) {
            if (!o.selected[i] || !runs_at(&o, &cases[i], o.n)) continue;
            bool save = o.save_dir && si == nsizes - 1;
            if (!run_one(&o, &cases[i], &copy, save)) failed = 1;
        }
    }
    if (matmul_after) {
        /* the contractions at each --matmul-n side (outputs saved at the
           largest), then topk_rows and spca; % copy against the last copy */
        for (int k = 0; k < o.nmatmul; k++) {
            o.matmul_n = o.matmul_sides[k];
            first_size = k == 0; /* their own folders, not used by the sweep */
            bool any = false;
            for (int i = 0; i < NCASES; i++) any = any || (o.selected[i] && cases[i].shape == SHAPE_MATMUL && runs_after(&o, &cases[i]));
            if (!any) break;
            if (!o.json) {
                printf("\n== contractions at side %" PRId64 " (matmul_zip_reduce etc.; batched_matmul: %d x %" PRId64
                       "^2): %% copy against the last stream_copy\n\n", o.matmul_n, SEED_BATCH,
                       seed_batched_side(o.matmul_n));
                table_header();
            }
            for (int i = 0; i < NCASES; i++)
                if (o.selected[i] && cases[i].shape == SHAPE_MATMUL && runs_after(&o, &cases[i]) &&
                    !run_one(&o, &cases[i], &copy, o.save_dir && k == o.nmatmul - 1))
                    failed = 1;
        }
        first_size = true;
        bool samples = false;
        for (int i = 0; i < NCASES; i++) samples = samples || (o.selected[i] && cases[i].shape == SHAPE_SAMPLES && runs_after(&o, &cases[i]));
        if (samples && !o.json) {
            printf("\n== topk_rows and spca (%" PRId64 " samples): %% copy against the last stream_copy\n\n", o.samples);
            table_header();
        }
        for (int i = 0; i < NCASES; i++)
            if (o.selected[i] && cases[i].shape == SHAPE_SAMPLES && runs_after(&o, &cases[i]) &&
                !run_one(&o, &cases[i], &copy, o.save_dir != NULL))
                failed = 1;
    }

    if (o.overhead) {
        progress(&o, "overhead", OVERHEAD_N);
        overhead_result ov;
        if (!run_overhead(&o, &ov)) failed = 1;
        else {
            if (!ov.check_ok) {
                fprintf(stderr, PROG ": warning: overhead: triad result differs from a*b+c\n");
                failed = 1;
            }
            static const char *const modes_s[3] = {"cached_reeval", "rebuild_reeval", "cached_host"};
            double traffic = 4.0 * OVERHEAD_N * sizeof(float);
            if (o.json)
                for (int k = 0; k < 3; k++) {
                    printf("{\"case\":\"overhead\",\"backend\":\"%s\",\"mode\":\"%s\",\"n\":%d",
                           backend_str(&o), modes_s[k], OVERHEAD_N);
                    json_num("median_s", ov.median_s[k], "%.9g");
                    json_num("gbps", traffic / ov.median_s[k] / 1e9, "%.4f");
                    printf(",\"kernels\":%d,\"temp_bytes\":%zu", ov.kernels[k], ov.temp_bytes[k]);
                    json_num("median_us", ov.median_s[k] * 1e6, "%.3f");
                    printf(",\"reps\":%d,\"threads\":%d,\"check\":\"%s\"}\n", OVERHEAD_ITERS, o.nthreads,
                           ov.check_ok ? "ok" : "MISMATCH");
                }
            else
                printf("\noverhead (triad a*b+c, n = %d, median of %d): cached re-eval %.2f us/eval, "
                       "rebuild + eval %.2f us/iteration (both until the device is done); host time of "
                       "a cached lf_eval alone %.2f us\n",
                       OVERHEAD_N, OVERHEAD_ITERS, ov.median_s[0] * 1e6, ov.median_s[1] * 1e6,
                       ov.median_s[2] * 1e6);
        }
    }
    if (!o.json && o.run_fused && o.run_unfused)
        printf("\nGB/s counts graph inputs and outputs only; %% copy is GB/s over stream_copy; "
               "speedup is unfused over fused median.\n");
    if (!o.json && o.run_fused)
        printf("c_handfused: a hand-written one-pass C loop (benches/handfused.c, -O3 -march=native, libmvec) "
               "on %d threads; its speedup column is its median over lazyfuse fused's, timed interleaved "
               "(above 1x lazyfuse is faster).\n", o.nthreads);
    if (o.sweep || o.json) fprintf(stderr, PROG ": done in %.0f s\n", bench_now() - prog_t0);
    cache_root_remove();
    return failed;
}
