/* backends/kcache.c: the kernel cache both compiled backends share (see
 * backends/kcache.h): source and structural key of a kernel, the in-memory
 * table, and the disk level's reporting around backends/diskcache.c.
 */
#include "backends/kcache.h"

#include "backends/diskcache.h"

#include <string.h>

lf_status kcache_source(lf_ctx *ctx, const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d,
                        int k, const char *what, cg_text *src, char **text, uint64_t *hash) {
    memset(src, 0, sizeof *src);
    cg_emit_kernel(s, lay, d, src);
    *text = src->nomem ? NULL : cg_strip_comments(src->s);
    if (!*text) {
        cg_text_free(src);
        return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory generating %s %d", what, k);
    }
    if (graph_debug_on("source")) fprintf(stderr, "/* ---- lazyfuse %s %d ---- */\n%s\n", what, k, src->s);
    *hash = cg_source_hash(*text);
    return LF_OK;
}

kcache_entry *kcache_find(const kcache *c, uint64_t hash, const char *text) {
    for (kcache_entry *e = c->bucket[hash % KCACHE_BUCKETS]; e; e = e->next)
        if (e->hash == hash && !strcmp(e->text, text)) return e;
    return NULL;
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

lf_status kcache_disk_get(lf_ctx *ctx, const char *dir, const char *key, void **image, size_t *len,
                          bool *hit) {
    *image = NULL;
    *len = 0;
    *hit = false;
    if (!dir) return LF_OK;
    diskcache_result r = diskcache_get(dir, key, image, len);
    if (r == DISKCACHE_NOMEM) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory reading the kernel cache");
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
