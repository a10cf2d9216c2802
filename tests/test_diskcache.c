/* tests/test_diskcache.c: SHA-256, on-disk kernel cache entries, the C
 * compiler runner (backends/sha256.c, backends/diskcache.c, backends/cpu/cc.c).
 *
 * - SHA-256 against the FIPS 180-4 vectors, one million 'a' fed in odd-sized
 *   chunks so every partial-block case is crossed.
 * - Disk cache: folder resolution order, round trips (0 bytes included), every
 *   kind of damage reads as CORRUPT and removes the file, unwritable folders
 *   fail softly, bad keys are refused, concurrent writers leave one whole
 *   entry and no temp files, allocation failures leak nothing.
 * - The compiler: probe (real, failing, missing), compile + load + call, two
 *   kernels loaded at once stay distinct, compile errors carry the log, and
 *   no temp folder survives.
 * Every test starts and ends with the same lf_debug_live_bytes().
 */
#include "backends/cpu/cc.h"
#include "backends/diskcache.h"
#include "backends/procs.h"
#include "backends/sha256.h"
#include "graph/graph.h"
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static size_t base_bytes;
static char tmpdir[256]; /* a private folder per test, removed after it */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

static const char *in_tmp(const char *name);

static void setup(void) {
    base_bytes = lf_debug_live_bytes();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lf-test-diskcache-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void) {
    lf_debug_fail_alloc(0, false);
    chmod(tmpdir, 0700);
    chmod(in_tmp("ro"), 0700); /* read_only_folder's */
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void expect_no_leak(void) {
    cr_assert_eq(lf_debug_live_bytes(), base_bytes, "leaked %zd bytes",
                 (ssize_t)(lf_debug_live_bytes() - base_bytes));
}

/* "<tmpdir>/<name>" in a static rotating buffer. */
static const char *in_tmp(const char *name) {
    static char bufs[4][512];
    static int i;
    char *b = bufs[i++ & 3];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static int count_entries(const char *dir) {
    int n = tu_dir_entries(dir, true);
    cr_assert(n >= 0, "opendir %s: %s", dir, strerror(errno));
    return n;
}

static long file_size(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
    return (long)st.st_size;
}

/* XORs byte at offset off (negative: from the end) of a file with 0x01. */
static void flip_byte(const char *path, long off) {
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    if (off < 0) off += file_size(path);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, off), 1);
    c ^= 1;
    cr_assert_eq(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

static void write_file(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
}

/* ---- SHA-256 -------------------------------------------------------------- */

TestSuite(sha256, .init = setup, .fini = teardown);

static void sha_hex_of(const void *data, size_t len, char hex[65]) {
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, d);
    sha256_hex(d, hex);
}

Test(sha256, fips_vectors) {
    static const struct {
        const char *msg, *want;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        sha_hex_of(v[i].msg, strlen(v[i].msg), hex);
        cr_expect_str_eq(hex, v[i].want, "SHA-256(\"%s\")", v[i].msg);
    }
    sha_hex_of(NULL, 0, hex); /* NULL with 0 bytes is allowed */
    cr_expect_str_eq(hex, v[0].want);
    expect_no_leak();
}

Test(sha256, million_a_in_odd_chunks) {
    static const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    static char a[1000];
    memset(a, 'a', sizeof a);
    /* Chunk sizes cycle through 0..130: below, at and above 64, so the
     * partial buffer fills exactly, overflows and is skipped entirely. */
    sha256_ctx c;
    sha256_init(&c);
    size_t fed = 0, k = 0;
    while (fed < 1000000) {
        size_t n = k++ % 131;
        if (n > 1000000 - fed) n = 1000000 - fed;
        sha256_update(&c, a, n);
        fed += n;
    }
    uint8_t d[32];
    char hex[65];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    cr_expect_str_eq(hex, want);
    /* Lengths around the padding boundary (55, 56, 63, 64 bytes) agree
     * between one call and byte-by-byte feeding. */
    for (size_t len = 50; len <= 130; len++) {
        char one[65], bytes[65];
        sha_hex_of(a, len, one);
        sha256_init(&c);
        for (size_t i = 0; i < len; i++) sha256_update(&c, a + i, 1);
        sha256_final(&c, d);
        sha256_hex(d, bytes);
        cr_expect_str_eq(one, bytes, "length %zu", len);
    }
    sha_hex_of(a, 64, hex); /* one full block of 'a' (known value) */
    cr_expect_str_eq(hex, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    expect_no_leak();
}

/* ---- the folder ----------------------------------------------------------- */

TestSuite(diskcache, .init = setup, .fini = teardown);

static void expect_dir(const char *opt, const char *want) {
    char *d = diskcache_dir(opt);
    if (!want) {
        cr_expect_null(d, "wanted NULL, got '%s'", d ? d : "");
    } else {
        cr_assert_not_null(d, "wanted '%s', got NULL", want);
        cr_expect_str_eq(d, want);
    }
    graph_free(d);
}

Test(diskcache, dir_resolution_order) {
    setenv("LF_CACHE_DIR", "/lf/env", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    expect_dir("/opt/dir", "/opt/dir");
    expect_dir("", "/lf/env");
    expect_dir(NULL, "/lf/env");
    setenv("LF_CACHE_DIR", "", 1);
    expect_dir(NULL, "/xdg/lazyfuse");
    unsetenv("LF_CACHE_DIR");
    expect_dir(NULL, "/xdg/lazyfuse");
    setenv("XDG_CACHE_HOME", "relative/xdg", 1); /* XDG: relative paths are ignored */
    expect_dir(NULL, "/home/u/.cache/lazyfuse");
    setenv("XDG_CACHE_HOME", "", 1);
    expect_dir(NULL, "/home/u/.cache/lazyfuse");
    unsetenv("XDG_CACHE_HOME");
    expect_dir(NULL, "/home/u/.cache/lazyfuse");
    unsetenv("HOME");
    expect_dir(NULL, NULL);
    expect_dir("/still/opt", "/still/opt");
    expect_no_leak();
}

/* ---- round trips ---------------------------------------------------------- */

static void put_ok(const char *dir, const char *key, const void *data, size_t len) {
    char *why = NULL;
    int rc = diskcache_put(dir, key, data, len, &why);
    cr_assert_eq(rc, 0, "put %s/%s: %s", dir, key, why ? why : "(no message)");
    cr_assert_null(why);
}

/* Gets key and checks it equals want[0..n). */
static void get_eq(const char *dir, const char *key, const void *want, size_t n) {
    void *data = (void *)1;
    size_t len = 99;
    diskcache_result r = diskcache_get(dir, key, &data, &len, NULL);
    cr_assert_eq(r, DISKCACHE_HIT, "get %s: result %d", key, r);
    cr_assert_eq(len, n);
    if (n) cr_assert_eq(memcmp(data, want, n), 0, "payload of %s differs", key);
    else cr_assert_null(data);
    graph_free(data);
}

static void get_is(const char *dir, const char *key, diskcache_result want) {
    void *data = (void *)1;
    size_t len = 99;
    diskcache_result r = diskcache_get(dir, key, &data, &len, NULL);
    cr_assert_eq(r, want, "get %s: result %d, wanted %d", key, r, want);
    cr_assert_null(data);
    cr_assert_eq(len, 0);
}

Test(diskcache, round_trip) {
    const char *dir = in_tmp("a/b/c"); /* parents are created */
    unsigned char big[100000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 131 + (i >> 9));
    put_ok(dir, "k1.so", big, sizeof big);
    put_ok(dir, "k0.so", "", 0);
    put_ok(dir, "k3.bin", "xyz", 3);
    get_eq(dir, "k1.so", big, sizeof big);
    get_eq(dir, "k0.so", NULL, 0);
    get_eq(dir, "k3.bin", "xyz", 3);
    cr_expect_eq(file_size(in_tmp("a/b/c/k3.bin")), 3 + 6 + DISKCACHE_TRAILER);
    /* Overwriting replaces the entry. */
    put_ok(dir, "k3.bin", "hello", 5);
    get_eq(dir, "k3.bin", "hello", 5);
    /* The file is as documented: payload, key, then the trailer: magic,
     * little-endian payload and key lengths, SHA-256 of (key length, key,
     * payload). */
    unsigned char f[5 + 6 + DISKCACHE_TRAILER], *t = f + 11;
    int fd = open(in_tmp("a/b/c/k3.bin"), O_RDONLY);
    cr_assert_eq(read(fd, f, sizeof f), (ssize_t)sizeof f);
    close(fd);
    cr_expect_eq(memcmp(f, "hellok3.bin", 11), 0);
    cr_expect_eq(memcmp(t, "LFKCACH2", 8), 0);
    cr_expect_eq(memcmp(t + 8, "\5\0\0\0\0\0\0\0", 8), 0);
    cr_expect_eq(memcmp(t + 16, "\6\0\0\0\0\0\0\0", 8), 0);
    char hex[65], want[65];
    sha256_hex(t + 24, hex);
    sha_hex_of("\6\0\0\0\0\0\0\0k3.binhello", 19, want);
    cr_expect_str_eq(hex, want);
    struct stat st;
    cr_assert_eq(stat(in_tmp("a"), &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700, "created folder mode %o", st.st_mode & 0777);
    cr_expect_eq(count_entries(dir), 3, "temp files left behind");
    expect_no_leak();
}

Test(diskcache, missing_is_miss) {
    get_is(tmpdir, "nope.so", DISKCACHE_MISS);
    get_is(in_tmp("no/such/dir"), "nope.so", DISKCACHE_MISS);
    cr_assert_eq(mkdir(in_tmp("adir.so"), 0700), 0); /* not a regular file */
    get_is(tmpdir, "adir.so", DISKCACHE_MISS);
    cr_expect(exists(in_tmp("adir.so")));
    expect_no_leak();
}

/* ---- damage --------------------------------------------------------------- */

/* Stores a fresh entry, damages it with `how`, expects CORRUPT, the file gone,
 * then MISS. */
static void damaged(const char *what, void (*how)(const char *path)) {
    static const char payload[] = "int lf_kernel(void) { return 42; } /* payload */";
    put_ok(tmpdir, "e.so", payload, sizeof payload);
    get_eq(tmpdir, "e.so", payload, sizeof payload);
    const char *path = in_tmp("e.so");
    how(path);
    void *data = (void *)1;
    size_t len = 99;
    diskcache_result r = diskcache_get(tmpdir, "e.so", &data, &len, NULL);
    cr_assert_eq(r, DISKCACHE_CORRUPT, "%s: result %d", what, r);
    cr_assert_null(data, "%s: data handed out", what);
    cr_assert_eq(len, 0);
    cr_assert(!exists(path), "%s: corrupt file not removed", what);
    get_is(tmpdir, "e.so", DISKCACHE_MISS);
}

static void truncate_one(const char *p) { cr_assert_eq(truncate(p, file_size(p) - 1), 0); }
static void flip_payload(const char *p) { flip_byte(p, 10); }
static void flip_sha(const char *p) { flip_byte(p, -1); }
static void flip_length(const char *p) { flip_byte(p, -DISKCACHE_TRAILER + 8); }
static void flip_magic(const char *p) { flip_byte(p, -DISKCACHE_TRAILER); }
static void too_short(const char *p) { write_file(p, "LFKCACH1\0\0\0\0\0\0\0\0", 16); }
static void empty_file(const char *p) { write_file(p, "", 0); }
static void append_byte(const char *p) {
    int fd = open(p, O_WRONLY | O_APPEND);
    cr_assert_eq(write(fd, "x", 1), 1);
    close(fd);
}

Test(diskcache, damage_is_corrupt_and_removed) {
    damaged("truncated by one byte", truncate_one);
    damaged("flipped payload byte", flip_payload);
    damaged("flipped SHA-256 byte", flip_sha);
    damaged("flipped length byte", flip_length);
    damaged("wrong magic", flip_magic);
    damaged("shorter than the trailer", too_short);
    damaged("empty file", empty_file);
    damaged("a byte appended", append_byte);
    expect_no_leak();
}

/* Files holding exactly a valid-looking trailer and key for a 0-byte payload:
 * one with a wrong checksum, and one with the right one. */
Test(diskcache, trailer_only_files) {
    unsigned char f[4 + DISKCACHE_TRAILER] = "z.soLFKCACH2", *t = f + 4;
    t[16] = 4;
    write_file(in_tmp("z.so"), f, sizeof f); /* SHA all zero: wrong */
    get_is(tmpdir, "z.so", DISKCACHE_CORRUPT);
    cr_expect(!exists(in_tmp("z.so")));
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, "\4\0\0\0\0\0\0\0z.so", 12);
    sha256_final(&c, t + 24);
    write_file(in_tmp("z.so"), f, sizeof f);
    get_eq(tmpdir, "z.so", NULL, 0);
    expect_no_leak();
}

/* Issue 12, item 2: an entry is tied to its name. A valid entry copied over
 * another entry's file (or renamed to another name) is refused and removed,
 * before a byte of its payload is handed out; the original still loads. */
Test(diskcache, entry_under_another_name_is_refused) {
    put_ok(tmpdir, "a.so", "payload of a", 12);
    put_ok(tmpdir, "b.so", "payload of b", 12);
    int in = open(in_tmp("a.so"), O_RDONLY);
    char buf[256];
    ssize_t n = read(in, buf, sizeof buf);
    close(in);
    cr_assert_gt(n, 0);
    write_file(in_tmp("b.so"), buf, (size_t)n); /* cp a.so b.so */
    get_is(tmpdir, "b.so", DISKCACHE_CORRUPT);
    cr_expect(!exists(in_tmp("b.so")), "the misnamed entry was not removed");
    get_eq(tmpdir, "a.so", "payload of a", 12);
    /* a key of the same length and one of another length */
    cr_assert_eq(rename(in_tmp("a.so"), in_tmp("c.so")), 0);
    get_is(tmpdir, "c.so", DISKCACHE_CORRUPT);
    put_ok(tmpdir, "a.so", "payload of a", 12);
    cr_assert_eq(rename(in_tmp("a.so"), in_tmp("longer-name.so")), 0);
    get_is(tmpdir, "longer-name.so", DISKCACHE_CORRUPT);
    expect_no_leak();
}

/* Issue 12, item 4: an entry larger than DISKCACHE_MAX_ENTRY is corrupt and
 * removed without being read (a 1 TiB sparse file once made every eval fail
 * with LF_ERR_NOMEM, a 3 GiB one cost 98 s), and nothing that large is
 * stored. */
Test(diskcache, oversized_entries_are_removed_unread) {
    static const off_t sizes[] = {(off_t)DISKCACHE_MAX_ENTRY + 1, (off_t)3 << 30, (off_t)1 << 40};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        put_ok(tmpdir, "big.so", "small", 5);
        cr_assert_eq(truncate(in_tmp("big.so"), sizes[i]), 0, "truncate to %lld: %s", (long long)sizes[i],
                     strerror(errno));
        size_t live = lf_debug_live_bytes();
        lf_debug_fail_alloc(1, true); /* any allocation would fail: nothing may be read into memory */
        get_is(tmpdir, "big.so", DISKCACHE_CORRUPT);
        lf_debug_fail_alloc(0, false);
        cr_expect_eq(lf_debug_live_bytes(), live);
        cr_expect(!exists(in_tmp("big.so")), "the %lld-byte entry was not removed", (long long)sizes[i]);
    }
    /* at the bound itself: a payload filling the bound exactly is stored
       (64 MiB hashed twice: too slow under valgrind) */
    size_t n = tu_on_valgrind() ? 1000 : DISKCACHE_MAX_ENTRY - DISKCACHE_TRAILER - strlen("max.so");
    unsigned char *big = calloc(1, n + 1);
    cr_assert_not_null(big);
    big[n / 2] = 7;
    if (!tu_on_valgrind()) {
        put_ok(tmpdir, "max.so", big, n);
        get_eq(tmpdir, "max.so", big, n);
    }
    /* one byte more is refused before the data is read */
    char *why = NULL;
    size_t over = DISKCACHE_MAX_ENTRY - DISKCACHE_TRAILER - strlen("max.so") + 1;
    cr_assert_eq(diskcache_put(tmpdir, "max.so", big, over, &why), -1); /* refused before reading big */
    cr_assert_not_null(why);
    cr_expect(strstr(why, "bound"), "message: %s", why);
    graph_free(why);
    free(big);
    get_is(tmpdir, "huge.so", DISKCACHE_MISS);
    expect_no_leak();
}

/* An entry that is a symlink is never followed: removed as corrupt, its
 * target untouched. */
Test(diskcache, symlinked_entry_is_not_followed) {
    put_ok(in_tmp("elsewhere"), "t.so", "target", 6);
    cr_assert_eq(symlink(in_tmp("elsewhere/t.so"), in_tmp("t.so")), 0);
    get_is(tmpdir, "t.so", DISKCACHE_CORRUPT);
    struct stat st;
    cr_expect_neq(lstat(in_tmp("t.so"), &st), 0, "the link was not removed");
    get_eq(in_tmp("elsewhere"), "t.so", "target", 6);
    expect_no_leak();
}

/* ---- unwritable folders, bad keys ----------------------------------------- */

static void put_fails(const char *dir, const char *key, const char *needle) {
    char *why = NULL;
    int rc = diskcache_put(dir, key, "data", 4, &why);
    cr_assert_eq(rc, -1, "put into %s/%s succeeded", dir, key ? key : "(null)");
    cr_assert_not_null(why, "no message");
    cr_expect(strstr(why, needle), "message '%s' does not mention '%s'", why, needle);
    graph_free(why);
}

Test(diskcache, folder_under_a_regular_file) {
    write_file(in_tmp("plain"), "x", 1);
    const char *dir = in_tmp("plain/sub/cache");
    put_fails(dir, "k.so", dir);
    put_fails(in_tmp("plain"), "k.so", in_tmp("plain")); /* the folder is a file */
    get_is(dir, "k.so", DISKCACHE_MISS);
    cr_expect_eq(diskcache_put(dir, "k.so", "data", 4, NULL), -1); /* why may be NULL */
    expect_no_leak();
}

Test(diskcache, failed_rename_removes_temp) {
    cr_assert_eq(mkdir(in_tmp("k.so"), 0700), 0); /* rename() over a full folder fails */
    write_file(in_tmp("k.so/inside"), "x", 1);
    put_fails(tmpdir, "k.so", in_tmp("k.so"));
    cr_expect_eq(count_entries(tmpdir), 1, "temp file left behind");
    get_is(tmpdir, "k.so", DISKCACHE_MISS);
    expect_no_leak();
}

/* A folder the process may read but not write. Root ignores folder
 * permissions (and CI runs as root), so as root the test acts as the user
 * nobody (uid 65534: effective ids only, the saved ids stay 0 and give root
 * back), which owns the folder. */
Test(diskcache, read_only_folder) {
    bool root = geteuid() == 0;
    const char *dir = in_tmp("ro");
    cr_assert_eq(mkdir(dir, 0700), 0);
    if (root) {
        cr_assert_eq(chmod(tmpdir, 0711), 0);
        cr_assert_eq(chown(dir, 65534, 65534), 0, "chown: %s", strerror(errno));
        cr_assert_eq(setegid(65534), 0, "setegid: %s", strerror(errno));
        cr_assert_eq(seteuid(65534), 0, "seteuid: %s", strerror(errno));
    }
    put_ok(dir, "old.so", "old", 3);
    cr_assert_eq(chmod(dir, 0500), 0);
    put_fails(dir, "k.so", dir);
    put_fails(in_tmp("ro/sub"), "k.so", in_tmp("ro/sub"));
    get_is(dir, "k.so", DISKCACHE_MISS);
    get_eq(dir, "old.so", "old", 3);
    cr_expect_eq(count_entries(dir), 1, "temp file left behind");
    if (root) {
        cr_assert_eq(seteuid(0), 0, "seteuid(0): %s", strerror(errno));
        cr_assert_eq(setegid(0), 0, "setegid(0): %s", strerror(errno));
    }
    expect_no_leak();
}

/* A file where the cache folder should be: nothing is stored, nothing
 * loaded, the file is left as it was. */
Test(diskcache, file_where_the_folder_should_be) {
    const char *dir = in_tmp("notadir");
    write_file(dir, "keep", 4);
    put_fails(dir, "k.so", dir);
    put_fails(in_tmp("notadir/sub"), "k.so", in_tmp("notadir/sub"));
    get_is(dir, "k.so", DISKCACHE_MISS);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0);
    cr_expect(S_ISREG(st.st_mode) && st.st_size == 4, "the file was changed");
    expect_no_leak();
}

Test(diskcache, bad_keys_rejected) {
    static const char *bad[] = {"a/b.so", "/abs.so", ".tmp-x", ".", "..", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_fails(tmpdir, bad[i], "key");
        get_is(tmpdir, bad[i], DISKCACHE_MISS);
    }
    put_fails(tmpdir, NULL, "key");
    get_is(tmpdir, NULL, DISKCACHE_MISS);
    cr_expect_eq(count_entries(tmpdir), 0);
    /* A key that would be fine is fine. */
    put_ok(tmpdir, "ok.so", "ok", 2);
    get_eq(tmpdir, "ok.so", "ok", 2);
    /* Valid entries reachable through a bad key are still refused. */
    put_ok(in_tmp("sub"), "x.so", "ok", 2);
    get_is(tmpdir, "sub/x.so", DISKCACHE_MISS);
    cr_assert_eq(rename(in_tmp("ok.so"), in_tmp(".ok.so")), 0);
    get_is(tmpdir, ".ok.so", DISKCACHE_MISS);
    cr_expect(exists(in_tmp(".ok.so")) && exists(in_tmp("sub/x.so")));
    expect_no_leak();
}

/* ---- trust: who may write the folder and the entries (issue 12, item 1) ---- */

/* Expects every operation on dir to refuse it as unsafe, with a message
 * naming it and the reason (needle), and the valid entry "e.so" stored before
 * to be neither read nor removed. */
static void refused_folder(const char *dir, const char *needle) {
    char *why = NULL;
    void *data = NULL;
    size_t len = 0;
    cr_assert_eq(diskcache_get(dir, "e.so", &data, &len, &why), DISKCACHE_UNSAFE_DIR);
    cr_assert_null(data);
    cr_assert_not_null(why);
    cr_expect(strstr(why, dir) && strstr(why, needle), "get's message: %s", why);
    graph_free(why);
    cr_assert_eq(diskcache_open(dir, &why), DISKCACHE_DIR_UNSAFE);
    cr_expect(why && strstr(why, needle), "open's message: %s", why ? why : "(null)");
    graph_free(why);
    put_fails(dir, "new.so", needle);
    cr_expect(!exists(in_tmp("shared/new.so")), "written into an unsafe folder");
    cr_expect_eq(diskcache_lock(dir, "new.so", 0.1, &why), -1, "locked in an unsafe folder");
    cr_expect(!exists(in_tmp("shared/.lock-new.so")));
    diskcache_remove(dir, "e.so");
    cr_expect(exists(in_tmp("shared/e.so")), "removed from an unsafe folder");
}

Test(diskcache, folder_writable_by_others_is_not_used) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", in_tmp("shared")); /* in_tmp's buffers rotate */
    put_ok(dir, "e.so", "planted", 7); /* valid entry, as an attacker could write it */
    static const struct { mode_t mode; const char *needle; } modes[] = {
        {0777, "writable by group and others (mode 0777)"},
        {01777, "writable by group and others (mode 1777)"}, /* sticky, like /tmp: still not ours alone */
        {0720, "writable by its group (mode 0720)"},
        {0702, "writable by others (mode 0702)"},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        cr_assert_eq(chmod(dir, modes[i].mode), 0);
        refused_folder(dir, modes[i].needle);
    }
    cr_assert_eq(chmod(dir, 0755), 0); /* readable by others is fine */
    get_eq(dir, "e.so", "planted", 7);
    cr_assert_eq(diskcache_open(dir, NULL), DISKCACHE_DIR_OK);
    expect_no_leak();
}

