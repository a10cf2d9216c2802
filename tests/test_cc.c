/* tests/test_cc.c: the C compiler as a subprocess (backends/cpu/cc.c) when it
 * misbehaves: hangs, dies with its parent, leaves litter, floods its log.
 *
 * - Timeout: a $CC that never finishes (it starts a background `sleep` and
 *   then execs one) and a 1 s limit: lf_eval fails with LF_ERR_BACKEND within
 *   a few seconds, every process of the compiler's process group is gone, no
 *   temp folder is left, and the context compiles again once $CC works. The
 *   same with the pidfd wait switched off (the waitpid polling fallback), for
 *   a compiler that hangs in `--version` (the probe), and the option /
 *   environment plumbing (default, precedence, rejected values).
 * - Death of the parent: a process hung in a compile is killed with SIGKILL;
 *   the compiler (the pid the fake $CC wrote) dies with it (PDEATHSIG).
 * - Stale temp folders: that killed compile leaves lazyfuse-cc-<pid>-... with
 *   its source; the next process's first compile removes it, and only what
 *   is safe to remove (not a live pid's, not another host's tag, not another
 *   user's, not a symlink, not a plain file).
 * - The log in lf_errmsg: a compiler that prints binary garbage, 10,000
 *   lines and then an error gives a message that is printable, at most
 *   CC_MSG_MAX bytes, holds the first lines and the first error line, and
 *   counts the rest; LF_DEBUG=cc prints the whole log on stderr.
 * - A $TMPDIR without room (issue 26, item 4): full before the first eval
 *   (the probe sees it), full after the probe (k.c cannot be written), and
 *   a compiler that fails because it filled the disk: LF_COMPILE_AUTO runs
 *   the interpreter with one warning naming the folder, REQUIRE fails with
 *   LF_ERR_BACKEND, and the same context compiles again once there is
 *   room. Two ways to fill it: a real 8 MiB tmpfs mounted on $TMPDIR in a
 *   user namespace of the test process (ENOSPC; skipped where unprivileged
 *   user namespaces are off, as in some CI), and always a small
 *   RLIMIT_FSIZE (EFBIG on the same writes, SIGXFSZ ignored), which needs no
 *   privilege.
 * - A compiler that writes an object larger than the disk cache's entry
 *   bound (item 5): a real object padded to 65 MiB (sparse, so it costs
 *   nothing) is refused from its size, in AUTO as in REQUIRE.
 *
 * The test process makes itself a child subreaper, so that the processes a
 * killed compiler leaves behind become its children and are reaped here:
 * "gone" then means kill(pid, 0) == ESRCH even where PID 1 reaps nothing
 * (as in some containers). Waits poll for a condition with a deadline; none
 * sleeps a fixed time and hopes.
 */
#include "backends/cpu/cc.h"
#include "backends/cpu/pool.h"
#include "backends/cpu/unit.h"
#include "codegen/codegen.h"
#include "graph/graph.h"
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static size_t base_bytes;
static char root[128];   /* private folder per test, removed after it */
static char tmpd[192];   /* root/tmp: $TMPDIR, where cc makes its folders */
static char cache[192];  /* root/cache: $LF_CACHE_DIR */
static pid_t group_left; /* a compiler process group to kill in teardown */
static pid_t tmpfs_child; /* holds a tmpfs on tmpd in its namespace (tmpfs_mount) */
static int tmpfs_pipe = -1; /* closing it lets tmpfs_child exit */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void reap_orphans(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

/* Polls until kill(target, 0) fails with ESRCH (target: a pid, or -pgid for
 * a whole group), reaping orphans meanwhile; false after `seconds`. */
static bool gone_within(pid_t target, double seconds) {
    double end = now() + seconds;
    for (;;) {
        reap_orphans();
        if (kill(target, 0) != 0 && errno == ESRCH) return true;
        if (now() > end) return false;
        pause_ms(10);
    }
}

static void setup(void) {
    base_bytes = lf_debug_live_bytes();
    group_left = 0;
    snprintf(root, sizeof root, "/tmp/lf-test-cc-XXXXXX");
    cr_assert_not_null(mkdtemp(root), "mkdtemp: %s", strerror(errno));
    snprintf(tmpd, sizeof tmpd, "%s/tmp", root);
    snprintf(cache, sizeof cache, "%s/cache", root);
    cr_assert_eq(mkdir(tmpd, 0700), 0);
    setenv("TMPDIR", tmpd, 1);
    setenv("LF_CACHE_DIR", cache, 1);
    unsetenv("LF_COMPILE_TIMEOUT");
    unsetenv("LF_DEBUG");
    unsetenv("LF_COMPILE");
    unsetenv("CC");
    /* orphans of killed compilers become our children (see the top comment) */
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
}

static void teardown(void) {
    lf_debug_fail_alloc(0, false);
    if (tmpfs_child > 0) {
        close(tmpfs_pipe);
        kill(tmpfs_child, SIGKILL);
        waitpid(tmpfs_child, NULL, 0);
    }
    tmpfs_child = 0;
    tmpfs_pipe = -1;
    if (group_left > 0) {
        kill(-group_left, SIGKILL);
        gone_within(-group_left, 5);
    }
    reap_orphans();
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cc, .init = setup, .fini = teardown);

static void expect_no_leak(void) {
    cr_assert_eq(lf_debug_live_bytes(), base_bytes, "leaked %zd bytes",
                 (ssize_t)(lf_debug_live_bytes() - base_bytes));
}

/* "<root>/<name>" in a static rotating buffer. */
static const char *in_root(const char *name) {
    static char bufs[4][256];
    static int i;
    char *b = bufs[i++ & 3];
    snprintf(b, 256, "%s/%s", root, name);
    return b;
}

/* Writes a shell script <root>/<name> and sets $CC to run it through sh (so
 * that valgrind's --trace-children-skip, which names sh, leaves it alone).
 * "@ROOT@" in body stands for the test's folder. */
static void fake_cc(const char *name, const char *body) {
    char path[256], text[4096];
    snprintf(path, sizeof path, "%s/%s", root, name);
    size_t k = 0;
    for (const char *p = body; *p && k + 200 < sizeof text;) {
        if (!strncmp(p, "@ROOT@", 6)) {
            k += (size_t)snprintf(text + k, sizeof text - k, "%s", root);
            p += 6;
        } else {
            text[k++] = *p++;
        }
    }
    text[k] = '\0';
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs(text, fp);
    fclose(fp);
    char cc[300];
    snprintf(cc, sizeof cc, "sh %s", path);
    setenv("CC", cc, 1);
}

/* Answers --version (the probe works), writes its pid (= its process group:
 * cc starts the compiler in a group of its own) to <root>/pgid, starts a
 * background sleep in the group and turns into a sleep itself. */
static const char *const HANG =
    "case \"$1\" in --version) echo fake-cc 1.0; exit 0;; esac\n"
    "echo $$ > @ROOT@/pgid.tmp && mv @ROOT@/pgid.tmp @ROOT@/pgid\n"
    "sleep 1000 &\n"
    "exec sleep 1000\n";

/* Waits up to `seconds` for <root>/<name> and returns the pid it holds. */
static pid_t read_pid(const char *name, double seconds) {
    double end = now() + seconds;
    FILE *fp;
    while (!(fp = fopen(in_root(name), "r"))) {
        cr_assert(now() < end, "%s never appeared: the fake compiler did not start", name);
        reap_orphans();
        pause_ms(10);
    }
    long pid = 0;
    cr_assert_eq(fscanf(fp, "%ld", &pid), 1);
    fclose(fp);
    cr_assert_gt(pid, 1);
    return (pid_t)pid;
}

static lf_ctx *cpu_ctx(int compile) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.threads = 1;
    o.compile = compile;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "lf_ctx_new: %s", lf_errmsg(NULL));
    return c;
}

