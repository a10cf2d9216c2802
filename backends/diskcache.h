/* backends/diskcache.h: the on-disk level of the kernel cache.
 *
 * An entry is the file <dir>/<key>: the payload bytes, then the key itself,
 * then a 56-byte trailer: magic "LFKCACH2", the payload length and the key
 * length (uint64, little-endian), and the SHA-256 of (key length, key,
 * payload). The key (the file's name: a SHA-256 over everything that decides
 * the binary) is inside the entry, so an entry copied over another entry's
 * file is refused, never loaded. Entries are written to a temp file and
 * renamed into place, so readers see a whole old entry, a whole new one, or
 * none; every read is verified, so a torn or tampered file is never returned.
 * Shared by the CPU (shared objects) and CUDA (cubins) backends.
 *
 * Trust. The payload of an entry is code that will run in this process, so
 * the cache is used only where nobody else can write (what ssh and git ask of
 * their files): the folder must be owned by the effective uid and not
 * writable by group or others, and so must each entry. An unsafe folder is
 * neither read nor written; an unsafe entry is not read, and is removed
 * (the folder is ours, so it was planted by root or left from a time the
 * folder was open). Every operation opens the folder, checks it through its
 * fd and works relative to that fd (openat, renameat), so swapping the path
 * after the check gains nothing. The folder's path may contain symlinks
 * (the user's choice); the entries may not (O_NOFOLLOW).
 *
 * Size. No kernel object comes near DISKCACHE_MAX_ENTRY (64 MiB; the largest
 * of the 38 objects the bench cases compile one kernel each is 15.7 KiB, the
 * CPU backend's unit of unfused hypot's 8 kernels, stored under each of
 * their keys, 23 KiB, and fusion caps the size of a kernel's body): a larger
 * file is corrupt, removed without being read, and a larger payload is not
 * stored.
 */
#ifndef LF_DISKCACHE_H
#define LF_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>

#define DISKCACHE_MAGIC "LFKCACH2"
#define DISKCACHE_TRAILER 56 /* magic 8 + payload length 8 + key length 8 + SHA-256 32 */
#define DISKCACHE_MAX_ENTRY ((size_t)64 << 20) /* bytes of a whole entry file */

/* The cache folder: opt_dir when non-NULL and non-empty, else $LF_CACHE_DIR,
 * else $XDG_CACHE_HOME/lazyfuse (only when absolute, as the XDG spec says),
 * else $HOME/.cache/lazyfuse (empty variables count as unset). graph_malloc'd;
 * NULL when none can be formed (no HOME) or out of memory. */
char *diskcache_dir(const char *opt_dir);
/* Whether diskcache_dir(opt_dir) names a folder: when it does, a NULL from
 * diskcache_dir means out of memory (not "no disk level"). */
bool diskcache_dir_expected(const char *opt_dir);

typedef enum {
    DISKCACHE_DIR_OK,       /* private to us: use it */
    DISKCACHE_DIR_UNSAFE,   /* owned by another uid, or writable by group or others */
    DISKCACHE_DIR_UNUSABLE, /* cannot be created or opened */
    DISKCACHE_DIR_NOMEM     /* out of memory */
} diskcache_dir_status;

/* Opens the cache folder for a context: creates it if missing (and its
 * parents, mode 0700), checks that it is private (see Trust), and removes
 * what killed processes left in it: temp files of writers whose pid is dead
 * on this host (backends/procs.h) and lock files nobody holds. UNSAFE and
 * UNUSABLE set *why (graph_malloc'd, naming the folder and the reason; NULL
 * when that allocation failed); why may be NULL. */
diskcache_dir_status diskcache_open(const char *dir, char **why);

typedef enum {
    DISKCACHE_HIT,     /* *data, *len hold the verified payload */
    DISKCACHE_MISS,    /* no entry (or no/unreadable dir, bad key, read error) */
    DISKCACHE_CORRUPT, /* an entry failed a check and was unlinked (best effort) */
    DISKCACHE_NOMEM,   /* out of memory */
    DISKCACHE_UNSAFE_DIR,  /* the folder is not private to us: nothing read */
    DISKCACHE_UNSAFE_ENTRY /* the entry is not private to us: not read, unlinked */
} diskcache_result;

/* Reads entry key of dir and verifies it (a regular file owned by us and not
 * writable by others, 56 <= size <= DISKCACHE_MAX_ENTRY, magic, lengths
 * adding up to the size, the stored key equal to key, SHA-256); the bytes
 * are read only after the size and the key checked. HIT: *data
 * (graph_malloc'd; NULL when len is 0) and *len hold the payload; any other
 * result sets *data = NULL, *len = 0. The UNSAFE results set *why (graph_malloc'd, may
 * be NULL) when why is not NULL. Keys must be non-empty, hold no '/' and not
 * start with '.' (else MISS). Never returns unverified bytes. */
diskcache_result diskcache_get(const char *dir, const char *key, void **data, size_t *len, char **why);

/* Stores payload under key atomically: creates dir (and parents, mode 0700)
 * if missing, checks that it is private, writes payload + key + trailer to a
 * unique temp file in dir (".tmp-<pid>-<host tag>-<counter>-<key>", O_EXCL,
 * mode 0600), then renames it over <dir>/<key>. Returns 0, or -1 with *why
 * (graph_malloc'd message naming the path and the reason; NULL when even
 * that allocation failed; why itself may be NULL) when the key is bad, the
 * dir is unsafe or unwritable, the entry would pass DISKCACHE_MAX_ENTRY etc.;
 * the temp file is removed on failure. Callers treat failure as "no disk
 * cache". */
int diskcache_put(const char *dir, const char *key, const void *data, size_t len, char **why);

/* Removes entry key of dir (an entry that verified but failed to load or
 * bind: the caller rebuilds it). Best effort; nothing for a bad key or an
 * unsafe folder. */
void diskcache_remove(const char *dir, const char *key);

/* Serializes building entry key among processes: takes flock(LOCK_EX) on
 * <dir>/.lock-<key> (created 0600 if missing, never through a symlink, only
 * in a private folder), waiting at most timeout_s (polling with LOCK_NB,
 * 1 ms doubling to 50 ms), so that N processes starting cold compile a
 * kernel once: the first compiles and stores, the others wake, find the
 * entry and load it. Returns the locked fd and sets *path (graph_malloc'd),
 * or -1 with *path NULL when the lock cannot be had in time (a holder
 * stopped, an unwritable folder): the caller then builds the entry without
 * it. The lock dies with its holder (flock), so a killed compile never
 * blocks the others for good. */
int diskcache_lock(const char *dir, const char *key, double timeout_s, char **path);
/* Releases a lock of diskcache_lock: unlinks the lock file (so none is left
 * behind), then closes fd, and frees path. fd < 0 is a no-op. */
void diskcache_unlock(int fd, char *path);

#endif
