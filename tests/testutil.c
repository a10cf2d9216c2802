/* tests/testutil.c: see testutil.h. */
#include "testutil.h"
#include "graph/graph.h" /* graph_scalar_* (buffers of any dtype from doubles) */

#include "backend_arg.h"

#include <criterion/criterion.h>
#include <criterion/options.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

bool tu_on_valgrind(void) { return RUNNING_ON_VALGRIND; }

static uint64_t rng_state;
static bool rng_started;

/* ---- notes that reach meson's log ----------------------------------------
 * Under --tap (how meson runs every suite) Criterion points the runner's
 * stdout and stderr at /dev/null while tests run, and the test processes it
 * starts inherit that: anything a test prints on stderr is lost. So notes
 * (seeds, skipped comparisons, summaries) go through tu_note: a test process
 * appends the line to a file the runner made ($LF_TEST_NOTES), and the
 * runner copies new lines to the stderr it had before Criterion redirected
 * it (saved by a constructor) after each test and at the end; meson keeps
 * that stderr in its log and prints it for a failing test. Without a runner
 * (LF_TEST_NOTES unset) notes go to stderr. */
static int saved_stderr = -1;     /* the runner's real stderr */
static char notes_path[4096];     /* the runner's notes file ("" when none) */
static off_t notes_copied;        /* bytes of it already copied out */

__attribute__((constructor)) static void keep_stderr(void) {
    saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

/* Writes all of buf[0..n) to fd, retrying short writes; best effort. */
static void write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        buf += w;
        n -= (size_t)w;
    }
}