/* Evaluates iota(8) + k into a fresh buffer (k picks the kernel structure:
 * literal constants are part of it); the result checked when LF_OK. */
static lf_status eval_small(lf_ctx *c, int k, lf_eval_stats *stats) {
    lf_graph *g = lf_graph_new(c);
    cr_assert_not_null(g);
    lf_node *y = lf_add(g, lf_iota(g, LF_F64, 8), lf_const(g, LF_F64, k));
    cr_assert_not_null(y, "%s", lf_graph_errmsg(g));
    lf_buffer *b = lf_buffer_new_like(c, y);
    lf_status st = lf_eval(g, 1, &y, &b);
    if (st == LF_OK) {
        double v[8];
        lf_buffer_read(b, v, sizeof v);
        for (int i = 0; i < 8; i++) cr_assert_eq(v[i], i + k, "element %d: %g", i, v[i]);
    }
    if (stats) lf_ctx_last_stats(c, stats);
    lf_buffer_free(b);
    lf_graph_free(g);
    return st;
}

/* ---- item 7: the timeout ------------------------------------------------- */

/* A hanging compile under a 1 s limit: the error, its time, the group gone. */
static void hang_and_time_out(const char *what) {
    fake_cc("hang.sh", HANG);
    setenv("LF_COMPILE_TIMEOUT", "1", 1);
    lf_ctx *c = cpu_ctx(LF_COMPILE_REQUIRE);
    double t0 = now();
    lf_status st = eval_small(c, 1, NULL);
    double dt = now() - t0;
    const char *msg = lf_errmsg(c);
    cr_assert_eq(st, LF_ERR_BACKEND, "%s: %s, want LF_ERR_BACKEND: %s", what, lf_status_name(st), msg);
    cr_assert(strstr(msg, "did not finish within 1 s") && strstr(msg, "killed"), "%s: message: %s", what, msg);
    /* 1 s, then SIGKILL and a reap: "a few seconds" with room for valgrind */
    cr_assert_lt(dt, 10.0, "%s: the eval returned after %.1f s", what, dt);
    pid_t pg = read_pid("pgid", 0);
    group_left = pg;
    cr_assert(gone_within(-pg, 5), "%s: a process of the compiler's group %d is still alive", what, (int)pg);
    group_left = 0;
    cr_assert_eq(tu_dir_entries(tmpd, true), 0, "%s: the compile left something in TMPDIR", what);
    /* the context is fine once the compiler is (with the default limit: the
       real compiler took over 1 s on a loaded CI machine) */
    unsetenv("CC");
    unsetenv("LF_COMPILE_TIMEOUT");
    c->opt.compile_timeout = LF_COMPILE_TIMEOUT_DEFAULT;
    lf_eval_stats s;
    cr_assert_eq(eval_small(c, 1, &s), LF_OK, "%s: after the timeout: %s", what, lf_errmsg(c));
    cr_assert_eq(s.kernels_compiled, 1);
    lf_ctx_destroy(c);
    expect_no_leak();
}

Test(cc, timeout_kills_the_compilers_group, .timeout = 60) {
    hang_and_time_out("pidfd wait");
}

/* The same through the fallback wait (waitpid polling without a pidfd). */
Test(cc, timeout_without_pidfd, .timeout = 60) {
    cc_debug_poll_wait(true);
    hang_and_time_out("waitpid polling");
    cc_debug_poll_wait(false);
}

/* The limit's sources: the option, else LF_COMPILE_TIMEOUT, else 120 s; what
 * lf_ctx_get_options reports; rejected values; and a limit passed to
 * cc_compile directly (0: the default) with a compiler that works. */
