/* tests/test_backend.c: the backend interface (graph/backend.h) and the
 * table of backends in backends/driver.c.
 *
 * Each backend a context is made with is the context's ctx->be, with the
 * required entries set and the buffer entries all set or all NULL; a
 * context's backend may be switched between the host backends and gives the
 * same results; a backend not built in fails lf_ctx_new with its message.
 * (The CUDA table entry's buffers and eval run against the fake driver in
 * tests/test_cuda.c.)
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <string.h>

static lf_ctx *make(lf_backend b) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = b;
    lf_ctx *ctx = lf_ctx_new(&o);
    cr_assert(ctx != NULL, "ctx_new(%s): %s", lf_backend_name(b), lf_errmsg(NULL));
    return ctx;
}

static void check_entries(const graph_backend *be) {
    cr_assert(be != NULL);
    cr_expect(be->open && be->device_name, "%s: a required entry is NULL", be->name);
    cr_expect((be->parts && be->ready && !be->eval) || (!be->parts && !be->ready && !be->fall_back && be->eval),
              "%s: exactly one of parts (with ready) and eval is set", be->name);
    bool any = be->buffer_alloc || be->buffer_free || be->buffer_read || be->buffer_write;
    bool all = be->buffer_alloc && be->buffer_free && be->buffer_read && be->buffer_write;
    cr_expect(any == all, "%s: buffer entries are all set or all NULL", be->name);
    cr_expect_str_eq(be->name, lf_backend_name(be->id));
}

Test(backend, host_contexts_have_their_table_entry) {
    lf_backend kinds[] = {LF_BACKEND_CPU, LF_BACKEND_REFERENCE};
    for (int i = 0; i < 2; i++) {
        lf_ctx *ctx = make(kinds[i]);
        check_entries(ctx->be);
        cr_expect_eq(ctx->be->id, kinds[i]);
        cr_expect_eq(lf_ctx_backend(ctx), kinds[i]);
        cr_expect(!graph_ctx_on_device(ctx), "host memory");
        char name[256];
        int len = lf_ctx_device_name(ctx, name, sizeof name);
        cr_expect(len > 0 && strstr(name, "CPU"), "device name '%s'", name);
        lf_ctx_destroy(ctx);
    }
}

Test(backend, auto_resolves_to_an_opened_backend) {
    setenv("LF_QUIET", "1", 1);
    lf_ctx *ctx = make(LF_BACKEND_AUTO);
    check_entries(ctx->be);
    cr_expect_eq(lf_ctx_backend(ctx), ctx->be->id);
    cr_expect_neq(lf_ctx_backend(ctx), LF_BACKEND_AUTO);
    lf_ctx_destroy(ctx);
}

/* A reference context switched to the CPU (as the tests comparing with the
 * oracle do) makes the CPU state on first use; both give the same result
 * and lf_ctx_destroy frees the state of both. */
Test(backend, switching_host_backends_same_result) {
    lf_ctx *ctx = make(LF_BACKEND_REFERENCE);
    int64_t n = 1000;
    double x[1000];
    for (int i = 0; i < n; i++) x[i] = i * 0.01 - 3;
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, &n, x);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_map(g, lf_fn_parse(g, "(x) -> exp(-0.5*x*x) * 0.3989422804014327"), lf_input(g, xb));
    lf_buffer *a = lf_buffer_new_like(ctx, y), *b = lf_buffer_new_like(ctx, y);
    cr_assert_eq(lf_eval(g, 1, &y, &a), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_null(ctx->state[LF_BACKEND_CPU], "the reference needs no CPU state");
    ctx->backend = LF_BACKEND_CPU;
    cr_assert_eq(lf_eval(g, 1, &y, &b), LF_OK, "%s", lf_errmsg(ctx));
    double va[1000], vb[1000];
    tu_read(a, va);
    tu_read(b, vb);
    for (int i = 0; i < n; i++) cr_expect(tu_close(va[i], vb[i], 1e-14, 0), "element %d: %g vs %g", i, va[i], vb[i]);
    cr_expect_not_null(ctx->state[LF_BACKEND_CPU], "the CPU state is made on first use");
    lf_ctx_destroy(ctx); /* the sanitizers and valgrind see the state freed */
}

Test(backend, not_built_in_is_an_error) {
#ifdef LF_WITH_CUDA
    cr_skip_test("the CUDA backend is part of this build");
#else
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CUDA;
    cr_expect_null(lf_ctx_new(&o));
    cr_expect_str_eq(lf_errmsg(NULL),
                     "ctx_new: the cuda backend is not part of this build of lazyfuse (configured with "
                     "-Dcuda=disabled)");
#endif
}
