/* tests/test_abi.c: the public structs that grow (lf_ctx_options,
 * lf_eval_stats) cross the library boundary by the caller's size.
 *
 * A program built against an older lazyfuse 1.x header has a smaller struct
 * than the library's. What must stay true, and is checked here: the library
 * reads and writes nothing past the size the caller states (structs are
 * malloc'd at exactly that size, so AddressSanitizer and valgrind see an
 * overrun, and a wider region filled with a sentinel shows any byte
 * written past it); fields inside the size are honoured; a size that cannot
 * be a real lf_ctx_options or lf_eval_stats (0, a pointer's, larger than the
 * library's) is LF_ERR_INVALID with a message saying what to call, and
 * writes nothing. The library's own struct is, today, exactly the 1.0
 * layout (LF_*_SIZE_1_0 == sizeof): the tests are written against the
 * sizes, so they keep checking the same contract once fields are appended.
 */
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xAB

/* Whether bytes [from, to) of p all hold SENTINEL. */
static bool untouched(const void *p, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (((const unsigned char *)p)[i] != SENTINEL) return false;
    return true;
}

/* The message of the last context-less failure contains want. */
static void expect_msg(const char *want) {
    cr_expect(strstr(lf_errmsg(NULL), want) != NULL, "message '%s' lacks '%s'", lf_errmsg(NULL), want);
}

TestSuite(abi);

Test(abi, oldest_options_layout_is_read_within_its_size) {
    /* a caller that knows only the 1.0 layout: exactly that many bytes */
    size_t size = LF_CTX_OPTIONS_SIZE_1_0;
    cr_assert_leq(size, sizeof(lf_ctx_options));
    lf_ctx_options *o = malloc(size);
    cr_assert_not_null(o);
    cr_assert_eq(lf_ctx_options_init_sized(o, size), LF_OK, "%s", lf_errmsg(NULL));
    cr_expect_eq(o->struct_size, size);
    cr_expect_eq(o->backend, LF_BACKEND_AUTO);
    cr_expect_eq(o->fusion, -1);
    cr_expect_eq(o->compile_timeout, 0.0);
    /* every 1.0 field set away from its default is honoured */
    o->backend = LF_BACKEND_REFERENCE;
    o->threads = 3;
    o->fusion = 0;
    o->compile = LF_COMPILE_NEVER;
    o->compile_timeout = 7.5;
    lf_ctx *c = lf_ctx_new(o);
    cr_assert_not_null(c, "%s", lf_errmsg(NULL));
    lf_ctx_options got = lf_ctx_get_options(c);
    cr_expect_eq(got.struct_size, sizeof got);
    cr_expect_eq(got.backend, LF_BACKEND_REFERENCE);
    cr_expect_eq(got.threads, 3);
    cr_expect_eq(got.fusion, 0);
    cr_expect_eq(got.compile, LF_COMPILE_NEVER);
    cr_expect_eq(got.compile_timeout, 7.5);
    /* reading them back into the 1.0-sized struct writes only its bytes */
    cr_expect_eq(lf_ctx_get_options_sized(c, o, size), LF_OK);
    cr_expect_eq(o->struct_size, size);
    cr_expect_eq(o->threads, 3);
    lf_ctx_destroy(c);
    free(o);
}

Test(abi, options_bytes_past_struct_size_are_never_read) {
    /* a 1.0-sized struct inside a larger region whose tail is garbage: the
       tail is where a newer library's fields would be, and must take their
       defaults rather than the garbage */
    unsigned char region[sizeof(lf_ctx_options) + 64];
    memset(region, SENTINEL, sizeof region);
    lf_ctx_options *o = (lf_ctx_options *)(void *)region;
    cr_assert_eq(lf_ctx_options_init_sized(o, LF_CTX_OPTIONS_SIZE_1_0), LF_OK);
    cr_expect(untouched(region, LF_CTX_OPTIONS_SIZE_1_0, sizeof region), "init wrote past the size it was given");
    o->backend = LF_BACKEND_REFERENCE;
    lf_ctx *c = lf_ctx_new(o);
    cr_assert_not_null(c, "%s", lf_errmsg(NULL));
    lf_ctx_destroy(c);
}

