/* graph/ufn.c: user functions written in C (lf_fn_c, lf_fn_c_cuda).
 *
 * A user function is a graph_ufn (its name, signature and bodies) and an fn
 * of one expression, EXPR_CALL, over its parameters: fusion composes it like
 * any fn, codegen prints its definition into each kernel that calls it
 * (cg_emit_ufn_defs), and the reference evaluator and the interpreter call
 * its host function (graph_ufn.entry) from graph_fn_eval. graph/ compiles
 * nothing itself: the context's hostcc (set by backends/driver.c, the CPU
 * backend's compiler) makes the host function when the fn is declared.
 *
 * What must stay true: a ufn never changes after lf_fn_c returned it (fns,
 * kernels and programs point at it); names are unique in a graph (a kernel
 * unit's #ifndef guard is by name), so a second declaration of a name with
 * another signature or body is refused, and the same one returns a new fn
 * over the same ufn; every check happens before anything is allocated.
 */
#include "graph/graph.h"

#include <ctype.h>
#include <dlfcn.h>
#include <string.h>

/* The dtypes a signature may name (those with one plain C value type). */
static bool ufn_dtype_ok(lf_dtype t) {
    return t == LF_BOOL || t == LF_I32 || t == LF_I64 || t == LF_F32 || t == LF_F64;
}

static const char *skip_blanks(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    return s;
}

/* Reads an identifier at s into out (cap bytes); returns its end, or s when
 * there is none or it does not fit. */
static const char *read_ident(const char *s, char *out, size_t cap) {
    size_t n = 0;
    if (!(isalpha((unsigned char)*s) || *s == '_')) return s;
    while (isalnum((unsigned char)s[n]) || s[n] == '_') n++;
    if (n >= cap) return s;
    memcpy(out, s, n);
    out[n] = 0;
    return s + n;
}

/* The dtype named `word`, or LF_NDTYPES. */
static lf_dtype dtype_named(const char *word) {
    for (int t = 0; t < LF_NDTYPES; t++)
        if (!strcmp(lf_dtype_name((lf_dtype)t), word)) return (lf_dtype)t;
    return LF_NDTYPES;
}

/* Words a parameter may not be called (C keywords a body would misread, and
 * the types of the heads). */
static bool reserved_word(const char *w) {
    static const char *const words[] = {
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
        "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
        "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
        "volatile", "while", "bool", "true", "false", "int32_t", "int64_t", NULL};
    for (int i = 0; words[i]; i++)
        if (!strcmp(words[i], w)) return true;
    return !strncmp(w, "lf_", 3) || !strncmp(w, "LF_", 3) || w[0] == '_';
}

/* Parses "RET(T a, T b)" into u; on a problem writes the reason into why. */
static bool parse_signature(const char *sig, graph_ufn *u, char *why, size_t cap) {
    char word[64];
    const char *s = skip_blanks(sig), *e = read_ident(s, word, sizeof word);
    if (e == s) return snprintf(why, cap, "expected a result dtype at offset %d", (int)(s - sig)), false;
    if ((u->ret = dtype_named(word)) == LF_NDTYPES || !ufn_dtype_ok(u->ret))
        return snprintf(why, cap, "'%s' is not a dtype a user function may return (bool, i32, i64, f32, f64)", word), false;
    s = skip_blanks(e);
    if (*s != '(') return snprintf(why, cap, "expected '(' after the result dtype at offset %d", (int)(s - sig)), false;
    s = skip_blanks(s + 1);
    u->nparams = 0;
    if (*s != ')')
        for (;;) {
            if (u->nparams == GRAPH_UFN_MAX_PARAMS)
                return snprintf(why, cap, "more than %d parameters", GRAPH_UFN_MAX_PARAMS), false;
            int k = u->nparams++;
            e = read_ident(s, word, sizeof word);
            if (e == s) return snprintf(why, cap, "expected the dtype of parameter %d at offset %d", k + 1, (int)(s - sig)), false;
            if ((u->params[k] = dtype_named(word)) == LF_NDTYPES || !ufn_dtype_ok(u->params[k]))
                return snprintf(why, cap, "parameter %d: '%s' is not a dtype a user function may take (bool, i32, i64, f32, f64)", k + 1, word), false;
            s = skip_blanks(e);
            snprintf(u->pnames[k], sizeof u->pnames[k], "p%d", k);
            if (*s != ',' && *s != ')') {
                e = read_ident(s, word, sizeof word);
                if (e == s) return snprintf(why, cap, "parameter %d: expected a name, ',' or ')' at offset %d", k + 1, (int)(s - sig)), false;
                if (reserved_word(word))
                    return snprintf(why, cap, "parameter %d: '%s' is reserved (a C keyword or type, or starts with lf_, LF_ or _)", k + 1, word), false;
                for (int j = 0; j < k; j++)
                    if (!strcmp(u->pnames[j], word)) return snprintf(why, cap, "parameter %d: '%s' names two parameters", k + 1, word), false;
                strcpy(u->pnames[k], word);
                s = skip_blanks(e);
            }
            if (*s == ')') break;
            if (*s != ',') return snprintf(why, cap, "expected ',' or ')' at offset %d", (int)(s - sig)), false;
            s = skip_blanks(s + 1);
        }
    s = skip_blanks(s + 1);
    if (*s) return snprintf(why, cap, "unexpected text after ')' at offset %d", (int)(s - sig)), false;
    /* unnamed parameters are p0..p2: a named one may not take such a name */
    for (int k = 0; k < u->nparams; k++)
        for (int j = 0; j < u->nparams; j++)
            if (j != k && !strcmp(u->pnames[j], u->pnames[k]))
                return snprintf(why, cap, "parameter %d: '%s' names two parameters", j + 1, u->pnames[j]), false;
    return true;
}

