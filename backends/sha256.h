/* backends/sha256.h: streaming SHA-256 (FIPS 180-4), for kernel cache keys
 * and for the checksums of on-disk cache entries. No allocation, no errors:
 * any byte sequence in, 32 bytes out. */
#ifndef LF_SHA256_H
#define LF_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];   /* chaining state */
    uint64_t nbytes; /* message bytes consumed so far */
    uint8_t buf[64]; /* partial block */
    size_t nbuf;     /* bytes held in buf (0..63 between calls) */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
/* Feeds len bytes (data may be NULL when len is 0). */
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Pads, writes the digest; c must be re-initialized before reuse. */
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* Lowercase hex of a digest, NUL-terminated. */
void sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