void tu_note(const char *fmt, ...) {
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    const char *path = getenv("LF_TEST_NOTES");
    int fd = path && *path ? open(path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    if (fd < 0) {
        write_all(STDERR_FILENO, line, len);
        return;
    }
    write_all(fd, line, len); /* one O_APPEND write per note: notes of parallel processes do not interleave */
    close(fd);
}

/* Runner side: copies the notes written since the last call to the saved
 * stderr. */
static void copy_notes(void) {
    if (!notes_path[0] || saved_stderr < 0) return;
    int fd = open(notes_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[65536];
    ssize_t r;
    while ((r = pread(fd, buf, sizeof buf, notes_copied)) > 0) {
        write_all(saved_stderr, buf, (size_t)r);
        notes_copied += r;
    }
    close(fd);
}

/* Runner side: a line straight to the saved stderr. */
static void runner_say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) write_all(saved_stderr >= 0 ? saved_stderr : STDERR_FILENO, line,
                         (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

uint64_t tu_seed(void) {
    static uint64_t seed;
    static bool have;
    if (!have) {
        const char *s = getenv("LF_TEST_SEED");
        seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
        have = true;
    }
    return seed;
}

/* ---- sampling: LF_TEST_SAMPLE=P runs about P% of a binary's tests --------
 * For slow passes (quickstart's valgrind pass sets it): each test is kept
 * when a hash of the run's seed and its "suite/name" falls under P%, so
 * another seed samples other tests and successive CI runs cover the whole
 * suite; at least SAMPLE_MIN tests of a binary are kept (the lowest hashes),
 * so a small suite runs whole. The rest are disabled before any test starts
 * and Criterion reports them as skipped; the runner notes how many ran. A
 * test that is given by --filter is not sampled out (a replay runs it). */
#define SAMPLE_MIN 3

static uint64_t sample_hash(uint64_t seed, const char *category, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed; /* FNV-1a over "category/name", then a mix */
    for (const char *p = category; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ '/') * 1099511628211ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void sample_tests(struct criterion_test_set *set) {
    const char *env = getenv("LF_TEST_SAMPLE");
    if (!env || !*env) return;
    char *end;
    long pct = strtol(env, &end, 10);
    if (*end || pct < 0 || pct > 100) {
        runner_say("lazyfuse tests: LF_TEST_SAMPLE=%s is not a percentage 0..100: every test runs\n", env);
        return;
    }
    if (pct == 100 || (criterion_options.pattern && *criterion_options.pattern)) return;
    size_t total = 0, kept = 0, i = 0;
    FOREACH_SET(struct criterion_suite_set *s, set->suites) {
        FOREACH_SET(struct criterion_test *t, s->tests) total += !t->data->disabled;
    }
    if (total <= SAMPLE_MIN) return;
    uint64_t *h = malloc(total * sizeof *h);
    if (!h) return; /* every test runs */
    FOREACH_SET(struct criterion_suite_set *s, set->suites) {
        FOREACH_SET(struct criterion_test *t, s->tests) {
            if (!t->data->disabled) h[i++] = sample_hash(tu_seed(), t->category, t->name);
        }
    }
    qsort(h, total, sizeof *h, cmp_u64);
    uint64_t always = h[SAMPLE_MIN - 1]; /* the SAMPLE_MIN lowest hashes run whatever P is */
    free(h);
    uint64_t cut = (uint64_t)((double)pct / 100.0 * 18446744073709549568.0);
    FOREACH_SET(struct criterion_suite_set *s, set->suites) {
        FOREACH_SET(struct criterion_test *t, s->tests) {
            if (t->data->disabled) continue;
            uint64_t ht = sample_hash(tu_seed(), t->category, t->name);
            if (ht < cut || ht <= always)
                kept++;
            else
                t->data->disabled = true;
        }
    }
    runner_say("lazyfuse tests: LF_TEST_SAMPLE=%ld: %zu of %zu tests run, the rest skip "
               "(another LF_TEST_SEED samples others)\n", pct, kept, total);
}

/* Runs once in Criterion's runner process before any test: fixes the seed
 * for the whole run, prints it, and exports it so every test process draws
 * from the same seed; makes the notes file the test processes append to;
 * samples the tests when LF_TEST_SAMPLE asks. */
ReportHook(PRE_ALL)(struct criterion_test_set *set) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, tu_seed());
    setenv("LF_TEST_SEED", buf, 1);
    runner_say("lazyfuse tests: LF_TEST_SEED=%" PRIu64 "\n", tu_seed());
    sample_tests(set);
    const char *tmp = getenv("TMPDIR");
    int len = snprintf(notes_path, sizeof notes_path, "%s/lazyfuse-test-notes-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = len > 0 && (size_t)len < sizeof notes_path ? mkstemp(notes_path) : -1;
    if (fd < 0) {
        runner_say("lazyfuse tests: cannot make a notes file (%s): test notes go to stderr, which --tap drops\n",
                   strerror(errno));
        notes_path[0] = '\0';
        return;
    }
    close(fd);
    setenv("LF_TEST_NOTES", notes_path, 1);
}

/* A failing test names the seed that replays it, and the run repeats the
 * seed on its last line (`meson test --print-errorlogs` shows only the last
 * 100 lines of a failing test's log). */
static int failed_tests;

ReportHook(POST_TEST)(struct criterion_test_stats *stats) {
    copy_notes();
    if (stats->test_status != CR_STATUS_FAILED) return;
    failed_tests++;
    runner_say("lazyfuse tests: %s/%s failed; replay it with LF_TEST_SEED=%" PRIu64 " and --filter '%s/%s'\n",
               stats->test->category, stats->test->name, tu_seed(), stats->test->category, stats->test->name);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    (void)stats;
    copy_notes();
    if (notes_path[0]) unlink(notes_path);
    if (failed_tests)
        runner_say("lazyfuse tests: %d failed; this run's seed was LF_TEST_SEED=%" PRIu64 "\n", failed_tests,
                   tu_seed());
}

uint64_t tu_rand(void) {
    if (!rng_started) {
        rng_state = tu_seed();
        rng_started = true;
    }
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tu_uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(tu_rand() >> 11) * 0x1.0p-53);
}

int64_t tu_randint(int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(span ? tu_rand() % span : tu_rand());
}

lf_ctx *tu_ctx(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    const char *b = getenv("LF_TEST_BACKEND"); /* meson runs some suites again */
    if (!backend_from_name(b, &o.backend) || o.backend == LF_BACKEND_AUTO) o.backend = LF_BACKEND_REFERENCE;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx && o.backend == LF_BACKEND_CUDA && !getenv("LF_TEST_REQUIRE_CUDA"))
        cr_skip_test("no usable CUDA device: %s", lf_errmsg(NULL));
    cr_assert(ctx != NULL, "lf_ctx_new: %s", lf_errmsg(NULL));
    return ctx;
}

lf_buffer *tu_buf(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, const double *vals) {
    lf_buffer *b = lf_buffer_new(ctx, t, ndim, shape);
    cr_assert(b != NULL, "lf_buffer_new: %s", lf_errmsg(ctx));
    if (!vals) return b;
    int64_t n = lf_buffer_numel(b);
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *host = malloc(bytes ? bytes : 1);
    cr_assert(host != NULL);
    for (int64_t i = 0; i < n; i++) {
        /* graph/scalar.c's cast from f64 (integers: truncated; f16, bf16: rounded) */
        graph_scalar_store(host, t, i, graph_scalar_convert((lf_scalar){.f = vals[i]}, LF_F64, t));
    }
    cr_assert_eq(lf_buffer_write(b, host, bytes), LF_OK, "write: %s", lf_errmsg(ctx));
    free(host);
    return b;
}

void tu_read(const lf_buffer *b, double *out) {
    int64_t n = lf_buffer_numel(b);
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *host = malloc(bytes ? bytes : 1);
    cr_assert(host != NULL);
    cr_assert_eq(lf_buffer_read(b, host, bytes), LF_OK);
    for (int64_t i = 0; i < n; i++) {
        out[i] = graph_scalar_convert(graph_scalar_load(host, lf_buffer_dtype(b), i), lf_buffer_dtype(b), LF_F64).f;
    }
    free(host);
}

void *tu_read_raw(const lf_buffer *b) {
    size_t bytes = lf_buffer_bytes(b);
    void *host = malloc(bytes ? bytes : 1);
    cr_assert(host != NULL);
    cr_assert_eq(lf_buffer_read(b, host, bytes), LF_OK);
    return host;
}

lf_buffer *tu_eval1(lf_ctx *ctx, lf_graph *g, lf_node *n) {
    cr_assert(n != NULL, "node is NULL: %s", lf_graph_errmsg(g));
    lf_buffer *b = lf_buffer_new_like(ctx, n);
    cr_assert(b != NULL, "lf_buffer_new_like: %s", lf_errmsg(ctx));
    lf_status st = lf_eval(g, 1, &n, &b);
    cr_assert_eq(st, LF_OK, "lf_eval: %s", lf_errmsg(ctx));
    return b;
}

bool tu_close(double a, double b, double rtol, double atol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

void tu_expect(const char *what, const lf_buffer *b, const double *want, int64_t n,
               double rtol, double atol) {
    cr_assert_eq(lf_buffer_numel(b), n, "%s: numel %lld, want %lld", what,
                 (long long)lf_buffer_numel(b), (long long)n);
    double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    cr_assert(got != NULL);
    tu_read(b, got);
    for (int64_t i = 0; i < n; i++)
        cr_assert(tu_close(got[i], want[i], rtol, atol), "%s: element %lld is %.17g, want %.17g",
                  what, (long long)i, got[i], want[i]);
    free(got);
}

int tu_dir_entries(const char *dir, bool hidden) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (hidden || e->d_name[0] != '.')) n++;
    closedir(d);
    return n;
}

static int capture_saved_fd = -1;
static char capture_path[64];

void tu_capture_stderr_start(void) {
    fflush(stderr);
    snprintf(capture_path, sizeof capture_path, "/tmp/lf-test-stderr-XXXXXX");
    int fd = mkstemp(capture_path);
    cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
    capture_saved_fd = dup(2);
    cr_assert_geq(capture_saved_fd, 0);
    cr_assert_geq(dup2(fd, 2), 0);
    close(fd);
}

char *tu_capture_stderr_end(void) {
    fflush(stderr);
    dup2(capture_saved_fd, 2);
    close(capture_saved_fd);
    capture_saved_fd = -1;
    FILE *fp = fopen(capture_path, "r");
    cr_assert_not_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    rewind(fp);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    size_t got = fread(s, 1, (size_t)n, fp);
    s[got] = 0;
    fclose(fp);
    unlink(capture_path);
    return s;
}

int tu_count_substr(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) n++;
    return n;
}
