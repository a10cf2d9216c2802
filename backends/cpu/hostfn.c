/* backends/cpu/hostfn.c: host functions of user functions (lf_fn_c), for
 * the reference evaluator and the CPU interpreter (graph_fn_eval calls
 * graph_ufn.entry element by element).
 *
 * A user function's host unit is the C dialect's head and the user's body
 * (codegen's cg_emit_ufn_head / cg_emit_ufn_body, the same text the kernels
 * print, under the same "#line 1 \"<name>\""), then an exported entry
 * lf_ufn_entry(fp, args, ret) that converts the lf_scalar arguments to the
 * parameters' C value types, calls the function and stores the result as
 * an lf_scalar. It is compiled with cc_compile and flags that give the
 * kernels' arithmetic (no fast math, -ffp-contract=off; the kernels' other
 * flags change speed, not results), and loaded with cc_dlopen_bytes.
 *
 * What must stay true: a loaded unit stays loaded while its context lives
 * (graph_ufn.entry points into it); the list is keyed by the unit's whole
 * text, so two graphs declaring the same function share one compile.
 */
#include "backends/cpu/hostfn.h"

#include "backends/cpu/cc.h"
#include "codegen/codegen.h"

#include <dlfcn.h>
#include <string.h>

typedef struct hostfn {
    char *text;           /* the unit's source (graph_malloc'd) */
    void *handle;         /* dlopen handle */
    graph_ufn_entry entry;
    struct hostfn *next;
} hostfn;

static const char *const host_flags[] = {"-O2", "-std=c11", "-fPIC", "-shared", "-fno-math-errno",
                                         "-ffp-contract=off", "-fvisibility=hidden", "-w", NULL};
static const char *const host_libs[] = {"-lm", NULL};

/* The host unit of u into t. */
static void host_unit(cg_text *t, const graph_ufn *u) {
    const cg_dialect *d = cg_dialect_c(false);
    cg_printf(t, "/* lazyfuse user function (host) */\n#include <stdint.h>\n#include <math.h>\n");
    if (!u->fp) {
        cg_emit_ufn_head(t, u, d->value_type, "static ");
        cg_emit_ufn_body(t, u, u->c_body);
    }
    /* lf_hv is graph.h's lf_scalar: a value, then a complex's imaginary part */
    cg_printf(t, "typedef struct { union { double f; int64_t i; }; double im; } lf_hv;\n"
                 "__attribute__((visibility(\"default\"))) void lf_ufn_entry(void *fp, const void *args, void *ret) {\n"
                 "    const lf_hv *a = args;\n    lf_hv *r = ret;\n    (void)a;\n");
    if (u->fp) { /* a library function: called through its address */
        cg_printf(t, "    %s (*fn)(", d->value_type[u->ret]);
        for (int k = 0; k < u->nparams; k++) cg_printf(t, "%s%s", k ? ", " : "", d->value_type[u->params[k]]);
        cg_printf(t, "%s) = (%s (*)(", u->nparams ? "" : "void", d->value_type[u->ret]);
        for (int k = 0; k < u->nparams; k++) cg_printf(t, "%s%s", k ? ", " : "", d->value_type[u->params[k]]);
        cg_printf(t, "%s))fp;\n", u->nparams ? "" : "void");
    } else {
        cg_printf(t, "    (void)fp;\n");
    }
    bool fl = graph_dtype_is_float(u->ret);
    cg_printf(t, "    %s %s(", fl ? "r->f = (double)" : u->ret == LF_BOOL ? "r->i = 0 !=" : "r->i = (int64_t)",
              u->fp ? "fn" : u->name);
    for (int k = 0; k < u->nparams; k++)
        cg_printf(t, "%s(%s)a[%d].%c", k ? ", " : "", d->value_type[u->params[k]], k,
                  graph_dtype_is_float(u->params[k]) ? 'f' : 'i');
    cg_printf(t, ");\n}\n");
}

/* Whether a cc_compile log says the compiler ran and rejected the text. */
static bool rejected(const char *log) { return log && !strncmp(log, "C compiler failed (exit status", 30); }

static lf_status hostfn_compile(lf_ctx *ctx, const char *what, graph_ufn *u) {
    cg_text t = {0};
    host_unit(&t, u);
    if (t.nomem) {
        cg_text_free(&t);
        return graph_error(ctx, LF_ERR_NOMEM, "%s: out of memory", what);
    }
    for (hostfn *h = ctx->hostfns; h; h = h->next)
        if (!strcmp(h->text, t.s)) {
            cg_text_free(&t);
            u->entry = h->entry;
            return LF_OK;
        }
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    int rc = cc_compile(t.s, host_flags, host_libs, ctx->opt.compile_timeout, &so, &len, &log);
    if (rc != 0) {
        lf_status st = rc == -1 && rejected(log) ? LF_ERR_COMPILE : LF_ERR_BACKEND;
        graph_error(ctx, st, "%s: %s: %s", what, st == LF_ERR_COMPILE ? "the body does not compile" : "cannot compile",
                    log ? log : "out of memory");
        graph_free(log);
        cg_text_free(&t);
        return st;
    }
    char *why = NULL;
    void *handle = cc_dlopen_bytes(so, len, &why);
    graph_free(so);
    void *sym = handle ? dlsym(handle, "lf_ufn_entry") : NULL;
    hostfn *h = sym ? graph_calloc(1, sizeof *h) : NULL;
    if (!h) {
        lf_status st = graph_error(ctx, handle && sym ? LF_ERR_NOMEM : LF_ERR_BACKEND, "%s: %s%s", what,
                                   handle && sym ? "out of memory" : "loading the host function failed: ",
                                   handle && sym ? "" : why ? why : dlerror());
        if (handle) dlclose(handle);
        graph_free(why);
        cg_text_free(&t);
        return st;
    }
    h->text = t.s; /* kept: the key */
    h->handle = handle;
    *(void **)&h->entry = sym;
    h->next = ctx->hostfns;
    ctx->hostfns = h;
    u->entry = h->entry;
    return LF_OK;
}

static void hostfn_close(lf_ctx *ctx) {
    while (ctx->hostfns) {
        hostfn *h = ctx->hostfns;
        ctx->hostfns = h->next;
        dlclose(h->handle);
        graph_free(h->text);
        graph_free(h);
    }
}

const graph_host_cc cpu_hostcc = {.compile = hostfn_compile, .close = hostfn_close};