Test(cc, timeout_option_and_environment) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    cr_assert_eq(o.compile_timeout, 0);
    o.backend = LF_BACKEND_REFERENCE;
    struct {
        double opt;
        const char *env;
        double want; /* NAN: lf_ctx_new fails */
        const char *frag;
    } cases[] = {
        {0, NULL, LF_COMPILE_TIMEOUT_DEFAULT, NULL},
        {0, "", LF_COMPILE_TIMEOUT_DEFAULT, NULL},
        {0, "7", 7, NULL},
        {0, " 2.5 ", 2.5, NULL},
        {0, "0", LF_COMPILE_TIMEOUT_DEFAULT, NULL},
        {0, "inf", INFINITY, NULL},
        {3, "7", 3, NULL},            /* the option wins */
        {INFINITY, NULL, INFINITY, NULL},
        {0.25, "junk", 0.25, NULL},   /* the environment is not read at all */
        {-1, NULL, NAN, "compile_timeout must be a number of seconds > 0"},
        {NAN, NULL, NAN, "compile_timeout must be a number of seconds > 0"},
        {-INFINITY, NULL, NAN, "compile_timeout"},
        {0, "-5", NAN, "LF_COMPILE_TIMEOUT must be a number of seconds > 0 (0: the default), got '-5'"},
        {0, "nan", NAN, "LF_COMPILE_TIMEOUT"},
        {0, "ten", NAN, "got 'ten'"},
        {0, "10s", NAN, "got '10s'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env) setenv("LF_COMPILE_TIMEOUT", cases[i].env, 1);
        else unsetenv("LF_COMPILE_TIMEOUT");
        o.compile_timeout = cases[i].opt;
        lf_ctx *c = lf_ctx_new(&o);
        if (isnan(cases[i].want)) {
            cr_assert_null(c, "case %zu: lf_ctx_new accepted %g / '%s'", i, cases[i].opt, cases[i].env);
            cr_assert(strstr(lf_errmsg(NULL), cases[i].frag), "case %zu: message: %s", i, lf_errmsg(NULL));
            continue;
        }
        cr_assert_not_null(c, "case %zu: %s", i, lf_errmsg(NULL));
        cr_assert_eq(lf_ctx_get_options(c).compile_timeout, cases[i].want, "case %zu: %g", i,
                     lf_ctx_get_options(c).compile_timeout);
        lf_ctx_destroy(c);
    }
    unsetenv("LF_COMPILE_TIMEOUT");
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    cr_assert_eq(cc_compile("int lf_cc_t(void){return 1;}\n", (const char *const[]){"-fPIC", "-shared", NULL}, NULL,
                            0, &so, &len, &log),
                 0, "%s", log);
    graph_free(so);
    cr_assert_eq(tu_dir_entries(tmpd, true), 0);
    expect_no_leak();
}

/* The compiler hangs in `--version` too: the probe has the same limit. AUTO
 * falls back to the interpreter naming why; REQUIRE is LF_ERR_BACKEND. */
Test(cc, probe_times_out, .timeout = 60) {
    fake_cc("hang-all.sh", "echo $$ > @ROOT@/pgid.tmp && mv @ROOT@/pgid.tmp @ROOT@/pgid\nexec sleep 1000\n");
    setenv("LF_COMPILE_TIMEOUT", "0.5", 1);
    lf_ctx *c = cpu_ctx(LF_COMPILE_REQUIRE);
    double t0 = now();
    lf_status st = eval_small(c, 2, NULL);
    cr_assert_eq(st, LF_ERR_BACKEND, "%s: %s", lf_status_name(st), lf_errmsg(c));
    cr_assert(strstr(lf_errmsg(c), "did not finish within 0.5 s"), "message: %s", lf_errmsg(c));
    cr_assert_lt(now() - t0, 10.0);
    pid_t pg = read_pid("pgid", 0);
    cr_assert(gone_within(pg, 5), "the probed compiler %d is still alive", (int)pg);
    lf_ctx_destroy(c);
    remove(in_root("pgid"));
    c = cpu_ctx(LF_COMPILE_AUTO);
    tu_capture_stderr_start();
    lf_eval_stats s;
    st = eval_small(c, 2, &s);
    char *err = tu_capture_stderr_end();
    cr_assert_eq(st, LF_OK, "AUTO: %s", lf_errmsg(c));
    cr_assert_eq(s.kernels_compiled, 0);
    cr_assert(strstr(err, "did not finish within 0.5 s"), "the fallback warning does not say why: %s", err);
    free(err);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* ---- item 7: the compiler dies with its parent; item 11: its litter ------ */

/* Forks a process that evaluates with the hanging $CC (no time limit of its
 * own: the default 120 s) and returns its pid once the compiler runs. */
static pid_t start_hung_eval(void) {
    fake_cc("hang.sh", HANG);
    fflush(NULL);
    pid_t kid = fork();
    cr_assert_geq(kid, 0, "fork: %s", strerror(errno));
    if (kid == 0) {
        lf_ctx_options o;
        lf_ctx_options_init(&o);
        o.backend = LF_BACKEND_CPU;
        o.compile = LF_COMPILE_REQUIRE;
        lf_ctx *c = lf_ctx_new(&o);
        lf_graph *g = c ? lf_graph_new(c) : NULL;
        lf_node *y = g ? lf_add(g, lf_iota(g, LF_F64, 8), lf_const(g, LF_F64, 3)) : NULL;
        lf_buffer *b = y ? lf_buffer_new_like(c, y) : NULL;
        if (b) lf_eval(g, 1, &y, &b);
        _exit(3); /* not reached while the compiler hangs */
    }
    return kid;
}

/* SIGKILLs kid and returns the compiler's pid once that died too. */
static pid_t kill_hung_eval(pid_t kid) {
    pid_t comp = read_pid("pgid", 20);
    group_left = comp;
    cr_assert_eq(kill(kid, SIGKILL), 0);
    int ws;
    cr_assert_eq(waitpid(kid, &ws, 0), kid);
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "the evaluating process ended otherwise: %d", ws);
    cr_assert(gone_within(comp, 5), "the compiler (pid %d) outlived its parent by 5 s", (int)comp);
    /* the background sleep in its group has no PDEATHSIG (see cc.c) */
    kill(-comp, SIGKILL);
    cr_assert(gone_within(-comp, 5));
    group_left = 0;
    return comp;
}