Test(diskcache, folder_of_another_user_is_not_used) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", in_tmp("shared")); /* in_tmp's buffers rotate */
    put_ok(dir, "e.so", "planted", 7);
    if (geteuid() != 0) {
        teardown();
        cr_skip_test("chown to another uid needs root");
    }
    cr_assert_eq(chown(dir, 12345, 12345), 0, "chown: %s", strerror(errno));
    refused_folder(dir, "owned by uid 12345");
    /* also through a symlink of ours to it: the folder is what counts */
    cr_assert_eq(symlink(dir, in_tmp("link")), 0);
    cr_assert_eq(diskcache_open(in_tmp("link"), NULL), DISKCACHE_DIR_UNSAFE);
    cr_assert_eq(chown(dir, 0, 0), 0);
    get_eq(dir, "e.so", "planted", 7);
    expect_no_leak();
}

/* An entry of another uid, or one writable by others, in our own folder is
 * not read and is removed (the folder is ours: we may). */
Test(diskcache, entry_not_private_is_removed_unread) {
    put_ok(tmpdir, "w.so", "writable", 8);
    cr_assert_eq(chmod(in_tmp("w.so"), 0622), 0);
    char *why = NULL;
    void *data = NULL;
    size_t len = 0;
    cr_assert_eq(diskcache_get(tmpdir, "w.so", &data, &len, &why), DISKCACHE_UNSAFE_ENTRY);
    cr_assert_null(data);
    cr_expect(why && strstr(why, "w.so") && strstr(why, "writable by"), "message: %s", why ? why : "(null)");
    graph_free(why);
    cr_expect(!exists(in_tmp("w.so")), "the entry was not removed");
    put_ok(tmpdir, "o.so", "owned", 5);
    if (geteuid() != 0) {
        expect_no_leak();
        teardown();
        cr_skip_test("an entry of another uid needs root (the mode case passed)");
    }
    cr_assert_eq(chown(in_tmp("o.so"), 12345, 12345), 0);
    cr_assert_eq(diskcache_get(tmpdir, "o.so", &data, &len, &why), DISKCACHE_UNSAFE_ENTRY);
    cr_expect(why && strstr(why, "owned by uid 12345"), "message: %s", why ? why : "(null)");
    graph_free(why);
    cr_expect(!exists(in_tmp("o.so")), "the entry was not removed");
    put_ok(tmpdir, "o.so", "owned", 5); /* rebuilt: ours again */
    get_eq(tmpdir, "o.so", "owned", 5);
    expect_no_leak();
}

