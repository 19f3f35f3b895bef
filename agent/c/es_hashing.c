/* Public hash parameters (agent/hashing.py derive_params): SHA-256 in counter
 * mode over a tag and the public seed; 16-bit big-endian words below 2P are
 * accepted and reduced mod P = 32749. PrivHP's sketch hashes and the profile
 * sketch's Feistel keys both come from here, so every runtime rebuilds them
 * from the seed in the config. */
#include "es_core.h"

void es_derive_params(const uint8_t *seed, size_t n, uint16_t *out, uint32_t count)
{
    static const uint8_t tag[] = "edgesynth-hash-v1";
    uint32_t got = 0, blk = 0;
    while (got < count) {
        es_sha256_t h;
        uint8_t ctr[4], dig[32];
        unsigned i;
        ctr[0] = (uint8_t)(blk >> 24);
        ctr[1] = (uint8_t)(blk >> 16);
        ctr[2] = (uint8_t)(blk >> 8);
        ctr[3] = (uint8_t)blk;
        blk++;
        es_sha256_init(&h);
        es_sha256_update(&h, tag, sizeof tag - 1);
        es_sha256_update(&h, seed, n);
        es_sha256_update(&h, ctr, 4);
        es_sha256_final(&h, dig);
        for (i = 0; i < 32 && got < count; i += 2) {
            uint32_t v = (uint32_t)dig[i] << 8 | dig[i + 1];
            if (v < 2 * ES_HASH_P)
                out[got++] = (uint16_t)(v % ES_HASH_P);
        }
    }
}