Test(cc, compiler_dies_with_its_parent, .timeout = 60) {
    kill_hung_eval(start_hung_eval());
}

static void make_dir(const char *path) { cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s: %s", path, strerror(errno)); }

static void make_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    close(fd);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A pid that was alive a moment ago and is dead now. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) _exit(0);
    cr_assert_eq(waitpid(p, NULL, 0), p);
    return p;
}

Test(cc, stale_temp_folders_are_removed, .timeout = 60) {
    pid_t kid = start_hung_eval();
    kill_hung_eval(kid);
    /* the killed process's folder, with the kernel's source */
    char prefix[64], litter[512] = "", tag[64] = "";
    int np = snprintf(prefix, sizeof prefix, "lazyfuse-cc-%d-", (int)kid);
    DIR *d = opendir(tmpd);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, (size_t)np)) {
            snprintf(litter, sizeof litter, "%s/%s", tmpd, e->d_name);
            snprintf(tag, sizeof tag, "%.*s", (int)strcspn(e->d_name + np, "-"), e->d_name + np);
        }
    closedir(d);
    cr_assert(litter[0], "no %s* folder in TMPDIR: the name does not carry the owner's pid", prefix);
    char src[600];
    snprintf(src, sizeof src, "%s/k.c", litter);
    cr_assert(exists(src), "the killed compile's folder has no k.c");

    /* what must go and what must stay, all with names of the same shape */
    pid_t dead = dead_pid();
    char p[12][512];
    snprintf(p[0], 512, "%s/lazyfuse-cc-%d-%s-aaaaaa", tmpd, (int)dead, tag); /* stale: removed */
    snprintf(p[1], 512, "%s/lazyfuse-cc-%d-%s-aaaaaa/sub", tmpd, (int)dead, tag);
    snprintf(p[2], 512, "%s/lazyfuse-cc-%d-%s-aaaaaa/sub/file", tmpd, (int)dead, tag);
    snprintf(p[3], 512, "%s/lazyfuse-cc-%d-zzzzzzzz-bbbbbb", tmpd, (int)dead);  /* other host or pid namespace */
    snprintf(p[4], 512, "%s/lazyfuse-cc-1-%s-cccccc", tmpd, tag);               /* pid 1 is alive */
    snprintf(p[5], 512, "%s/lazyfuse-cc-%d-%s-dddddd", tmpd, (int)getpid(), tag); /* ours, alive */
    snprintf(p[6], 512, "%s/lazyfuse-cc-%d-%s-eeeeee", tmpd, (int)dead, tag);   /* a symlink */
    snprintf(p[7], 512, "%s/target", root);
    snprintf(p[8], 512, "%s/target/precious", root);
    snprintf(p[9], 512, "%s/lazyfuse-cc-%d-%s-ffffff", tmpd, (int)dead, tag);   /* a plain file */
    snprintf(p[10], 512, "%s/lazyfuse-cc-%d-%s-gggggg", tmpd, (int)dead, tag);  /* another user's */
    make_dir(p[0]);
    make_dir(p[1]);
    make_file(p[2]);
    make_dir(p[3]);
    make_dir(p[4]);
    make_dir(p[5]);
    make_dir(p[7]);
    make_file(p[8]);
    cr_assert_eq(symlink(p[7], p[6]), 0);
    make_file(p[9]);
    bool root_user = geteuid() == 0;
    if (root_user) {
        make_dir(p[10]);
        cr_assert_eq(chown(p[10], 4242, 4242), 0, "chown: %s", strerror(errno));
    }

    /* this process's first compile sweeps */
    unsetenv("CC");
    lf_ctx *c = cpu_ctx(LF_COMPILE_REQUIRE);
    cr_assert_eq(eval_small(c, 4, NULL), LF_OK, "%s", lf_errmsg(c));
    lf_ctx_destroy(c);
    cr_assert(!exists(litter), "the killed process's temp folder %s is still there", litter);
    cr_assert(!exists(p[0]), "a dead pid's folder (with a subfolder) is still there");
    cr_assert(exists(p[3]), "a folder of another host's tag was removed");
    cr_assert(exists(p[4]), "a live pid's folder was removed");
    cr_assert(exists(p[5]), "this process's own folder was removed");
    cr_assert(exists(p[6]) && exists(p[8]), "a symlink (or what it points to) was removed");
    cr_assert(exists(p[9]), "a plain file was removed");
    if (root_user) cr_assert(exists(p[10]), "another user's folder was removed");
    else cr_log_warn("not root: the other-user case was not checked");
    expect_no_leak();
}

/* ---- item 14: the compiler's log in lf_errmsg ---------------------------- */

/* 1 line of binary garbage (NUL and an escape sequence included), 1 line
 * with UTF-8 quotes, a CRLF line, 10,000 notes, a line naming the source
 * with its temp folder, then failure: 10,004 lines. */
static const char *const FLOOD =
    "case \"$1\" in --version) echo fake-cc 1.0; exit 0;; esac\n"
    "for a; do case $a in *.c) src=$a;; esac; done\n"
    "printf 'garbage \\001\\002\\033[31m\\377\\376\\000 end\\n'\n"
    "printf 'quoted \\342\\200\\230x\\342\\200\\231\\n'\n"
    "printf 'crlf line\\r\\n'\n"
    "seq 1 10000 | sed 's/^/note: line /'\n"
    "echo \"$src:9:9: error: the one that matters\"\n"
    "exit 1\n";

/* True when s holds only printable ASCII, newlines, tabs and the two UTF-8
 * quotes FLOOD prints; else *bad = the first offending offset. */
