/* backends/kcache.c: the kernel cache both compiled backends share (see
 * backends/kcache.h): a kernel's structural key from its emitted source, the in-memory
 * table, and the disk level's reporting around backends/diskcache.c.
 */
#include "backends/kcache.h"

#include "backends/diskcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lf_status kcache_lookup(lf_ctx *ctx, const kcache *c, const char *src, int k, const char *what, size_t entry_size,
                        kcache_entry **out, bool *hit) {
    *out = NULL;
    *hit = false;
    char *text = cg_strip_comments(src);
    if (!text) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory generating %s %d", what, k);
    uint64_t hash = cg_source_hash(text);
    for (kcache_entry *e = c->bucket[hash % KCACHE_BUCKETS]; e; e = e->next)
        if (e->hash == hash && !strcmp(e->text, text)) {
            graph_free(text);
            *out = e;
            *hit = true;
            return LF_OK;
        }
    kcache_entry *e = graph_calloc(1, entry_size);
    if (!e) {
        graph_free(text);
        return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory caching %s %d", what, k);
    }
    e->hash = hash;
    e->text = text;
    *out = e;
    return LF_OK;
}

void kcache_discard(kcache_entry *e) {
    if (!e) return;
    graph_free(e->text);
    graph_free(e);
}

void kcache_add(kcache *c, kcache_entry *e) {
    kcache_entry **bucket = &c->bucket[e->hash % KCACHE_BUCKETS];
    e->next = *bucket;
    *bucket = e;
}

void kcache_clear(kcache *c, void (*release)(kcache_entry *e, void *arg), void *arg) {
    for (int b = 0; b < KCACHE_BUCKETS; b++) {
        kcache_entry *e = c->bucket[b];
        while (e) {
            kcache_entry *next = e->next;
            release(e, arg);
            graph_free(e->text);
            graph_free(e);
            e = next;
        }
        c->bucket[b] = NULL;
    }
}

/* Prints an unsafe folder's or entry's warning once per process for each
 * kind (folder: 0, entry: 1), unless LF_QUIET is set. */
static void warn_unsafe(int kind, const char *why) {
    static int warned[2];
    if (__atomic_exchange_n(&warned[kind], 1, __ATOMIC_RELAXED) || getenv("LF_QUIET")) return;
    if (kind == 0)
        fprintf(stderr,
                "lazyfuse: %s; not using it: kernels are compiled and kept in memory only (make it private with "
                "chmod go-w, or point LF_CACHE_DIR at a folder of your own)\n",
                why ? why : "the kernel cache folder is not private");
    else
        fprintf(stderr, "lazyfuse: %s; not loading it: removed, the kernel is rebuilt\n",
                why ? why : "a kernel cache entry is not private");
}

lf_status kcache_disk_open(lf_ctx *ctx, char **dir) {
    if (!*dir) return LF_OK;
    char *why = NULL;
    diskcache_dir_status r = diskcache_open(*dir, &why);
    if (r == DISKCACHE_DIR_NOMEM) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory opening the kernel cache");
    if (r == DISKCACHE_DIR_UNSAFE) warn_unsafe(0, why);
    else if (r == DISKCACHE_DIR_UNUSABLE && graph_debug_on("cache"))
        fprintf(stderr, "lazyfuse: no disk kernel cache: %s\n", why ? why : "?");
    graph_free(why);
    if (r != DISKCACHE_DIR_OK) {
        graph_free(*dir);
        *dir = NULL;
    }
    return LF_OK;
}

lf_status kcache_disk_get(lf_ctx *ctx, const char *dir, const char *key, void **image, size_t *len,
                          bool *hit) {
    *image = NULL;
    *len = 0;
    *hit = false;
    if (!dir) return LF_OK;
    char *why = NULL;
    diskcache_result r = diskcache_get(dir, key, image, len, &why);
    if (r == DISKCACHE_NOMEM) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory reading the kernel cache");
    if (r == DISKCACHE_UNSAFE_DIR || r == DISKCACHE_UNSAFE_ENTRY) warn_unsafe(r == DISKCACHE_UNSAFE_ENTRY, why);
    if (r == DISKCACHE_CORRUPT && graph_debug_on("cache"))
        fprintf(stderr, "lazyfuse: kernel cache entry %s/%s is corrupt; removed, rebuilding it\n", dir, key);
    graph_free(why);
    *hit = r == DISKCACHE_HIT;
    return LF_OK;
}

void kcache_disk_put(const char *dir, const char *key, const void *image, size_t len) {
    if (!dir) return;
    char *why = NULL;
    if (diskcache_put(dir, key, image, len, &why) != 0 && graph_debug_on("cache"))
        fprintf(stderr, "lazyfuse: kernel cache not written: %s\n", why ? why : "?");
    graph_free(why);
}