/* ---- leftovers of killed processes (issue 12, item 11) --------------------- */

/* Whether dir holds a file whose name starts with head. */
static bool has_file_starting(const char *dir, const char *head) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    bool found = false;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, head, strlen(head))) found = true;
    closedir(d);
    return found;
}

/* A writer killed with SIGKILL in the middle of diskcache_put leaves its
 * temp file; a lock holder killed so leaves its lock file. The next
 * diskcache_open removes both, and leaves the temp files of live writers,
 * of other hosts, and a lock somebody holds. */
Test(diskcache, open_removes_what_killed_processes_left, .timeout = 120) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", in_tmp("c"));
    put_ok(dir, "keep.so", "keep", 4);
    /* 1. a writer killed mid-write: it writes 32 MiB entries in a loop; we
       kill it as soon as a temp file shows up (again if it happened to
       finish that entry meanwhile) */
    bool left = false;
    for (int attempt = 0; attempt < 5 && !left; attempt++) {
        pid_t w = fork();
        cr_assert_geq(w, 0);
        if (w == 0) {
            size_t n = (size_t)32 << 20;
            char *big = malloc(n);
            if (!big) _exit(3);
            memset(big, 'x', n);
            for (;;) diskcache_put(dir, "w.so", big, n, NULL);
        }
        bool seen = false;
        for (int i = 0; i < 200000 && !seen; i++) {
            seen = has_file_starting(dir, ".tmp-");
            if (!seen) usleep(100);
        }
        kill(w, SIGKILL);
        int status;
        cr_assert_eq(waitpid(w, &status, 0), w);
        cr_assert(seen, "the writer never made a temp file");
        left = has_file_starting(dir, ".tmp-");
    }
    cr_assert(left, "no temp file survived a kill in 5 attempts");
    /* 2. a lock holder killed while holding it */
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t h = fork();
    cr_assert_geq(h, 0);
    if (h == 0) {
        char *path = NULL;
        int fd = diskcache_lock(dir, "l.so", 5, &path);
        char c = fd >= 0 ? 'y' : 'n';
        if (write(pfd[1], &c, 1) != 1) _exit(2);
        for (;;) pause();
    }
    char c = 0;
    cr_assert_eq(read(pfd[0], &c, 1), 1);
    cr_assert_eq(c, 'y', "the child could not lock");
    kill(h, SIGKILL);
    int status;
    cr_assert_eq(waitpid(h, &status, 0), h);
    close(pfd[0]), close(pfd[1]);
    cr_assert(exists(in_tmp("c/.lock-l.so")), "the killed holder left no lock file");
    /* 3. what must stay: our own live temp file, one of another host, a held lock */
    char name[128], live[128], foreign[128];
    snprintf(name, sizeof name, "c/.tmp-%ld-%s-0-x.so", (long)getpid(), procs_host_tag());
    snprintf(live, sizeof live, "%s", in_tmp(name));
    write_file(live, "live", 4);
    snprintf(foreign, sizeof foreign, "%s", in_tmp("c/.tmp-999999-0badc0de-0-x.so"));
    write_file(foreign, "other host", 10);
    char *held_path = NULL;
    int held = diskcache_lock(dir, "held.so", 1, &held_path);
    cr_assert_geq(held, 0);
    cr_assert_eq(diskcache_open(dir, NULL), DISKCACHE_DIR_OK);
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, ".tmp-", 5)) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        cr_expect(!strcmp(p, live) || !strcmp(p, foreign), "a dead writer's temp file was left: %s", e->d_name);
    }
    closedir(d);
    cr_expect(exists(live), "a live writer's temp file was removed");
    cr_expect(exists(foreign), "another host's temp file was removed");
    cr_expect(!exists(in_tmp("c/.lock-l.so")), "the killed holder's lock file was left");
    cr_expect(exists(in_tmp("c/.lock-held.so")), "a held lock was removed");
    diskcache_unlock(held, held_path);
    cr_expect(!exists(in_tmp("c/.lock-held.so")));
    get_eq(dir, "keep.so", "keep", 4);
    expect_no_leak();
}