static bool same_ufn(const graph_ufn *a, const graph_ufn *b) {
    if (a->ret != b->ret || a->nparams != b->nparams || strcmp(a->c_body, b->c_body) ||
        strcmp(a->cuda_body, b->cuda_body) || (a->fp != b->fp))
        return false;
    for (int k = 0; k < a->nparams; k++)
        if (a->params[k] != b->params[k] || strcmp(a->pnames[k], b->pnames[k])) return false;
    return true;
}

/* The fn name(p0, ..) over ufn u. */
static lf_fn *call_fn(lf_graph *g, const graph_ufn *u) {
    const char *names[GRAPH_UFN_MAX_PARAMS];
    for (int k = 0; k < u->nparams; k++) names[k] = u->pnames[k];
    lf_fn *f = graph_fn_create(g, u->nparams, names);
    if (!f) return NULL;
    fn_expr e = graph_fn_blank_expr(EXPR_CALL);
    e.call = u;
    for (int k = 0; k < u->nparams; k++)
        if ((e.arg[k] = lf_fn_param(f, k)) < 0) return NULL;
    return lf_fn_set_result(f, graph_fn_add(f, &e)) == LF_OK ? f : NULL;
}

static void ufn_free(graph_ufn *u) {
    if (!u) return;
    if (u->lib) dlclose(u->lib);
    graph_free(u->c_body);
    graph_free(u->cuda_body);
    graph_free(u);
}

void graph_ufns_destroy(lf_graph *g) {
    while (g->ufns) {
        graph_ufn *u = g->ufns;
        g->ufns = u->next;
        ufn_free(u);
    }
}