Test(abi, options_sizes_that_cannot_be_real_are_refused) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    cr_expect_eq(o.struct_size, sizeof o);
    o.backend = LF_BACKEND_REFERENCE;

    /* = {0} and a struct literal leave struct_size 0 */
    lf_ctx_options zero;
    memset(&zero, 0, sizeof zero);
    cr_expect_null(lf_ctx_new(&zero));
    expect_msg("struct_size is 0");
    expect_msg("lf_ctx_options_init");

    o.struct_size = sizeof(void *); /* the size of a pointer, a common slip */
    cr_expect_null(lf_ctx_new(&o));
    expect_msg("below the smallest lf_ctx_options");

    o.struct_size = sizeof o + 8; /* a program built against a newer header */
    cr_expect_null(lf_ctx_new(&o));
    expect_msg("newer than this library's");

    o.struct_size = sizeof o;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "%s", lf_errmsg(NULL));

    /* init and get_options refuse a size below the 1.0 layout and write nothing */
    unsigned char region[sizeof(lf_ctx_options) + 64];
    memset(region, SENTINEL, sizeof region);
    cr_expect_eq(lf_ctx_options_init_sized((lf_ctx_options *)(void *)region, sizeof(void *)), LF_ERR_INVALID);
    expect_msg("lf_ctx_options_init(&opt)");
    cr_expect_eq(lf_ctx_get_options_sized(c, (lf_ctx_options *)(void *)region, 0), LF_ERR_INVALID);
    cr_expect(untouched(region, 0, sizeof region), "a refused call wrote into the caller's struct");
    cr_expect_eq(lf_ctx_options_init_sized(NULL, sizeof o), LF_ERR_NULL);
    cr_expect_eq(lf_ctx_get_options_sized(NULL, &o, sizeof o), LF_ERR_NULL);
    cr_expect_eq(lf_ctx_get_options_sized(c, NULL, sizeof o), LF_ERR_NULL);

    /* a larger struct (newer header): init fills it, zeros past this
       library's fields, and says so; lf_ctx_new then refuses it */
    memset(region, SENTINEL, sizeof region);
    lf_ctx_options *big = (lf_ctx_options *)(void *)region;
    cr_expect_eq(lf_ctx_options_init_sized(big, sizeof o + 16), LF_ERR_INVALID);
    expect_msg("newer than this library's");
    cr_expect_eq(big->struct_size, sizeof o + 16);
    cr_expect_eq(big->fusion, -1);
    for (size_t i = sizeof o; i < sizeof o + 16; i++) cr_expect_eq(region[i], 0, "byte %zu", i);
    cr_expect(untouched(region, sizeof o + 16, sizeof region), "init wrote past the size it was given");
    cr_expect_null(lf_ctx_new(big));
    /* get_options into a larger struct: this library's fields, then zeros */
    memset(region, SENTINEL, sizeof region);
    cr_expect_eq(lf_ctx_get_options_sized(c, big, sizeof o + 16), LF_OK);
    cr_expect_eq(big->struct_size, sizeof o);
    cr_expect_eq(big->backend, LF_BACKEND_REFERENCE);
    for (size_t i = sizeof o; i < sizeof o + 16; i++) cr_expect_eq(region[i], 0, "byte %zu", i);
    cr_expect(untouched(region, sizeof o + 16, sizeof region), "get_options wrote past the size it was given");

    /* a NULL context: the inline lf_ctx_get_options gives the defaults */
    lf_ctx_options d = lf_ctx_get_options(NULL);
    cr_expect_eq(d.struct_size, sizeof d);
    cr_expect_eq(d.fusion, -1);
    lf_ctx_destroy(c);
}

/* A context on the CPU backend with one eval done (its stats are nonzero). */
static lf_ctx *ctx_with_stats(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.compile = LF_COMPILE_NEVER; /* the schedule interpreter: stats, no compiler */
    o.threads = 1;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "%s", lf_errmsg(NULL));
    lf_graph *g = lf_graph_new(c);
    lf_buffer *xb = tu_buf(c, LF_F64, 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, lf_add(g, x, lf_const(g, LF_F64, 1))), 0, NULL, false);
    lf_buffer *yb = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
    lf_graph_free(g);
    return c;
}

Test(abi, stats_are_written_within_the_callers_size) {
    lf_ctx *c = ctx_with_stats();
    lf_eval_stats full;
    cr_assert_eq(lf_ctx_last_stats(c, &full), LF_OK);
    cr_assert_gt(full.kernels, 0);
    cr_assert_gt(full.bytes_read, 0);

    /* exactly the 1.0 layout's bytes, malloc'd: an overrun is a sanitizer error */
    size_t size = LF_EVAL_STATS_SIZE_1_0;
    lf_eval_stats *s = malloc(size);
    cr_assert_not_null(s);
    cr_assert_eq(lf_ctx_last_stats_sized(c, s, size), LF_OK, "%s", lf_errmsg(c));
    cr_expect_eq(s->kernels, full.kernels);
    cr_expect_eq(s->bytes_read, full.bytes_read);
    cr_expect_eq(s->bytes_staged, full.bytes_staged);
    free(s);

    /* nothing past the stated size; zeros past the library's fields */
    unsigned char region[sizeof(lf_eval_stats) + 64];
    memset(region, SENTINEL, sizeof region);
    cr_assert_eq(lf_ctx_last_stats_sized(c, (lf_eval_stats *)(void *)region, size), LF_OK);
    cr_expect(untouched(region, size, sizeof region), "last_stats wrote past the size it was given");
    memset(region, SENTINEL, sizeof region);
    cr_assert_eq(lf_ctx_last_stats_sized(c, (lf_eval_stats *)(void *)region, sizeof full + 16), LF_OK);
    cr_expect_eq(memcmp(region, &full, sizeof full), 0);
    for (size_t i = sizeof full; i < sizeof full + 16; i++) cr_expect_eq(region[i], 0, "byte %zu", i);
    cr_expect(untouched(region, sizeof full + 16, sizeof region), "last_stats wrote past the size it was given");

    /* a size that cannot be an lf_eval_stats: refused, nothing written */
    memset(region, SENTINEL, sizeof region);
    cr_expect_eq(lf_ctx_last_stats_sized(c, (lf_eval_stats *)(void *)region, sizeof(void *)), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(c), "below the smallest lf_eval_stats") != NULL, "%s", lf_errmsg(c));
    cr_expect_eq(lf_ctx_last_stats_sized(c, (lf_eval_stats *)(void *)region, 0), LF_ERR_INVALID);
    cr_expect(untouched(region, 0, sizeof region), "a refused call wrote into the caller's struct");
    cr_expect_eq(lf_ctx_last_stats_sized(NULL, &full, sizeof full), LF_ERR_NULL);
    cr_expect_eq(lf_ctx_last_stats_sized(c, NULL, sizeof full), LF_ERR_NULL);
    lf_ctx_destroy(c);
}