/* ---- concurrency, allocation failure -------------------------------------- */

enum { WRITERS = 6, ROUNDS = 25, PAYLOAD = 200000 };

static void fill(unsigned char *p, int who) {
    for (size_t i = 0; i < PAYLOAD; i++) p[i] = (unsigned char)(who * 37 + i * 7 + (i >> 11));
}

Test(diskcache, concurrent_writers_leave_one_entry) {
    const char *dir = in_tmp("shared");
    static unsigned char buf[PAYLOAD];
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            fill(buf, w);
            int bad = 0;
            for (int r = 0; r < ROUNDS; r++) {
                char *why = NULL;
                if (diskcache_put(dir, "same.so", buf, PAYLOAD, &why) != 0) bad = 1;
                graph_free(why);
                /* Readers racing the writers only ever see whole entries. */
                void *data = NULL;
                size_t len = 0;
                diskcache_result res = diskcache_get(dir, "same.so", &data, &len, NULL);
                if (res == DISKCACHE_CORRUPT || (res == DISKCACHE_HIT && len != PAYLOAD)) bad = 2;
                graph_free(data);
            }
            _exit(bad);
        }
        pids[w] = pid;
    }
    for (int w = 0; w < WRITERS; w++) {
        int st;
        cr_assert_eq(waitpid(pids[w], &st, 0), pids[w]);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d: status %d", w, st);
    }
    cr_assert_eq(count_entries(dir), 1, "temp files left behind");
    void *data = NULL;
    size_t len = 0;
    cr_assert_eq(diskcache_get(dir, "same.so", &data, &len, NULL), DISKCACHE_HIT);
    cr_assert_eq(len, PAYLOAD);
    int who = -1;
    for (int w = 0; w < WRITERS && who < 0; w++) {
        fill(buf, w);
        if (!memcmp(data, buf, PAYLOAD)) who = w;
    }
    cr_expect_geq(who, 0, "entry matches no writer's payload");
    graph_free(data);
    expect_no_leak();
}

