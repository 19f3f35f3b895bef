/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the DRBG, the hash
 * parameter derivation and the frame tag. Small rather than fast: it runs at
 * construction and release, never per reading. */
#include <string.h>

#include "es_core.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[16], s[8];
    unsigned i;
    for (i = 0; i < 8; i++)
        s[i] = h[i];
    for (i = 0; i < 64; i++) {
        uint32_t t1, t2, x;
        if (i < 16) {
            x = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
                (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
        } else { /* 16-word ring: w[i % 16] holds w[i - 16] */
            uint32_t a = w[(i + 1) & 15], b = w[(i + 14) & 15];
            x = w[i & 15] + (ROR(a, 7) ^ ROR(a, 18) ^ (a >> 3)) + w[(i + 9) & 15] +
                (ROR(b, 17) ^ ROR(b, 19) ^ (b >> 10));
        }
        w[i & 15] = x;
        t1 = s[7] + (ROR(s[4], 6) ^ ROR(s[4], 11) ^ ROR(s[4], 25)) +
             ((s[4] & s[5]) ^ (~s[4] & s[6])) + K[i] + x;
        t2 = (ROR(s[0], 2) ^ ROR(s[0], 13) ^ ROR(s[0], 22)) +
             ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
        memmove(s + 1, s, 7 * sizeof s[0]);
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (i = 0; i < 8; i++)
        h[i] += s[i];
}

void es_sha256_init(es_sha256_t *c)
{
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, H0, sizeof H0);
    c->len = 0;
}

void es_sha256_update(es_sha256_t *c, const uint8_t *p, size_t n)
{
    while (n) {
        size_t fill = (size_t)(c->len & 63), take = 64 - fill;
        if (take > n)
            take = n;
        memcpy(c->buf + fill, p, take);
        c->len += take;
        p += take;
        n -= take;
        if ((c->len & 63) == 0)
            block(c->h, c->buf);
    }
}

void es_sha256_final(es_sha256_t *c, uint8_t out[32])
{
    uint64_t bits = c->len << 3;
    uint8_t pad = 0x80, len[8];
    unsigned i;
    for (i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    es_sha256_update(c, &pad, 1);
    pad = 0;
    while ((c->len & 63) != 56)
        es_sha256_update(c, &pad, 1);
    es_sha256_update(c, len, 8);
    for (i = 0; i < 32; i++)
        out[i] = (uint8_t)(c->h[i >> 2] >> (24 - 8 * (i & 3)));
}

void es_hmac_key(es_hmac_t *h, const uint8_t *key, size_t n)
{
    memset(h->key, 0, sizeof h->key);
    if (n > 64) {
        es_sha256_init(&h->inner);
        es_sha256_update(&h->inner, key, n);
        es_sha256_final(&h->inner, h->key);
    } else if (n) {
        memcpy(h->key, key, n);
    }
}

static void padded(es_sha256_t *c, const uint8_t key[64], uint8_t x)
{
    uint8_t pad[64];
    unsigned i;
    for (i = 0; i < 64; i++)
        pad[i] = key[i] ^ x;
    es_sha256_init(c);
    es_sha256_update(c, pad, 64);
}

void es_hmac_start(es_hmac_t *h)
{
    padded(&h->inner, h->key, 0x36);
}

void es_hmac_update(es_hmac_t *h, const uint8_t *p, size_t n)
{
    es_sha256_update(&h->inner, p, n);
}

void es_hmac_finish(es_hmac_t *h, uint8_t out[32])
{
    uint8_t inner[32];
    es_sha256_final(&h->inner, inner);
    padded(&h->inner, h->key, 0x5c);
    es_sha256_update(&h->inner, inner, 32);
    es_sha256_final(&h->inner, out);
}