static bool printable(const char *s, size_t *bad) {
    for (size_t i = 0; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n' || ch == '\t' || (ch >= 0x20 && ch < 0x7f)) continue;
        if (!strncmp(s + i, "\342\200\230", 3) || !strncmp(s + i, "\342\200\231", 3)) {
            i += 2;
            continue;
        }
        *bad = i;
        return false;
    }
    return true;
}

Test(cc, long_binary_log_is_printable_and_bounded, .timeout = 60) {
    fake_cc("flood.sh", FLOOD);
    lf_ctx *c = cpu_ctx(LF_COMPILE_REQUIRE);
    lf_status st = eval_small(c, 5, NULL);
    const char *msg = lf_errmsg(c);
    cr_assert_eq(st, LF_ERR_BACKEND, "%s: %s", lf_status_name(st), msg);
    size_t bad = 0;
    cr_assert(printable(msg, &bad), "byte %zu of the message is 0x%02x: %s", bad, (unsigned char)msg[bad], msg);
    cr_assert_lt(strlen(msg), (size_t)CC_MSG_MAX + 64, "message of %zu bytes", strlen(msg));
    cr_assert(strstr(msg, "garbage \\x01\\x02\\x1b[31m\\xff\\xfe\\x00 end\n"), "garbage shown as: %s", msg);
    cr_assert(strstr(msg, "quoted \342\200\230x\342\200\231\n"), "UTF-8 was not kept: %s", msg);
    cr_assert(strstr(msg, "crlf line\nnote: line 1\n"), "CR not dropped: %s", msg);
    cr_assert(strstr(msg, "note: line 17\n") && !strstr(msg, "note: line 18\n"), "want the first 20 lines: %s", msg);
    cr_assert(strstr(msg, "k.c:9:9: error: the one that matters"), "the first error line is missing: %s", msg);
    cr_assert_null(strstr(msg, tmpd), "the temp folder leaks into the message: %s", msg);
    cr_assert(strstr(msg, "(9983 more lines; set LF_DEBUG=cc for the full log)"), "the count: %s", msg);
    /* LF_DEBUG=cc: the same message, and the whole log on stderr */
    char *first = strdup(msg);
    setenv("LF_DEBUG", "cc", 1);
    fflush(stderr);
    int saved = dup(2), fd = open(in_root("stderr"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    st = eval_small(c, 5, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("LF_DEBUG");
    cr_assert_eq(st, LF_ERR_BACKEND);
    cr_assert_str_eq(lf_errmsg(c), first);
    /* raw, NUL included (the log as the compiler wrote it); NUL -> '@' to search it */
    off_t n = lseek(fd, 0, SEEK_END);
    char *err = calloc(1, (size_t)n + 1);
    cr_assert_eq(pread(fd, err, (size_t)n, 0), n);
    close(fd);
    cr_assert(memmem(err, (size_t)n, "\001\002\033[31m\377\376\000 end\n", 11), "the garbage is not raw on stderr");
    for (off_t i = 0; i < n; i++)
        if (!err[i]) err[i] = '@';
    cr_assert(strstr(err, "note: line 1\n") && strstr(err, "note: line 5000\n") && strstr(err, "note: line 10000\n") &&
                  strstr(err, "error: the one that matters"),
              "LF_DEBUG=cc did not print the full log (%zu bytes on stderr): %.300s", strlen(err), err);
    free(err);
    free(first);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* ---- issue 26, item 4: no room in $TMPDIR --------------------------------- */

/* One way to take the room away from $TMPDIR and give it back. */
typedef struct room_way {
    const char *name;
    const char *words;       /* what the messages say: "disk full at" */
    void (*fill)(void);
    void (*free)(void);
    const char *fill_cc;     /* a fake $CC body that fails for lack of room */
} room_way;

/* The tmpfs way: a file that takes every byte of the tmpfs on tmpd. */
static void tmpfs_fill(void) {
    char filler[256];
    snprintf(filler, sizeof filler, "%s/filler", tmpd);
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0, "filler: %s", strerror(errno));
    static const char block[65536];
    ssize_t k;
    while ((k = write(fd, block, sizeof block)) > 0) {
    }
    int e = errno;
    while ((k = write(fd, block, 512)) > 0) {
    }
    close(fd);
    cr_assert_eq(e, ENOSPC, "filling the tmpfs ended with %s", strerror(e));
}

static void tmpfs_free(void) {
    char filler[256];
    snprintf(filler, sizeof filler, "%s/filler", tmpd);
    cr_assert_eq(unlink(filler), 0, "%s: %s", filler, strerror(errno));
}

/* Mounts an 8 MiB tmpfs on tmpd in a user and mount namespace of a child
 * process (unshare refuses a process with threads, as a test's is), which
 * holds it until teardown kills it; this process reaches the tmpfs through
 * /proc/<child>/root, and tmpd becomes that path ($TMPDIR too). False where
 * unprivileged user namespaces are off. */
static bool tmpfs_mount(void) {
    char uidmap[64], gidmap[64];
    snprintf(uidmap, sizeof uidmap, "0 %d 1", (int)geteuid());
    snprintf(gidmap, sizeof gidmap, "0 %d 1", (int)getegid());
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* system calls only: the parent has threads */
        close(up[0]);
        close(down[1]);
        char ok = 0;
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
            int fd = open("/proc/self/setgroups", O_WRONLY);
            if (fd >= 0) {
                if (write(fd, "deny", 4) != 4) _exit(1);
                close(fd);
            }
            int u = open("/proc/self/uid_map", O_WRONLY), g = open("/proc/self/gid_map", O_WRONLY);
            ok = u >= 0 && g >= 0 && write(u, uidmap, strlen(uidmap)) > 0 && write(g, gidmap, strlen(gidmap)) > 0 &&
                 mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                 mount("tmpfs", tmpd, "tmpfs", 0, "size=8m,mode=0700") == 0;
        }
        if (write(up[1], &ok, 1) != 1) _exit(1);
        while (read(down[0], &ok, 1) > 0) { /* until the parent goes */
        }
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    char ok = 0;
    ssize_t k = read(up[0], &ok, 1);
    close(up[0]);
    tmpfs_child = pid;
    tmpfs_pipe = down[1];
    if (k != 1 || !ok) return false;
    char path[sizeof tmpd];
    int n = snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, tmpd);
    cr_assert_lt(n, (int)sizeof path);
    memcpy(tmpd, path, sizeof tmpd);
    setenv("TMPDIR", tmpd, 1);
    return true;
}

/* The file size limit way: RLIMIT_FSIZE below the size of any kernel's k.c
 * (the C prelude alone is larger) and of the probe's CC_ROOM, above what
 * the captured stderr needs. */
static struct rlimit fsize_was;

static rlim_t fsize_limit(void) {
    size_t prelude = strlen(cg_dialect_c(false)->prelude) + strlen(cg_prelude_helpers);
    cr_assert_gt(prelude / 2, 4096, "the prelude (%zu bytes) is too short for this test", prelude);
    return (rlim_t)(prelude / 2);
}

static void fsize_fill(void) {
    signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG */
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &fsize_was), 0);
    struct rlimit r = {fsize_limit(), fsize_was.rlim_max};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &r), 0, "setrlimit: %s", strerror(errno));
}

