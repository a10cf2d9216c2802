/* tests/test_dlpack.c: DLPack import and export (graph/dlpack.c) from C,
 * with tensors built by hand against the upstream <dlpack/dlpack.h>.
 *
 * What must hold: an import wraps the tensor's memory (no copy: results of
 * lf_eval land in it) and calls its deleter once when the buffer dies, never
 * when the import fails; dtype, lanes, device, ndim and byte_offset are
 * checked with their messages; an export describes the buffer's own memory,
 * keeps the buffer alive until its deleter runs, and an import of an export
 * round-trips. (tests/dlpack_numpy.py does the same through NumPy.)
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <dlpack/dlpack.h>
#include <string.h>

TU_GRAPH_SUITE(dlpack);

static int deleted;
static void count_delete(DLManagedTensor *t) {
    (void)t;
    deleted++;
}

/* A tensor over data: dtype (code, bits), shape, strides (may be NULL). */
static DLManagedTensor tensor(void *data, uint8_t code, uint8_t bits, int ndim, int64_t *shape, int64_t *strides) {
    DLManagedTensor t;
    memset(&t, 0, sizeof t);
    t.dl_tensor.data = data;
    t.dl_tensor.device.device_type = kDLCPU;
    t.dl_tensor.device.device_id = 0;
    t.dl_tensor.ndim = ndim;
    t.dl_tensor.dtype.code = code;
    t.dl_tensor.dtype.bits = bits;
    t.dl_tensor.dtype.lanes = 1;
    t.dl_tensor.shape = shape;
    t.dl_tensor.strides = strides;
    t.deleter = count_delete;
    return t;
}