Test(diskcache, allocation_failures_leak_nothing) {
    const char *dir = in_tmp("x/y");
    bool put_done = false, get_done = false;
    for (int64_t nth = 1; nth < 100 && !put_done; nth++) {
        char *why = NULL;
        lf_debug_fail_alloc(nth, false);
        int rc = diskcache_put(dir, "k.so", "abc", 3, &why);
        lf_debug_fail_alloc(0, false);
        graph_free(why);
        put_done = rc == 0;
        cr_assert_eq(lf_debug_live_bytes(), base_bytes, "put, failing allocation %lld leaks",
                     (long long)nth);
        cr_assert_eq(exists(in_tmp("x/y/k.so")), put_done);
        if (exists(dir))
            cr_assert_eq(count_entries(dir), put_done, "failing allocation %lld leaves a temp file",
                         (long long)nth);
    }
    for (int64_t nth = 1; nth < 100 && !get_done; nth++) {
        void *data = NULL;
        size_t len = 0;
        lf_debug_fail_alloc(nth, false);
        diskcache_result r = diskcache_get(dir, "k.so", &data, &len, NULL);
        lf_debug_fail_alloc(0, false);
        cr_assert(r == DISKCACHE_HIT || r == DISKCACHE_NOMEM, "get: result %d", r);
        cr_assert(r == DISKCACHE_HIT || data == NULL);
        graph_free(data);
        get_done = r == DISKCACHE_HIT;
        cr_assert_eq(lf_debug_live_bytes(), base_bytes, "get, failing allocation %lld leaks",
                     (long long)nth);
    }
    cr_assert(put_done && get_done, "never succeeded");
    get_eq(dir, "k.so", "abc", 3); /* nothing was damaged */
    char *d;
    lf_debug_fail_alloc(1, false);
    setenv("HOME", "/h", 1);
    unsetenv("LF_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    d = diskcache_dir(NULL);
    cr_expect_null(d);
    graph_free(d);
    lf_debug_fail_alloc(0, false);
    expect_no_leak();
}

/* ---- the C compiler ------------------------------------------------------- */

TestSuite(cc, .init = setup, .fini = teardown);

Test(cc, probe_real_compiler) {
    unsetenv("CC");
    char *version = NULL, *why = NULL;
    int rc = cc_probe(0, &version, &why);
    cr_assert_eq(rc, 0, "cc_probe: %s", why ? why : "(no message)");
    cr_assert_null(why);
    cr_assert_not_null(version);
    cr_expect_gt(strlen(version), 0, "empty version line");
    cr_expect_null(strchr(version, '\n'), "more than one line: %s", version);
    graph_free(version);
    setenv("CC", "  cc   -O0  ", 1); /* several words, extra blanks */
    rc = cc_probe(0, &version, &why);
    cr_assert_eq(rc, 0, "cc_probe with CC='  cc   -O0  ': %s", why ? why : "(no message)");
    graph_free(version);
    setenv("CC", "", 1); /* empty: "cc" */
    rc = cc_probe(0, &version, &why);
    cr_assert_eq(rc, 0, "cc_probe with CC='': %s", why ? why : "(no message)");
    graph_free(version);
    expect_no_leak();
}

Test(cc, probe_failing_and_missing) {
    char *version = (char *)1, *why = NULL;
    setenv("CC", "false", 1);
    cr_assert_eq(cc_probe(0, &version, &why), -1);
    cr_assert_null(version);
    cr_assert_not_null(why);
    cr_expect(strstr(why, "'false'") && strstr(why, "exit status 1"), "message: %s", why);
    graph_free(why);
    setenv("CC", "/nonexistent/cc", 1);
    cr_assert_eq(cc_probe(0, &version, &why), -1);
    cr_assert_not_null(why);
    cr_expect(strstr(why, "'/nonexistent/cc'") && strstr(why, "not found"), "message: %s", why);
    graph_free(why);
    setenv("CC", "nosuchcc-lazyfuse", 1);
    cr_assert_eq(cc_probe(0, &version, &why), -1);
    cr_assert_not_null(why);
    cr_expect(strstr(why, "not found"), "message: %s", why);
    graph_free(why);
    cr_expect_eq(cc_probe(0, NULL, NULL), -1); /* out-parameters may be NULL */
    expect_no_leak();
}

static const char *const SO_FLAGS[] = {"-O2", "-fPIC", "-shared", NULL};

/* Compiles src, loads it and returns the handle; asserts on failure. */
static void *build_and_load(const char *src) {
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    int rc = cc_compile(src, SO_FLAGS, NULL, 0, &so, &len, &log);
    cr_assert_eq(rc, 0, "cc_compile: %s", log ? log : "(no message)");
    cr_assert_null(log);
    cr_assert_gt(len, 4);
    cr_assert_eq(memcmp(so, "\177ELF", 4), 0, "not an ELF file");
    char *why = NULL;
    void *h = cc_dlopen_bytes(so, len, &why);
    graph_free(so);
    cr_assert_not_null(h, "cc_dlopen_bytes: %s", why ? why : "(no message)");
    cr_assert_null(why);
    return h;
}

Test(cc, compile_load_call) {
    setenv("TMPDIR", tmpdir, 1);
    unsetenv("CC");
    void *h = build_and_load("int lf_probe_fn(int x){return x*3;}\n");
    int (*fn)(int) = (int (*)(int))dlsym(h, "lf_probe_fn");
    cr_assert_not_null(fn, "dlsym: %s", dlerror());
    cr_expect_eq(fn(7), 21);
    cr_expect_eq(dlclose(h), 0);
    cr_expect_eq(count_entries(tmpdir), 0, "temp files left in TMPDIR");
    expect_no_leak();
}

/* glibc hands back an already loaded object whose name matches: every load
 * must get a fresh one, even when the memfd number is recycled. */
Test(cc, kernels_loaded_together_stay_distinct) {
    setenv("TMPDIR", tmpdir, 1);
    unsetenv("CC");
    enum { N = 5 };
    void *h[N];
    for (int i = 0; i < N; i++) {
        char src[128];
        snprintf(src, sizeof src, "int lf_probe_fn(int x){return x*%d;}\n", i + 2);
        h[i] = build_and_load(src);
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < i; j++) cr_expect_neq(h[i], h[j], "loads %d and %d share a handle", j, i);
        int (*fn)(int) = (int (*)(int))dlsym(h[i], "lf_probe_fn");
        cr_assert_not_null(fn, "dlsym: %s", dlerror());
        cr_expect_eq(fn(7), 7 * (i + 2), "kernel %d", i);
    }
    for (int i = 0; i < N; i++) dlclose(h[i]);
    /* Reload after unloading: still fine. */
    void *again = build_and_load("int lf_probe_fn(int x){return x+100;}\n");
    int (*fn)(int) = (int (*)(int))dlsym(again, "lf_probe_fn");
    cr_assert_not_null(fn);
    cr_expect_eq(fn(7), 107);
    dlclose(again);
    cr_expect_eq(count_entries(tmpdir), 0, "temp files left in TMPDIR");
    expect_no_leak();
}