static void fsize_free(void) { cr_assert_eq(setrlimit(RLIMIT_FSIZE, &fsize_was), 0); }

/* Probes fine, then fills the compile's folder ($TMPDIR, set by cc) and
 * fails the way gcc does when as cannot write its output. */
static const char *const FILL_TMPFS =
    "case \"$1\" in --version) echo fake-cc 1.0; exit 0;; esac\n"
    "cat /dev/zero > \"$TMPDIR/ccfill.s\" 2>/dev/null\n"
    "echo 'k.c: fatal error: error writing to ccfill.s: No space left on device'\n"
    "exit 1\n";

/* Probes fine, then dies of its own 4 KiB file size limit (SIGXFSZ), as a
 * compiler under a limit too small for its output does. */
static const char *const FILL_FSIZE =
    "case \"$1\" in --version) echo fake-cc 1.0; exit 0;; esac\n"
    "ulimit -f 8\n"
    "exec head -c 100000 /dev/zero > \"$TMPDIR/ccfill.s\"\n";

/* Evaluates iota(8) + 1 + 1 ... (k times) into a fresh buffer: a kernel
 * structure of its own for each k (a constant's value is not part of a
 * kernel's identity, eval_small's k is). The result checked when LF_OK. */
static lf_status eval_chain(lf_ctx *c, int k, lf_eval_stats *stats) {
    lf_graph *g = lf_graph_new(c);
    cr_assert_not_null(g);
    lf_node *y = lf_iota(g, LF_F64, 8);
    for (int i = 0; i < k; i++) y = lf_add(g, y, lf_const(g, LF_F64, 1));
    cr_assert_not_null(y, "%s", lf_graph_errmsg(g));
    lf_buffer *b = lf_buffer_new_like(c, y);
    lf_status st = lf_eval(g, 1, &y, &b);
    if (st == LF_OK) {
        double v[8];
        lf_buffer_read(b, v, sizeof v);
        for (int i = 0; i < 8; i++) cr_assert_eq(v[i], i + k, "element %d: %g", i, v[i]);
    }
    if (stats) lf_ctx_last_stats(c, stats);
    lf_buffer_free(b);
    lf_graph_free(g);
    return st;
}

/* An eval of structure k expected to run on the interpreter, with the
 * result checked. */
static void expect_fallback(lf_ctx *c, int k, const char *what) {
    lf_eval_stats s;
    lf_status st = eval_chain(c, k, &s);
    cr_assert_eq(st, LF_OK, "%s: %s: %s", what, lf_status_name(st), lf_errmsg(c));
    cr_assert(s.kernels == 1 && s.kernels_compiled == 0 && s.kernels_disk_hits == 0 && s.kernels_memory_hits == 0,
              "%s: kernels %d compiled %d disk %d memory %d: want the interpreter", what, s.kernels,
              s.kernels_compiled, s.kernels_disk_hits, s.kernels_memory_hits);
}

static void expect_compiled(lf_ctx *c, int k, const char *what) {
    lf_eval_stats s;
    lf_status st = eval_chain(c, k, &s);
    cr_assert_eq(st, LF_OK, "%s: %s: %s", what, lf_status_name(st), lf_errmsg(c));
    cr_assert_eq(s.kernels_compiled, 1, "%s: %d kernels compiled, want 1", what, s.kernels_compiled);
}

/* The warning AUTO printed: exactly one, naming the folder and the reason. */
static void expect_warning(const room_way *w, const char *what, const char *also) {
    char *err = tu_capture_stderr_end();
    char at[256];
    snprintf(at, sizeof at, "%s '%s'", w->words, tmpd);
    cr_assert_eq(tu_count_substr(err, "lazyfuse: cannot compile kernels ("), 1, "%s (%s): want one warning, stderr:\n%s",
                 what, w->name, err);
    cr_assert(strstr(err, at) && strstr(err, also) && strstr(err, "schedule interpreter"),
              "%s (%s): the warning lacks \"%s\" or \"%s\":\n%s", what, w->name, at, also, err);
    cr_assert_eq(tu_count_substr(err, "\n"), 1, "%s (%s): the warning is not one line:\n%s", what, w->name, err);
    free(err);
}

static void expect_room_error(lf_ctx *c, int k, const room_way *w, const char *what, const char *also) {
    tu_capture_stderr_start();
    lf_status st = eval_chain(c, k, NULL);
    char *err = tu_capture_stderr_end();
    const char *msg = lf_errmsg(c);
    char at[256];
    snprintf(at, sizeof at, "%s '%s'", w->words, tmpd);
    cr_assert_eq(st, LF_ERR_BACKEND, "%s (%s): %s: %s", what, w->name, lf_status_name(st), msg);
    cr_assert(strstr(msg, at) && strstr(msg, also), "%s (%s): the message lacks \"%s\" or \"%s\": %s", what, w->name,
              at, also, msg);
    cr_assert_eq(err[0], 0, "%s (%s): LF_COMPILE_REQUIRE printed on stderr: %s", what, w->name, err);
    free(err);
}

