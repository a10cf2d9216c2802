/* backends/cuda/alloc.c: the caching device allocator of a CUDA context.
 *
 * cuMemAlloc and cuMemFree are slow (cuMemFree also waits for the device), so
 * a freed block is kept in a free list of its size class and handed out again
 * to the next request of that class; an eval that allocates its temporaries
 * each time then costs no driver call. Classes: multiples of 512 bytes up
 * to 1 MiB, then four per power of two (1, 1.25, 1.5, 1.75 x 2^k), so a
 * block is at most 25% larger than asked for.
 *
 * What must stay true: all work of a context is on its one stream, so a
 * block reused at once is touched only by work queued after everything that
 * used it before (stream order); cached memory goes back to the driver only
 * after the stream is synchronized (cuda_mem_trim), which is also what an
 * out-of-memory retry does before trying once more.
 */
#include "backends/cuda/cuda.h"

#include <string.h>

enum {
    SMALL_CLASSES = CUDA_SMALL_LIMIT / CUDA_SMALL_STEP, /* 2048 */
    LARGE_FIRST_LOG = 20,                               /* 1 MiB */
    NBINS = SMALL_CLASSES + 4 * (64 - LARGE_FIRST_LOG)
};

static int log2_floor(size_t x) { return 63 - __builtin_clzll((unsigned long long)x); }

size_t cuda_alloc_class(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes <= CUDA_SMALL_LIMIT) return (bytes + CUDA_SMALL_STEP - 1) / CUDA_SMALL_STEP * CUDA_SMALL_STEP;
    if (bytes > ((size_t)1 << 62)) return 0; /* no device has this much */
    size_t step = (size_t)1 << (log2_floor(bytes) - 2);
    return (bytes + step - 1) / step * step;
}

/* Bin of a class size. */
static int bin_of(size_t cls) {
    if (cls <= CUDA_SMALL_LIMIT) return (int)(cls / CUDA_SMALL_STEP) - 1;
    int k = log2_floor(cls);
    int q = (int)((cls >> (k - 2)) & 3);
    return SMALL_CLASSES + 4 * (k - LARGE_FIRST_LOG) + q;
}

/* The free lists, made on first use. */
static bool bins_ready(cuda_alloc *a) {
    if (a->bins) return true;
    a->bins = graph_calloc(NBINS, sizeof *a->bins);
    if (!a->bins) return false;
    a->nbins = NBINS;
    return true;
}

void cuda_mem_trim(cuda_state *cs) {
    cuda_alloc *a = &cs->alloc;
    if (!a->bins || !a->cached_bytes) return;
    cs->drv.StreamSynchronize(cs->stream);
    for (int b = 0; b < a->nbins; b++) {
        cuda_block *k = a->bins[b];
        while (k) {
            cuda_block *next = k->next;
            cs->drv.MemFree(k->addr);
            graph_free(k);
            k = next;
        }
        a->bins[b] = NULL;
    }
    a->cached_bytes = 0;
}

CUresult cuda_mem_alloc(cuda_state *cs, size_t bytes, bool zero, CUdeviceptr *addr, bool *host_nomem) {
    cuda_alloc *a = &cs->alloc;
    *addr = 0;
    *host_nomem = false;
    size_t cls = cuda_alloc_class(bytes);
    if (!cls) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!bins_ready(a)) {
        *host_nomem = true;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    int b = bin_of(cls);
    CUdeviceptr p = 0;
    if (a->bins[b]) {
        cuda_block *k = a->bins[b];
        a->bins[b] = k->next;
        p = k->addr;
        graph_free(k);
        a->cached_bytes -= cls;
        a->reuses++;
    } else {
        CUresult r = cs->drv.MemAlloc(&p, cls);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && a->cached_bytes) {
            cuda_mem_trim(cs);
            r = cs->drv.MemAlloc(&p, cls);
        }
        if (r != CUDA_SUCCESS) return r;
        a->driver_allocs++;
    }
    a->used_bytes += cls;
    if (zero) {
        CUresult r = cs->drv.MemsetD8Async(p, 0, bytes, cs->stream);
        if (r != CUDA_SUCCESS) {
            cuda_mem_free(cs, p, bytes);
            return r;
        }
    }
    *addr = p;
    return CUDA_SUCCESS;
}

void cuda_mem_free(cuda_state *cs, CUdeviceptr addr, size_t bytes) {
    if (!addr) return;
    cuda_alloc *a = &cs->alloc;
    size_t cls = cuda_alloc_class(bytes);
    a->used_bytes -= cls;
    cuda_block *k = a->bins ? graph_malloc(sizeof *k) : NULL;
    if (!k) { /* no memory to remember it: give it back to the driver */
        cs->drv.StreamSynchronize(cs->stream);
        cs->drv.MemFree(addr);
        return;
    }
    int b = bin_of(cls);
    k->addr = addr;
    k->next = a->bins[b];
    a->bins[b] = k;
    a->cached_bytes += cls;
}