Test(dlpack, import_is_in_place_and_deleted_once) {
    static double x[10], y[12];
    int64_t n = 10;
    for (int i = 0; i < 10; i++) x[i] = i;
    for (int i = 0; i < 12; i++) y[i] = -1;
    DLManagedTensor tx = tensor(x, kDLFloat, 64, 1, &n, NULL);
    DLManagedTensor ty = tensor(y, kDLFloat, 64, 1, &n, (int64_t[]){1});
    ty.dl_tensor.byte_offset = 2 * sizeof(double); /* element 0 is y[2] */
    deleted = 0;
    lf_buffer *xb = lf_buffer_from_dlpack(ctx, &tx), *yb = lf_buffer_from_dlpack(ctx, &ty);
    cr_assert(xb && yb, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_buffer_dtype(xb), LF_F64);
    lf_node *out = lf_apply(g, LF_OP_MUL, lf_input(g, xb), lf_const(g, LF_F64, 3.0), NULL);
    cr_assert_eq(lf_eval(g, 1, &out, &yb), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(y[0], -1);
    cr_expect_eq(y[1], -1);
    for (int i = 0; i < 10; i++) cr_expect_eq(y[i + 2], 3.0 * i);
    lf_buffer_free(yb);
    cr_expect_eq(deleted, 1);
    lf_buffer_free(xb);
    cr_expect_eq(deleted, 1, "the graph reads x");
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    cr_expect_eq(deleted, 2);
}

Test(dlpack, import_errors_leave_the_tensor_the_callers) {
    static int64_t mem[16];
    int64_t n = 4;
    deleted = 0;
    cr_expect_null(lf_buffer_from_dlpack(ctx, NULL));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_from_dlpack: tensor is NULL");
    DLManagedTensor t = tensor(mem, kDLUInt, 128, 1, &n, NULL);
    cr_expect_null(lf_buffer_from_dlpack(NULL, &t));
    cr_expect_str_eq(lf_errmsg(NULL), "buffer_from_dlpack: ctx is NULL");
    cr_expect_null(lf_buffer_from_dlpack(ctx, &t));
    cr_expect_str_eq(lf_errmsg(ctx),
                     "buffer_from_dlpack: dtype code 1 (uint), 128 bits, 1 lane is none of lazyfuse's (bool, i32, "
                     "i64, f32, f64, i8, u8, i16, u16, u32, u64, f16, bf16, c64, c128)");
    t = tensor(mem, kDLFloat, 32, 1, &n, NULL);
    t.dl_tensor.dtype.lanes = 4;
    cr_expect_null(lf_buffer_from_dlpack(ctx, &t));
    cr_expect_str_eq(lf_errmsg(ctx),
                     "buffer_from_dlpack: dtype code 2 (float), 32 bits, 4 lanes is none of lazyfuse's (bool, "
                     "i32, i64, f32, f64, i8, u8, i16, u16, u32, u64, f16, bf16, c64, c128)");
    t = tensor(mem, kDLInt, 64, 1, &n, NULL);
    t.dl_tensor.device.device_type = kDLCUDA;
    cr_expect_null(lf_buffer_from_dlpack(ctx, &t));
    char want[300];
    snprintf(want, sizeof want,
             "buffer_from_dlpack: the tensor is on device type 2, device 0; this %s context takes device type 1 "
             "(kDLCPU), device 0",
             lf_backend_name(lf_ctx_backend(ctx)));
    cr_expect_str_eq(lf_errmsg(ctx), want);
    t = tensor(mem, kDLInt, 64, 9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}, NULL);
    cr_expect_null(lf_buffer_from_dlpack(ctx, &t));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_from_dlpack: 9 dimensions (at most 8)");
    t = tensor(mem, kDLInt, 64, 1, &n, NULL);
    t.dl_tensor.byte_offset = 4; /* misaligned element 0 */
    cr_expect_null(lf_buffer_from_dlpack(ctx, &t));
    snprintf(want, sizeof want, "buffer_from_dlpack: data %p is not aligned to 8 bytes (the size of i64)",
             (void *)((char *)mem + 4));
    cr_expect_str_eq(lf_errmsg(ctx), want);
    cr_expect_eq(deleted, 0, "no deleter runs on a failed import");
    /* bool (DLPack 0.8's kDLBool: code 6) and i32 import */
    static unsigned char bits[3] = {1, 0, 1};
    int64_t three = 3;
    t = tensor(bits, 6, 8, 1, &three, NULL);
    lf_buffer *bb = lf_buffer_from_dlpack(ctx, &t);
    cr_assert(bb, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_buffer_dtype(bb), LF_BOOL);
    lf_buffer_free(bb);
    cr_expect_eq(deleted, 1);
}

Test(dlpack, export_describes_own_memory_and_round_trips) {
    int64_t shape[2] = {3, 5};
    double vals[15];
    for (int i = 0; i < 15; i++) vals[i] = i * 0.25;
    lf_buffer *b = tu_buf(ctx, LF_F64, 2, shape, vals);
    DLManagedTensor *t = NULL;
    cr_expect_eq(lf_buffer_to_dlpack(NULL, &t), LF_ERR_NULL);
    cr_expect_str_eq(lf_errmsg(NULL), "buffer_to_dlpack: buffer is NULL");
    cr_expect_eq(lf_buffer_to_dlpack(b, NULL), LF_ERR_NULL);
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_to_dlpack: out is NULL");
    cr_assert_eq(lf_buffer_to_dlpack(b, &t), LF_OK, "%s", lf_errmsg(ctx));
    DLTensor *dl = &t->dl_tensor;
    cr_expect_eq(dl->data, b->data, "the buffer's own memory, no copy");
    cr_expect_eq(dl->byte_offset, 0);
    cr_expect_eq(dl->device.device_type, kDLCPU);
    cr_expect_eq(dl->ndim, 2);
    cr_expect_eq(dl->dtype.code, kDLFloat);
    cr_expect_eq(dl->dtype.bits, 64);
    cr_expect_eq(dl->dtype.lanes, 1);
    cr_expect(dl->shape[0] == 3 && dl->shape[1] == 5);
    cr_expect(dl->strides[0] == 5 && dl->strides[1] == 1);
    lf_buffer_free(b); /* the export keeps it alive */
    cr_expect_eq(((double *)dl->data)[14], 3.5);
    /* the export imported again: the same memory, reading the same values */
    lf_buffer *again = lf_buffer_from_dlpack(ctx, t);
    cr_assert(again, "%s", lf_errmsg(ctx));
    cr_expect_eq(again->data, dl->data);
    tu_expect("round trip", again, vals, 15, 0, 0);
    lf_buffer_free(again); /* calls the export's deleter: the buffer dies */
}