static void no_room_cases(const room_way *w) {
    /* 1. full before the first eval: the probe sees it */
    lf_ctx *c = cpu_ctx(LF_COMPILE_AUTO);
    w->fill();
    tu_capture_stderr_start();
    expect_fallback(c, 1, "full before the probe");
    expect_fallback(c, 2, "full before the probe, again");
    expect_warning(w, "full before the probe", "no room for a compile");
    w->free();
    expect_compiled(c, 3, "room again, the same context");
    lf_ctx_destroy(c);
    /* 2. full after the probe: k.c cannot be written */
    c = cpu_ctx(LF_COMPILE_AUTO);
    expect_compiled(c, 4, "before the disk fills");
    w->fill();
    tu_capture_stderr_start();
    expect_fallback(c, 5, "full after the probe");
    expect_warning(w, "full after the probe", "cannot write");
    w->free();
    expect_compiled(c, 6, "room again after the probe");
    lf_ctx_destroy(c);
    /* 3. LF_COMPILE_REQUIRE: an error, both ways */
    c = cpu_ctx(LF_COMPILE_REQUIRE);
    w->fill();
    expect_room_error(c, 7, w, "REQUIRE, full before the probe", "cannot compile kernels");
    w->free();
    expect_compiled(c, 8, "REQUIRE, room again");
    w->fill();
    expect_room_error(c, 9, w, "REQUIRE, full after the probe", "compiling kernel");
    w->free();
    lf_ctx_destroy(c);
    /* 4. the compiler itself runs out of room */
    fake_cc("fill.sh", w->fill_cc);
    c = cpu_ctx(LF_COMPILE_AUTO);
    tu_capture_stderr_start();
    expect_fallback(c, 10, "the compiler ran out of room");
    expect_warning(w, "the compiler ran out of room", "C compiler failed");
    lf_ctx_destroy(c);
    c = cpu_ctx(LF_COMPILE_REQUIRE);
    expect_room_error(c, 11, w, "REQUIRE, the compiler ran out of room", "C compiler failed");
    lf_ctx_destroy(c);
    unsetenv("CC");
    c = cpu_ctx(LF_COMPILE_REQUIRE);
    expect_compiled(c, 12, "a working compiler after it");
    lf_ctx_destroy(c);
    cr_assert_eq(tu_dir_entries(tmpd, true), 0, "%s: something was left in TMPDIR", w->name);
    expect_no_leak();
}

Test(cc, no_room_file_size_limit, .timeout = 120) {
    room_way w = {"RLIMIT_FSIZE", "file size limit reached at", fsize_fill, fsize_free, FILL_FSIZE};
    no_room_cases(&w);
}

Test(cc, no_room_full_tmpfs, .timeout = 120) {
    if (!tmpfs_mount()) cr_skip_test("no unprivileged user namespace with a tmpfs here: the RLIMIT_FSIZE test stands in");
    room_way w = {"full tmpfs", "disk full at", tmpfs_fill, tmpfs_free, FILL_TMPFS};
    no_room_cases(&w);
}

/* cc_probe and cc_compile themselves, on a full tmpfs when one can be had,
 * else under the file size limit. */
Test(cc, no_room_is_cc_no_tmp, .timeout = 60) {
    bool tmpfs = tmpfs_mount();
    const char *words = tmpfs ? "disk full at" : "file size limit reached at";
    if (tmpfs) tmpfs_fill();
    else fsize_fill();
    char *v = NULL, *why = NULL;
    cr_assert_eq(cc_probe(0, &v, &why), CC_NO_TMP, "probe: %s", why ? why : "(no message)");
    cr_assert_null(v);
    cr_assert(why && strstr(why, words) && strstr(why, tmpd), "probe: %s", why);
    graph_free(why);
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    static char src[128 * 1024]; /* larger than the limit: k.c cannot be written */
    memset(src, ' ', sizeof src - 1);
    memcpy(src, "int lf_t(void){return 1;}\n", 27);
    cr_assert_eq(cc_compile(src, (const char *const[]){"-fPIC", "-shared", NULL}, NULL, 0, &so, &len, &log), CC_NO_TMP,
                 "compile: %s", log ? log : "?");
    cr_assert(log && strstr(log, words), "compile: %s", log);
    cr_assert_null(so);
    graph_free(log);
    if (tmpfs) tmpfs_free();
    else fsize_free();
    /* a missing $TMPDIR is CC_NO_TMP too; a failing compiler is not */
    setenv("TMPDIR", in_root("no/such/dir"), 1);
    cr_assert_eq(cc_probe(0, &v, &why), CC_NO_TMP, "probe: %s", why ? why : "(no message)");
    graph_free(why);
    setenv("TMPDIR", tmpd, 1);
    setenv("CC", "false", 1);
    cr_assert_eq(cc_probe(0, &v, &why), -1);
    graph_free(why);
    cr_assert_eq(cc_compile("int x;", NULL, NULL, 0, &so, &len, &log), -1);
    cr_assert(log && !strstr(log, "disk full") && !strstr(log, "limit reached"), "compile: %s", log);
    graph_free(log);
    unsetenv("CC");
    expect_no_leak();
}

/* ---- issue 26, item 5: an object larger than the entry bound ------------- */

/* Compiles for real, then pads k.so to 65 MiB (sparse: no disk, no time):
 * a valid object that loads, larger than DISKCACHE_MAX_ENTRY. */
