/* backends/kcache.h: the kernel cache both compiled backends share.
 *
 * Level 1, in memory, one per context: entries keyed by the structural hash
 * of a kernel's emitted source (backends/program.c's program_emit: the
 * cache only keys on the text, it never calls codegen) without comments (cg_strip_comments, cg_source_hash),
 * confirmed by comparing that text, so a hit touches no file system and two
 * structures that collide on the hash never share a kernel. A backend's entry
 * struct starts with a kcache_entry and adds what it loaded (the CPU backend:
 * a dlopen handle and function pointers; CUDA: a module and its entries).
 * Level 2, on disk: backends/diskcache.c, under a key the backend derives
 * (SHA-256 of the text plus what else decides the binary); these wrappers add
 * the error and LF_DEBUG=cache reporting both backends want.
 *
 * What must stay true: an entry is in the table only once its binary is
 * loaded; kcache_clear hands every entry to the backend's release function
 * before freeing the text and the entry itself.
 */
#ifndef LF_KCACHE_H
#define LF_KCACHE_H

#include "codegen/codegen.h"

enum { KCACHE_BUCKETS = 1024 };

typedef struct kcache_entry {
    uint64_t hash;                 /* cg_source_hash of text */
    char *text;                    /* source without comments (owned) */
    struct kcache_entry *next;     /* bucket chain */
} kcache_entry;

typedef struct kcache {
    kcache_entry *bucket[KCACHE_BUCKETS];
} kcache;

/* Looks a kernel's emitted source src up in c (program_emit made it; the
 * cache never calls codegen): keys it by its text without comments. A hit
 * sets *hit and *out to the cached entry. A miss sets *out to a new zeroed
 * entry of entry_size bytes (the backend's struct, starting with a
 * kcache_entry) holding the key: the backend loads its binary (compiling
 * src), then kcache_add()s it, or kcache_discard()s it on failure. src
 * stays the caller's either way. LF_ERR_NOMEM ("eval: out of memory
 * generating <what> <k>" / "caching <what> <k>") leaves nothing to free.
 * what names the kernel kind: "kernel", "CUDA kernel". */
lf_status kcache_lookup(lf_ctx *ctx, const kcache *c, const char *src, int k, const char *what, size_t entry_size,
                        kcache_entry **out, bool *hit);
/* Adds a looked-up entry whose binary is loaded (the cache owns it now). */
void kcache_add(kcache *c, kcache_entry *e);
/* Frees a looked-up entry that was not added (its text and itself). */
void kcache_discard(kcache_entry *e);
/* Calls release(e, arg) for every entry, then frees its text and e. */
void kcache_clear(kcache *c, void (*release)(kcache_entry *e, void *arg), void *arg);

/* Opens the disk level of a context: *dir (graph_malloc'd, may be NULL) is
 * kept when diskcache_open finds it usable; otherwise it is freed and set to
 * NULL (no disk level, the memory level works as ever), with a warning on
 * stderr once per process when the folder is unsafe (not private to us;
 * LF_QUIET silences it) and a line under LF_DEBUG=cache when it cannot be
 * created. LF_ERR_NOMEM ("eval: out of memory opening the kernel cache"). */
lf_status kcache_disk_open(lf_ctx *ctx, char **dir);
/* Reads entry key of dir (no dir: a miss). Sets *hit and, on a hit, *image
 * and *len (graph_malloc'd). LF_ERR_NOMEM ("eval: out of memory reading the
 * kernel cache") when reading ran out of memory; a corrupt entry is a miss,
 * and so is an unsafe folder or entry, with the warning of kcache_disk_open
 * (an unsafe entry: once per process). */
lf_status kcache_disk_get(lf_ctx *ctx, const char *dir, const char *key, void **image, size_t *len,
                          bool *hit);
/* Writes image under key in dir (no dir: nothing); a failure only costs the
 * disk level and is printed under LF_DEBUG=cache. */
void kcache_disk_put(const char *dir, const char *key, const void *image, size_t len);

#endif /* LF_KCACHE_H */