Test(cc, compile_error_has_log) {
    setenv("TMPDIR", tmpdir, 1);
    unsetenv("CC");
    void *so = (void *)1;
    size_t len = 99;
    char *log = NULL;
    int rc = cc_compile("int broken(int x) { return x +; }\n", SO_FLAGS, NULL, 0, &so, &len, &log);
    cr_assert_eq(rc, -1);
    cr_assert_null(so);
    cr_assert_eq(len, 0);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "C compiler failed (exit status "), "log: %s", log);
    cr_expect(strstr(log, "error"), "log: %s", log);
    cr_expect(strstr(log, "k.c:"), "log: %s", log);
    cr_expect_null(strstr(log, tmpdir), "temp folder leaks into the log: %s", log);
    cr_expect_leq(strlen(log), 8192 + 64);
    graph_free(log);
    cr_expect_eq(count_entries(tmpdir), 0, "temp files left in TMPDIR");
    expect_no_leak();
}

Test(cc, long_log_is_trimmed) {
    setenv("TMPDIR", tmpdir, 1);
    unsetenv("CC");
    /* Hundreds of errors: far more than 8 KiB of diagnostics. */
    static char src[64 * 1024];
    size_t k = 0;
    for (int i = 0; i < 500; i++)
        k += (size_t)snprintf(src + k, sizeof src - k, "int f%d(void) { return undefined_%d; }\n", i, i);
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    const char *const flags[] = {"-fPIC", "-shared", "-fmax-errors=0", NULL};
    cr_assert_eq(cc_compile(src, flags, NULL, 0, &so, &len, &log), -1);
    cr_assert_not_null(log);
    cr_expect_leq(strlen(log), 8192 + 64, "log of %zu bytes", strlen(log));
    cr_expect(strstr(log, "more lines; set LF_DEBUG=cc for the full log)"), "log: %.200s", log);
    graph_free(log);
    cr_expect_eq(count_entries(tmpdir), 0);
    expect_no_leak();
}