static const char *const HUGE_SO =
    "case \"$1\" in --version) exec cc --version;; esac\n"
    "cc \"$@\" || exit $?\n"
    "o=0; for a; do [ $o = 1 ] && out=$a; o=0; [ \"$a\" = -o ] && o=1; done\n"
    "truncate -s 65M \"$out\"\n";

Test(cc, oversized_object_is_refused, .timeout = 120) {
    fake_cc("huge.sh", HUGE_SO);
    char want[160];
    snprintf(want, sizeof want, "k.so has %llu bytes, more than the %zu a kernel object may have", 65ULL << 20,
             (size_t)DISKCACHE_MAX_ENTRY);
    void *so = (void *)1;
    size_t len = 1;
    char *log = NULL;
    int rc = cc_compile("int lf_t(void){return 1;}\n", (const char *const[]){"-fPIC", "-shared", NULL}, NULL, 0, &so,
                        &len, &log);
    cr_assert_eq(rc, -1, "rc %d: %s", rc, log ? log : "(no message)");
    cr_assert(so == NULL && len == 0);
    cr_assert(log && strstr(log, want), "want \"%s\" in: %s", want, log);
    graph_free(log);
    /* the backend: a compiler failure, in AUTO as in REQUIRE (as for any
       compiler that fails on a kernel), the output untouched */
    for (int mode = 0; mode < 2; mode++) {
        lf_ctx *c = cpu_ctx(mode ? LF_COMPILE_REQUIRE : LF_COMPILE_AUTO);
        lf_graph *g = lf_graph_new(c);
        lf_node *y = lf_add(g, lf_iota(g, LF_F64, 8), lf_const(g, LF_F64, 3));
        lf_buffer *b = lf_buffer_new_like(c, y);
        double v[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, after[8];
        lf_buffer_write(b, v, sizeof v);
        tu_capture_stderr_start();
        lf_status st = lf_eval(g, 1, &y, &b);
        char *err = tu_capture_stderr_end();
        cr_assert_eq(st, LF_ERR_BACKEND, "mode %d: %s: %s", mode, lf_status_name(st), lf_errmsg(c));
        cr_assert(strstr(lf_errmsg(c), "compiling kernel") && strstr(lf_errmsg(c), want), "mode %d: %s", mode,
                  lf_errmsg(c));
        cr_assert_eq(err[0], 0, "mode %d: stderr: %s", mode, err);
        free(err);
        lf_buffer_read(b, after, sizeof after);
        cr_assert(!memcmp(v, after, sizeof v), "mode %d: the output buffer was changed", mode);
        lf_buffer_free(b);
        lf_graph_free(g);
        lf_ctx_destroy(c);
    }
    unsetenv("CC");
    cr_assert_eq(tu_dir_entries(tmpd, true), 0, "the compile left something in TMPDIR");
    expect_no_leak();
}

/* ---- units: several kernels in one translation unit, several units at once ---- */

/* The prelude once; "lf_k_" renamed where an identifier starts with it, and
 * nowhere else (not inside xlf_k_, not lf_kx). */
Test(cc, unit_source_renames_each_kernels_entries) {
    const char *srcs[2] = {"P\n/* k0 */ void lf_k_run(void) { xlf_k_a = lf_kx; lf_k_row(); }\n",
                           "P\nvoid lf_k_pass0(void) {}\n"};
    const char *prefixes[2] = {"lf_aa_", "lf_bb_"};
    char *u = cpu_unit_source(2, 2, srcs, prefixes);
    cr_assert_not_null(u);
    cr_expect_str_eq(u, "P\n/* k0 */ void lf_aa_run(void) { xlf_k_a = lf_kx; lf_aa_row(); }\n"
                        "void lf_bb_pass0(void) {}\n");
    graph_free(u);
    expect_no_leak();
}

/* cc_compile on several threads at once (the pool's, as the CPU backend
 * compiles a program's units): every unit gets its own object or its own
 * error, and no temp folder is left. */
Test(cc, units_compile_at_once, .timeout = 120) {
    enum { N = 4 };
    static const char *const flags[] = {"-O2", "-fPIC", "-shared", NULL};
    cpu_unit u[N];
    memset(u, 0, sizeof u);
    for (int i = 0; i < N; i++)
        u[i].text = graph_strdupf(i == 2 ? "int f%d(void) { return missing_%d; }\n"
                                         : "__attribute__((visibility(\"default\"))) int f%d(void) { return %d; }\n",
                                  i, i);
    cpu_pool *pool = cpu_pool_new(N);
    cr_assert_not_null(pool);
    cpu_units_compile(pool, u, N, flags, NULL, 60);
    cpu_pool_free(pool);
    for (int i = 0; i < N; i++) {
        if (i == 2) {
            cr_expect_eq(u[i].rc, -1);
            cr_expect(u[i].log && strstr(u[i].log, "missing_2"), "unit 2's log: %s", u[i].log ? u[i].log : "(null)");
        } else {
            cr_assert_eq(u[i].rc, 0, "unit %d: %s", i, u[i].log ? u[i].log : "?");
            char *why = NULL, name[8];
            void *h = cc_dlopen_bytes(u[i].so, u[i].len, &why);
            cr_assert_not_null(h, "unit %d: %s", i, why ? why : "?");
            snprintf(name, sizeof name, "f%d", i);
            int (*f)(void);
            void *sym = dlsym(h, name);
            cr_assert_not_null(sym, "unit %d lacks %s", i, name);
            memcpy(&f, &sym, sizeof sym);
            cr_expect_eq(f(), i);
            dlclose(h);
        }
        graph_free(u[i].text);
        graph_free(u[i].so);
        graph_free(u[i].log);
    }
    DIR *d = opendir(tmpd);
    cr_assert_not_null(d);
    int left = 0;
    for (struct dirent *e; (e = readdir(d));) left += !strncmp(e->d_name, "lazyfuse-cc-", 12);
    closedir(d);
    cr_expect_eq(left, 0, "%d temp folders left", left);
    expect_no_leak();
}
