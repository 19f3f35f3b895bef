/* C unit tests of the native core, compiled with the host gcc and run by
 * tests/test_firmware.py (test_c_unit). Prints one line per failed check and
 * "N passed, N failed"; the exit status is the failure count. The config comes
 * from the es_config.h that `edgesynth firmware build --header` writes. */
#include <stdio.h>
#include <string.h>

#include "es_config.h"

static int passed, failed;
#define CHECK(c)                                                          \
    do {                                                                  \
        if (c) {                                                          \
            passed++;                                                     \
        } else {                                                          \
            failed++;                                                     \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);           \
        }                                                                 \
    } while (0)

static int hex_eq(const uint8_t *b, const char *hex)
{
    char s[65];
    int i;
    for (i = 0; i < 32; i++)
        sprintf(s + 2 * i, "%02x", b[i]);
    return strcmp(s, hex) == 0;
}

static void test_sha256_fips_vectors(void)
{
    es_sha256_t c;
    uint8_t out[32];
    es_sha256_init(&c);
    es_sha256_update(&c, (const uint8_t *)"abc", 3);
    es_sha256_final(&c, out);
    CHECK(hex_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    es_sha256_init(&c);
    es_sha256_update(&c, (const uint8_t *)"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56);
    es_sha256_final(&c, out);
    CHECK(hex_eq(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
}

static void test_hmac_rfc4231_case2(void)
{
    es_hmac_t h;
    uint8_t out[32];
    es_hmac_key(&h, (const uint8_t *)"Jefe", 4);
    es_hmac_start(&h);
    es_hmac_update(&h, (const uint8_t *)"what do ya want for nothing?", 28);
    es_hmac_finish(&h, out);
    CHECK(hex_eq(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
}

static void test_below_is_in_range_and_drbg_fails_closed(void)
{
    es_drbg_t d;
    int i, ok = 1;
    CHECK(es_drbg_init(&d, (const uint8_t *)"short", 5, NULL, 0) == ES_E_ENTROPY);
    CHECK(es_below(&d, 1000) == 0 && d.err == ES_E_ENTROPY); /* refuses to draw */
    es_drbg_seeded(&d, (const uint8_t *)"unit", 4);
    for (i = 0; i < 2000; i++)
        ok &= es_below(&d, 7 + (uint64_t)i * 1000003u) < 7 + (uint64_t)i * 1000003u;
    CHECK(ok && d.err == 0);
    CHECK(es_below(&d, 1) == 0);
}

static uint32_t mem[(ES_CFG_MEM_BYTES + 3) / 4];

static void test_agent_lifecycle(void)
{
    es_privhp_t m;
    es_privhp_t *mechs[1];
    es_agent_t a;
    es_drbg_t d;
    static uint8_t f1[1 << 16], f2[1 << 16];
    int32_t x[ES_CFG_D];
    long n1, n2;
    int i;
    mechs[0] = &m;
    CHECK(es_privhp_mem_size(&es_cfg_privhp) == ES_CFG_MEM_BYTES);
    CHECK(es_privhp_init(&m, &es_cfg_privhp, ES_CFG_FACTOR, mem, ES_CFG_MEM_BYTES - 4) == ES_E_MEMORY);
    CHECK(es_privhp_init(&m, &es_cfg_privhp, ES_CFG_FACTOR, (char *)mem + 2, ES_CFG_MEM_BYTES) ==
          ES_E_MEMORY);
    CHECK(es_privhp_init(&m, &es_cfg_privhp, ES_CFG_FACTOR, mem, sizeof mem) == ES_OK);
    es_drbg_seeded(&d, (const uint8_t *)"lifecycle", 9);
    CHECK(es_agent_init(&a, mechs, 1, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 1, 2, NULL, 0, &d) == ES_OK);
    for (i = 0; i < 1000; i++) {
        int c;
        for (c = 0; c < ES_CFG_D; c++)
            x[c] = i * (c + 3) % 150 - 20;
        if (es_privhp_update_i32(&m, x) != ES_OK)
            break;
    }
    CHECK(i == 1000 && m.items == 1000);
    n1 = es_agent_release_buf(&a, f1, sizeof f1);
    CHECK(n1 > 0 && (size_t)n1 == es_agent_frame_size(&a));
    CHECK(f1[0] == 0x94 && f1[n1 - 1] == 0xC0); /* fixarray(4) ... nil tag */
    CHECK(es_privhp_update_i32(&m, x) == ES_E_SEALED);
    n2 = es_agent_release_buf(&a, f2, sizeof f2);
    CHECK(n2 == n1 && memcmp(f1, f2, (size_t)n1) == 0); /* a resend is byte-identical */
    CHECK(es_agent_release_buf(&a, f2, (size_t)n1 - 1) == ES_E_SINK);
    m.sealed = 0;
    m.items = ES_MAX_ITEMS; /* the overflow guard refuses instead of wrapping */
    CHECK(es_privhp_update_i32(&m, x) == ES_E_FULL);
}

static void test_noise_is_signed_and_bounded(void)
{
    es_drbg_t d;
    int i, neg = 0, pos = 0, ok = 1;
    es_drbg_seeded(&d, (const uint8_t *)"noise", 5);
    for (i = 0; i < 4000; i++) {
        int64_t z = es_dlap(&d, 20, 1);
        neg += z < 0;
        pos += z > 0;
        ok &= z > -ES_NOISE_LIMIT && z < ES_NOISE_LIMIT;
    }
    CHECK(ok && d.err == 0);
    /* scale 20: P[z > 0] = P[z < 0] = a/(1+a), a = e^-1/20: about 0.4875 each */
    CHECK(neg > 1800 && neg < 2100 && pos > 1800 && pos < 2100);
    CHECK(es_dlap(&d, 0, 1) == 0 && d.err == ES_E_RANGE); /* invalid scale fails closed */
}

int main(void)
{
    test_sha256_fips_vectors();
    test_hmac_rfc4231_case2();
    test_below_is_in_range_and_drbg_fails_closed();
    test_agent_lifecycle();
    test_noise_is_signed_and_bounded();
    printf("%d passed, %d failed\n", passed, failed);
    return failed;
}