Test(cc, compiler_failures) {
    setenv("TMPDIR", tmpdir, 1);
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    setenv("CC", "/nonexistent/cc", 1);
    cr_assert_eq(cc_compile("int x;", SO_FLAGS, NULL, 0, &so, &len, &log), -1);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "not found"), "log: %s", log);
    graph_free(log);
    setenv("CC", "true", 1); /* exit 0 but makes no k.so */
    cr_assert_eq(cc_compile("int x;", SO_FLAGS, NULL, 0, &so, &len, &log), -1);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "k.so"), "log: %s", log);
    graph_free(log);
    unsetenv("CC");
    const char *const libs[] = {"-lno_such_library_lazyfuse", NULL}; /* libs reach the linker */
    cr_assert_eq(cc_compile("int x;", SO_FLAGS, libs, 0, &so, &len, &log), -1);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "no_such_library_lazyfuse"), "log: %s", log);
    graph_free(log);
    setenv("TMPDIR", in_tmp("no/such/dir"), 1); /* the folder, not the compiler */
    cr_assert_eq(cc_compile("int x;", SO_FLAGS, NULL, 0, &so, &len, &log), CC_NO_TMP);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "temp folder"), "log: %s", log);
    graph_free(log);
    cr_expect_eq(count_entries(tmpdir), 0);
    expect_no_leak();
}