/* A strided import (a column of a row-major matrix) exports with its
 * strides and byte offset. */
Test(dlpack, strided_import_and_export) {
    static float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)i;
    int64_t n = 3;
    DLManagedTensor t = tensor(m, kDLFloat, 32, 1, &n, (int64_t[]){-4});
    t.dl_tensor.byte_offset = 9 * sizeof(float); /* m[9], m[5], m[1] */
    t.deleter = NULL;
    lf_buffer *col = lf_buffer_from_dlpack(ctx, &t);
    cr_assert(col, "%s", lf_errmsg(ctx));
    float got[3];
    cr_assert_eq(lf_buffer_read(col, got, sizeof got), LF_OK);
    cr_expect(got[0] == 9 && got[1] == 5 && got[2] == 1);
    DLManagedTensor *e;
    cr_assert_eq(lf_buffer_to_dlpack(col, &e), LF_OK);
    const float *first = (const float *)((const char *)e->dl_tensor.data + e->dl_tensor.byte_offset);
    cr_expect_eq(first, m + 9);
    cr_expect_eq(e->dl_tensor.strides[0], -4);
    e->deleter(e);
    lf_buffer_free(col); /* before t, on this stack, goes */
}

/* An exported buffer's address never moves: a gather's output (staged behind
 * its index check, and on the compiled CPU backend swapped into an unpinned
 * buffer instead of copied) lands in the tensor's memory; an unexported
 * buffer gets the right values eval after eval either way. */
Test(dlpack, export_pins_the_address_of_an_eval_output) {
    int64_t n = 1000;
    double xv[1000], iv[1000], want[1000];
    for (int i = 0; i < n; i++) xv[i] = i * 0.5, iv[i] = (i * 7 + 3) % n;
    for (int i = 0; i < n; i++) want[i] = xv[(i * 7 + 3) % n];
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_gather(g, lf_input(g, tu_buf(ctx, LF_F64, 1, &n, xv)), 0, lf_input(g, tu_buf(ctx, LF_I64, 1, &n, iv)));
    lf_buffer *pinned = lf_buffer_new(ctx, LF_F64, 1, &n), *own = lf_buffer_new(ctx, LF_F64, 1, &n);
    DLManagedTensor *t = NULL;
    cr_assert_eq(lf_buffer_to_dlpack(pinned, &t), LF_OK, "%s", lf_errmsg(ctx));
    for (int rep = 0; rep < 3; rep++) {
        cr_assert_eq(lf_eval(g, 1, &y, &pinned), LF_OK, "%s", lf_errmsg(ctx));
        cr_expect_eq(t->dl_tensor.data, pinned->data, "an exported buffer's memory moved");
        for (int i = 0; i < n; i++)
            cr_assert_eq(((double *)t->dl_tensor.data)[i], want[i], "rep %d element %d: %g, want %g", rep, i, ((double *)t->dl_tensor.data)[i], want[i]);
        cr_assert_eq(lf_eval(g, 1, &y, &own), LF_OK, "%s", lf_errmsg(ctx));
        tu_expect("own buffer", own, want, n, 0, 0);
    }
    t->deleter(t);
    lf_buffer_free(pinned), lf_buffer_free(own);
    lf_graph_free(g);
}
