/* backends/cpu/unit.c: several kernels in one translation unit, several
 * units at once (see unit.h).
 */
#include "backends/cpu/unit.h"

#include "backends/cpu/cc.h"
#include "graph/graph.h"

#include <assert.h>
#include <string.h>

static bool ident_char(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Appends text (n bytes) to out at *at with "lf_k_" renamed to prefix where
 * an identifier starts with it; with out NULL, only counts. */
static size_t put_renamed(char *out, size_t at, const char *text, size_t n, const char *prefix) {
    static const char old[] = "lf_k_";
    size_t pl = strlen(prefix), ol = sizeof old - 1;
    for (size_t i = 0; i < n;) {
        if (n - i >= ol && !memcmp(text + i, old, ol) && (i == 0 || !ident_char(text[i - 1]))) {
            if (out) memcpy(out + at, prefix, pl);
            at += pl;
            i += ol;
        } else {
            if (out) out[at] = text[i];
            at++;
            i++;
        }
    }
    return at;
}

char *cpu_unit_source(size_t prelude_len, int n, const char *const *srcs, const char *const *prefixes) {
    size_t total = prelude_len;
    for (int i = 0; i < n; i++) {
        assert(strlen(srcs[i]) >= prelude_len && !memcmp(srcs[i], srcs[0], prelude_len));
        total = put_renamed(NULL, total, srcs[i] + prelude_len, strlen(srcs[i]) - prelude_len, prefixes[i]);
    }
    char *out = graph_malloc(total + 1);
    if (!out) return NULL;
    memcpy(out, srcs[0], prelude_len);
    size_t at = prelude_len;
    for (int i = 0; i < n; i++)
        at = put_renamed(out, at, srcs[i] + prelude_len, strlen(srcs[i]) - prelude_len, prefixes[i]);
    out[at] = '\0';
    return out;
}

typedef struct units_job {
    cpu_unit *units;
    const char *const *flags, *const *libs;
    double timeout_s;
} units_job;

static void compile_range(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    units_job *j = arg;
    for (int64_t u = begin; u < end; u++) {
        cpu_unit *c = &j->units[u];
        c->rc = cc_compile_with(c->text, c->obj, c->obj_len, j->flags, j->libs, j->timeout_s, &c->so, &c->len, &c->log);
    }
}

void cpu_units_compile(cpu_pool *pool, cpu_unit *units, int n, const char *const *flags,
                       const char *const *libs, double timeout_s) {
    units_job j = {.units = units, .flags = flags, .libs = libs, .timeout_s = timeout_s};
    cpu_pool_run(pool, compile_range, &j, n, 1, 0);
}