Test(cc, dlopen_garbage_fails) {
    char *why = NULL;
    void *h = cc_dlopen_bytes("not an elf file", 15, &why);
    cr_assert_null(h);
    cr_assert_not_null(why);
    cr_expect(strstr(why, "cannot load kernel"), "why: %s", why);
    graph_free(why);
    expect_no_leak();
}

Test(cc, allocation_failures_leak_nothing) {
    setenv("TMPDIR", tmpdir, 1);
    unsetenv("CC");
    bool done = false;
    for (int64_t nth = 1; nth < 100 && !done; nth++) {
        void *so = NULL;
        size_t len = 0;
        char *log = NULL;
        lf_debug_fail_alloc(nth, false);
        int rc = cc_compile("int lf_probe_fn(int x){return x*3;}\n", SO_FLAGS, NULL, 0, &so, &len, &log);
        lf_debug_fail_alloc(0, false);
        done = rc == 0;
        graph_free(so);
        graph_free(log);
        cr_assert_eq(lf_debug_live_bytes(), base_bytes, "compile, failing allocation %lld leaks",
                     (long long)nth);
        cr_assert_eq(count_entries(tmpdir), 0, "failing allocation %lld leaves temp files",
                     (long long)nth);
    }
    cr_assert(done);
    done = false;
    for (int64_t nth = 1; nth < 100 && !done; nth++) {
        char *v = NULL, *why = NULL;
        lf_debug_fail_alloc(nth, false);
        done = cc_probe(0, &v, &why) == 0;
        lf_debug_fail_alloc(0, false);
        graph_free(v);
        graph_free(why);
        cr_assert_eq(lf_debug_live_bytes(), base_bytes, "probe, failing allocation %lld leaks",
                     (long long)nth);
    }
    cr_assert(done);
    expect_no_leak();
}