/* graph_ufn_declare; *took says whether the new ufn took lib. */
static lf_fn *declare(lf_graph *g, const char *what, const char *name, const char *signature, const char *c_body,
                      const char *cuda_body, void *fp, void *lib, bool *took) {
    if (!graph_check_args(g, what, 0, NULL)) return NULL;
    if (!name || !signature || (!fp && !c_body)) {
        graph_fail(g, LF_ERR_NULL, "%s: %s is NULL", what, !name ? "name" : !signature ? "signature" : "c_source");
        return NULL;
    }
    graph_ufn tmp;
    memset(&tmp, 0, sizeof tmp);
    const char *e = read_ident(name, tmp.name, sizeof tmp.name);
    if (e == name || *e || reserved_word(tmp.name)) {
        graph_fail(g, LF_ERR_INVALID,
                   "%s: name '%.80s' is not a C identifier of at most 63 bytes that is not reserved (a C keyword "
                   "or type, or starting with lf_, LF_ or _)", what, name);
        return NULL;
    }
    char why[200];
    if (!parse_signature(signature, &tmp, why, sizeof why)) {
        graph_fail(g, LF_ERR_INVALID, "%s '%s': bad signature \"%.80s\": %s", what, tmp.name, signature, why);
        return NULL;
    }
    for (int k = 0; k < tmp.nparams; k++)
        if (!strcmp(tmp.pnames[k], tmp.name)) {
            graph_fail(g, LF_ERR_INVALID, "%s '%s': parameter %d has the function's name", what, tmp.name, k + 1);
            return NULL;
        }
    tmp.fp = fp;
    const char *cb = c_body ? c_body : "", *ub = cuda_body ? cuda_body : cb;
    for (graph_ufn *o = g->ufns; o; o = o->next) {
        if (strcmp(o->name, tmp.name)) continue;
        tmp.c_body = (char *)cb;
        tmp.cuda_body = (char *)ub;
        if (!same_ufn(o, &tmp)) {
            graph_fail(g, LF_ERR_INVALID, "%s '%s': another user function of this graph has that name", what, tmp.name);
            return NULL;
        }
        return call_fn(g, o);
    }
    graph_ufn *u = graph_malloc(sizeof *u);
    if (!u) goto nomem;
    *u = tmp;
    u->c_body = graph_strdup(cb);
    u->cuda_body = graph_strdup(ub);
    if (!u->c_body || !u->cuda_body) {
        ufn_free(u);
        goto nomem;
    }
    lf_ctx *ctx = g->ctx;
    if (!ctx->hostcc) {
        ufn_free(u);
        graph_fail(g, LF_ERR_BACKEND, "%s '%s': this library has no host compiler", what, tmp.name);
        return NULL;
    }
    char w[96];
    snprintf(w, sizeof w, "%s '%s'", what, u->name);
    lf_status st = ctx->hostcc->compile(ctx, w, u);
    if (st != LF_OK) {
        char msg[LF_ERRMSG_CAP];
        snprintf(msg, sizeof msg, "%s", ctx->errmsg); /* graph_fail writes ctx->errmsg */
        ufn_free(u);
        graph_fail(g, st, "%s", msg);
        return NULL;
    }
    u->lib = lib;
    *took = lib != NULL;
    u->next = g->ufns;
    g->ufns = u;
    return call_fn(g, u);
nomem:
    graph_fail(g, LF_ERR_NOMEM, "%s: out of memory", what);
    return NULL;
}

lf_fn *graph_ufn_declare(lf_graph *g, const char *what, const char *name, const char *signature,
                         const char *c_body, const char *cuda_body, void *fp, void *lib) {
    bool took = false;
    lf_fn *f = declare(g, what, name, signature, c_body, cuda_body, fp, lib, &took);
    if (lib && !took) dlclose(lib);
    return f;
}

lf_fn *lf_fn_c(lf_graph *g, const char *name, const char *signature, const char *c_source) {
    return graph_ufn_declare(g, "fn_c", name, signature, c_source, NULL, NULL, NULL);
}

lf_fn *lf_fn_c_cuda(lf_graph *g, const char *name, const char *signature, const char *c_source,
                    const char *cuda_source) {
    return graph_ufn_declare(g, "fn_c_cuda", name, signature, c_source, cuda_source, NULL, NULL);
}

lf_fn *lf_fn_from_library(lf_graph *g, const char *name, const char *signature, const char *path,
                          const char *symbol) {
    if (!graph_check_args(g, "fn_from_library", 0, NULL)) return NULL;
    if (!path || !symbol) {
        graph_fail(g, LF_ERR_NULL, "fn_from_library: %s is NULL", !path ? "path" : "symbol");
        return NULL;
    }
    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        graph_fail(g, LF_ERR_INVALID, "fn_from_library: cannot load '%.200s': %s", path, why ? why : "unknown reason");
        return NULL;
    }
    dlerror();
    void *fp = dlsym(lib, symbol);
    const char *why = dlerror();
    if (!fp || why) {
        graph_fail(g, LF_ERR_INVALID, "fn_from_library: '%.200s' has no function '%.100s'%s%s", path, symbol,
                   why ? ": " : "", why ? why : "");
        dlclose(lib);
        return NULL;
    }
    /* the handle's reference goes to the new ufn, or is dropped */
    return graph_ufn_declare(g, "fn_from_library", name, signature, NULL, NULL, fp, lib);
}
