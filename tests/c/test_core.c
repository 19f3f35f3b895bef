/* C unit tests of the native core, compiled with the host gcc and run by
 * tests/test_firmware.py (test_c_unit). Prints one line per failed check and
 * "N passed, N failed"; the exit status is the failure count. The config and
 * the device glue come from the es_config.h that `edgesynth firmware build
 * --header` writes for a device of three mechanisms: privhp over inputs 0-1,
 * cdf over input 2, profile over input 3, all with integer bounds. */
#include <stdio.h>
#include <string.h>

#define ES_CFG_DEVICE
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

/* 32 random-looking bytes: SHA-256 of (tag, i) */
static void sha_block(uint8_t *out, const char *tag, unsigned i)
{
    es_sha256_t c;
    uint8_t b = (uint8_t)i;
    es_sha256_init(&c);
    es_sha256_update(&c, (const uint8_t *)tag, strlen(tag));
    es_sha256_update(&c, &b, 1);
    es_sha256_final(&c, out);
}

/* the board's entropy source for these tests (es_core.h es_entropy_fill): a strong
 * symbol replacing the core's weak default, serving board_bytes in order */
static uint8_t board_bytes[128];
static size_t board_pos, board_len;
int es_entropy_fill(uint8_t *buf, size_t n)
{
    if (n > board_len - board_pos)
        return -1; /* the source failed */
    memcpy(buf, board_bytes + board_pos, n);
    board_pos += n;
    return 0;
}

static void board(const uint8_t *bytes, size_t n)
{
    memcpy(board_bytes, bytes, n);
    board_pos = 0;
    board_len = n;
}

/* firmware_shims/entropy.py health_check, case by case (tests/test_native.py checks
 * the two agree on thousands of blocks); es_drbg_init refuses what it refuses */
static void test_entropy_health_tests(void)
{
    uint8_t good[64], bad[48], prev[16];
    es_drbg_t d;
    unsigned i;
    sha_block(good, "health", 0);
    sha_block(good + 32, "health", 1);
    CHECK(es_entropy_health(good, 48, NULL) == ES_OK && es_entropy_health(good, 8, NULL) == ES_OK);
    CHECK(es_entropy_health(good, 7, NULL) == ES_E_ENTROPY); /* too short */
    memset(bad, 0, sizeof bad);
    CHECK(es_entropy_health(bad, 16, NULL) == ES_E_ENTROPY); /* stuck */
    CHECK(es_drbg_init(&d, bad, 16, NULL, 0) == ES_E_ENTROPY && es_below(&d, 1000) == 0 &&
          d.err == ES_E_ENTROPY);
    for (i = 0; i < 48; i++)
        bad[i] = (uint8_t)(7 * i + 3); /* a counter: one step */
    CHECK(es_entropy_health(bad, 48, NULL) == ES_E_ENTROPY && es_drbg_init(&d, bad, 48, NULL, 0) == ES_E_ENTROPY);
    for (i = 0; i < 48; i++)
        bad[i] = (uint8_t)(i % 3); /* three values */
    CHECK(es_entropy_health(bad, 48, NULL) == ES_E_ENTROPY);
    for (i = 0; i < 48; i++) /* period 8, each with 8 distinct values and steps */
        bad[i] = good[i % 8];
    CHECK(es_entropy_health(bad, 48, NULL) == ES_E_ENTROPY && es_entropy_health(bad, 8, NULL) == ES_OK);
    for (i = 0; i < 48; i++)
        bad[i] = good[i % 4];
    CHECK(es_entropy_health(bad, 48, NULL) == ES_E_ENTROPY);
    memcpy(prev, good, 16);
    CHECK(es_entropy_health(good, 16, prev) == ES_E_ENTROPY); /* the same block twice */
    CHECK(es_entropy_health(good + 16, 16, prev) == ES_OK);
    CHECK(es_drbg_init(&d, good, 16, NULL, 0) == ES_OK && es_drbg_seeded(&d, bad, 16) == ES_OK);
    memset(bad, 0, sizeof bad); /* a seed is no entropy: not health-tested (tests only) */
    CHECK(es_drbg_seeded(&d, bad, 16) == ES_OK && d.err == 0);
}

/* es_drbg_platform: the board's 48 + 16 bytes, health-tested as gather does, seed
 * the same DRBG as es_drbg_init(entropy, nonce); a broken source fails closed */
static void test_platform_entropy(void)
{
    uint8_t src[64], zeros[64];
    es_drbg_t d, e;
    int i, same = 1;
    sha_block(src, "board", 0);
    sha_block(src + 32, "board", 1);
    board(src, 64);
    CHECK(es_drbg_platform(&d) == ES_OK && board_pos == 64);
    CHECK(es_drbg_init(&e, src, ES_ENTROPY_BYTES, src + ES_ENTROPY_BYTES, ES_NONCE_BYTES) == ES_OK);
    for (i = 0; i < 100; i++)
        same &= es_below(&d, 1000003) == es_below(&e, 1000003);
    CHECK(same && d.err == 0);
    board(src, 63); /* the source fails on the nonce */
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY && es_below(&d, 10) == 0 && d.err == ES_E_ENTROPY);
    board(src, 0); /* no source: the core's default refuses the same way */
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY && d.err == ES_E_ENTROPY);
    memset(zeros, 0, sizeof zeros);
    board(zeros, 64); /* stuck */
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY && d.err == ES_E_ENTROPY);
    memcpy(src + 48, src, 16); /* the nonce repeats the entropy's first block */
    board(src, 64);
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY);
    memcpy(src + 48, zeros, 16); /* a stuck nonce */
    board(src, 64);
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY);
}

static void test_memory_sizes_and_layout_errors(void)
{
    static uint32_t mem[(ES_CFG_M0_MEM_BYTES + 3) / 4 + 1];
    es_privhp_t hp;
    es_cdf_t cdf;
    es_profile_t prof;
    CHECK(es_privhp_mem_size(&es_cfg_m0) == ES_CFG_M0_MEM_BYTES);
    CHECK(es_cdf_mem_size(&es_cfg_m1) == ES_CFG_M1_MEM_BYTES);
    CHECK(es_profile_mem_size(&es_cfg_m2) == ES_CFG_M2_MEM_BYTES);
    CHECK(ES_CFG_MEM_BYTES == ES_CFG_M0_MEM_BYTES + ES_CFG_M1_MEM_BYTES + ES_CFG_M2_MEM_BYTES);
    CHECK(es_privhp_init(&hp, &es_cfg_m0, 1, mem, ES_CFG_M0_MEM_BYTES - 4) == ES_E_MEMORY);
    CHECK(es_privhp_init(&hp, &es_cfg_m0, 1, (char *)mem + 2, ES_CFG_M0_MEM_BYTES) == ES_E_MEMORY);
    CHECK(es_cdf_init(&cdf, &es_cfg_m1, 1, mem, ES_CFG_M1_MEM_BYTES - 1) == ES_E_MEMORY);
    CHECK(es_cdf_init(&cdf, &es_cfg_m1, 1, (char *)mem + 1, ES_CFG_M1_MEM_BYTES) == ES_E_MEMORY);
    CHECK(es_profile_init(&prof, &es_cfg_m2, 1, mem, ES_CFG_M2_MEM_BYTES - 4) == ES_E_MEMORY);
    CHECK(es_profile_init(&prof, &es_cfg_m2, 3, mem, ES_CFG_M2_MEM_BYTES) == ES_E_CONFIG); /* factor 1 or 2 */
    CHECK(es_cdf_init(&cdf, &es_cfg_m1, 1, NULL, 0) == ES_E_MEMORY);
}

/* noise-free states (es_dev_init zeroes the counters; no es_agent_init): every
 * count is exact. CDF: each level sums to the readings, the leaves are the
 * histogram of floor((x - lo) * K / span) clamped into the bins. */
static void test_cdf_counts_are_exact(void)
{
    static uint32_t want[4096]; /* the leaves: K = 100 in the test config */
    const es_cdf_cfg_t *c = &es_cfg_m1;
    int32_t lo = c->lo_i[0], hi = c->hi_i[0];
    uint32_t i, level, w, at, n = 700, ok = 1;
    CHECK(c->K <= sizeof want / sizeof want[0]);
    CHECK(es_dev_init() == ES_OK);
    CHECK(es_cdf_update_i32(&es_dev_m1, &lo, 1) == ES_E_NOISE); /* no count before the noise is drawn */
    es_dev_m1.base.noised = 1; /* test only: counts on a noise-free state are exact */
    memset(want, 0, sizeof want);
    for (i = 0; i < n; i++) {
        int32_t x = (int32_t)(i * 37u % 1200u) - 100; /* some below lo, some at or above hi */
        uint32_t bin = x >= hi ? c->K - 1 : x <= lo ? 0 : (uint32_t)((int64_t)(x - lo) * c->K / (hi - lo));
        want[bin]++;
        ok &= es_cdf_update_i32(&es_dev_m1, &x, 1) == ES_OK;
    }
    CHECK(ok && es_dev_m1.items == n);
    /* levels top to bottom: widths ceil(K / P_i) */
    for (at = 0, level = 0; level < c->m; level++) {
        uint32_t P = 1, k, sum = 0;
        for (k = level + 1; k < c->m; k++)
            P *= c->branching[k];
        w = (c->K + P - 1) / P;
        for (k = 0; k < w; k++)
            sum += (uint32_t)es_dev_m1.nodes[at + k];
        ok &= sum == n;
        at += w;
    }
    CHECK(ok && at == es_dev_m1.per);
    CHECK(memcmp(es_dev_m1.nodes + es_dev_m1.per - c->K, want, 4 * c->K) == 0);
    {
        uint32_t bad = c->K; /* a bin beyond K is refused before anything is counted */
        es_cdf_levels_t lv;
        es_cdf_levels(c, &lv);
        CHECK(es_cdf_count(&es_dev_m1, &lv, &bad) == ES_E_INPUT && es_dev_m1.items == n);
    }
}

/* profile: counts saturate at the cap; ids outside [lo, hi) are ignored */
static void test_profile_saturates_and_ignores_outside_ids(void)
{
    const int32_t ids[] = {5, 5, 5, 5, 5, 5, 7, -1, 50, 1000000, (int32_t)0x80000000, 49};
    int32_t total = 0;
    unsigned i;
    CHECK(es_dev_init() == ES_OK);
    es_dev_m2.base.noised = 1; /* test only: counts on a noise-free state are exact */
    CHECK(es_cfg_m2.lo == 0 && es_cfg_m2.hi == 50 && es_cfg_m2.cap == 3);
    CHECK(es_profile_update_i32(&es_dev_m2, ids, sizeof ids / sizeof ids[0]) == ES_OK);
    CHECK(es_dev_m2.ctr[5] == 3 && es_dev_m2.ctr[7] == 1 && es_dev_m2.ctr[49] == 1);
    for (i = 0; i < 50; i++)
        total += es_dev_m2.ctr[i];
    CHECK(total == 5);
}

static void test_agent_lifecycle(void)
{
    static uint8_t f1[1 << 16], f2[1 << 16];
    es_agent_t a;
    es_drbg_t d;
    int32_t x[ES_CFG_INPUTS * 10];
    long n1, n2;
    int i, c, ok = 1;
    CHECK(es_dev_init() == ES_OK);
    es_drbg_seeded(&d, (const uint8_t *)"lifecycle", 9);
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, 3 - ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 1, 2, NULL, 0, &d) == ES_E_CONFIG); /* other relation */
    CHECK(es_below(&d, 10) == 0 && d.err == ES_E_ENTROPY); /* the DRBG is spent whatever the status */
    CHECK(es_dev_init() == ES_OK);
    es_drbg_seeded(&d, (const uint8_t *)"lifecycle", 9);
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 1, 2, NULL, 0, &d) == ES_OK);
    CHECK(d.err == ES_E_ENTROPY && d.k[0] == 0 && d.v[0] == 0); /* wiped: no trace of the draws */
    for (i = 0; i < 100; i++) {
        for (c = 0; c < ES_CFG_INPUTS * 10; c++)
            x[c] = (i * 10 + c) * (c + 3) % 150 - 20;
        ok &= es_dev_update(x, 10) == ES_OK;
    }
    CHECK(ok && es_dev_m0.items == 1000 && es_dev_m1.items == 1000);
    n1 = es_agent_release_buf(&a, f1, sizeof f1);
    CHECK(n1 > ES_CFG_MEM_BYTES && (size_t)n1 == es_agent_frame_size(&a));
    CHECK(f1[0] == 0x94 && f1[n1 - 1] == 0xC0); /* fixarray(4) ... nil tag */
    CHECK(es_privhp_update_i32(&es_dev_m0, x, 1) == ES_E_SEALED);
    CHECK(es_cdf_update_i32(&es_dev_m1, x, 1) == ES_E_SEALED);
    CHECK(es_profile_update_i32(&es_dev_m2, x, 1) == ES_E_SEALED);
    n2 = es_agent_release_buf(&a, f2, sizeof f2);
    CHECK(n2 == n1 && memcmp(f1, f2, (size_t)n1) == 0); /* a resend is byte-identical */
    CHECK(es_agent_release_buf(&a, f2, (size_t)n1 - 1) == ES_E_SINK);
    es_dev_m0.base.sealed = es_dev_m1.base.sealed = 0;
    es_dev_m0.items = es_dev_m1.items = ES_MAX_ITEMS; /* the overflow guard refuses instead of wrapping */
    CHECK(es_privhp_update_i32(&es_dev_m0, x, 1) == ES_E_FULL);
    CHECK(es_cdf_update_i32(&es_dev_m1, x, 1) == ES_E_FULL);
    /* a new epoch lays the states out again (raw zero counters): until es_agent_init draws fresh
     * noise, the old agent cannot release them and nothing can count */
    CHECK(es_dev_init() == ES_OK);
    CHECK(es_agent_release_buf(&a, f2, sizeof f2) == ES_E_NOISE);
    CHECK(es_profile_update_i32(&es_dev_m2, x, 1) == ES_E_NOISE);
}

/* A state that refused a reading with ES_E_FULL holds only the first ES_MAX_ITEMS:
 * it refuses every further update and its release, and writes nothing; exactly
 * ES_MAX_ITEMS readings (none refused) still release. */
static int full_epoch(es_agent_t *a, uint32_t items)
{
    es_drbg_t d;
    int st = es_dev_init();
    es_drbg_seeded(&d, (const uint8_t *)"full", 4);
    if (st == ES_OK)
        st = es_agent_init(a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                           (const uint8_t *)"unit", 4, 0, 0, NULL, 0, &d);
    es_dev_m0.items = es_dev_m1.items = items; /* test only: skips 1.6e9 readings */
    return st;
}

static void test_full_state_refuses_release(void)
{
    static uint8_t f[1 << 16];
    es_agent_t a;
    int32_t x[ES_CFG_INPUTS] = {1, 2, 3, 4};
    CHECK(full_epoch(&a, ES_MAX_ITEMS - 1) == ES_OK);
    CHECK(es_dev_update(x, 1) == ES_OK && es_dev_m0.items == ES_MAX_ITEMS); /* the last one that fits */
    CHECK(es_agent_release_buf(&a, f, sizeof f) > 0);
    CHECK(full_epoch(&a, ES_MAX_ITEMS) == ES_OK && !es_dev_m0.base.full);
    CHECK(es_dev_update(x, 1) == ES_E_FULL && es_dev_m0.base.full); /* PrivHP refuses it */
    es_dev_m0.items = 0; /* the mark, not the count, refuses: the lost reading stays lost */
    CHECK(es_privhp_update_i32(&es_dev_m0, x, 1) == ES_E_FULL);
    f[0] = 0;
    CHECK(es_agent_release_buf(&a, f, sizeof f) == ES_E_FULL && f[0] == 0);
    CHECK(full_epoch(&a, ES_MAX_ITEMS) == ES_OK && !es_dev_m0.base.full); /* a new epoch starts afresh */
    CHECK(es_cdf_update_i32(&es_dev_m1, x + 2, 1) == ES_E_FULL && es_dev_m1.base.full);
    CHECK(es_agent_release_buf(&a, f, sizeof f) == ES_E_FULL && f[0] == 0);
}

/* a failed noise draw (here: too little entropy) leaves every state unusable */
static void test_failed_construction_fails_closed(void)
{
    static uint8_t f[1 << 16];
    es_agent_t a;
    es_drbg_t d;
    int32_t x[ES_CFG_INPUTS] = {1, 2, 3, 4};
    CHECK(es_dev_init() == ES_OK);
    CHECK(es_drbg_init(&d, (const uint8_t *)"short", 5, NULL, 0) == ES_E_ENTROPY);
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 0, 0, NULL, 0, &d) == ES_E_ENTROPY);
    CHECK(es_dev_update(x, 1) == ES_E_SEALED);
    CHECK(es_agent_release_buf(&a, f, sizeof f) == ES_E_NOISE);
}

/* es_agent_init on an id outside agent/device.py device_id_bytes's rule (1..64 of
 * A-Z a-z 0-9 . _ - :): ES_E_CONFIG, every state sealed; the host refuses such
 * an id in a frame's envelope, so the core never writes one */
static int init_with_id(es_agent_t *a, const char *id, size_t n)
{
    es_drbg_t d;
    int st = es_dev_init();
    es_drbg_seeded(&d, (const uint8_t *)"id", 2);
    if (st == ES_OK)
        st = es_agent_init(a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                           (const uint8_t *)id, (uint8_t)n, 0, 0, NULL, 0, &d);
    return st;
}

static void test_device_id_charset(void)
{
    static const char *const refused[] = {"", "a b", "dev\n", "a/b", "caf\xc3\xa9", "\xff", "a\0b", "a,b",
                                          "a;b", "a@b", "%00", "\"", "\\"};
    static uint8_t f[1 << 16];
    char id[66];
    es_agent_t a;
    unsigned i, c, ok = 1;
    int32_t x[ES_CFG_INPUTS] = {1, 2, 3, 4};
    for (c = 0; c < 256; c++) { /* one character: exactly the 66 of the rule */
        uint8_t b = (uint8_t)c;
        int want = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                   c == '.' || c == '_' || c == '-' || c == ':';
        ok &= es_device_id_ok(&b, 1) == want;
    }
    CHECK(ok);
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        size_t n = i == 6 ? 3 : strlen(refused[i]); /* "a\0b": the NUL is inside the id */
        CHECK(init_with_id(&a, refused[i], n) == ES_E_CONFIG);
    }
    CHECK(es_dev_update(x, 1) == ES_E_SEALED && a.sealed); /* the last refusal left nothing usable */
    CHECK(es_agent_release_buf(&a, f, sizeof f) == ES_E_NOISE);
    memset(id, 'a', sizeof id);
    CHECK(init_with_id(&a, id, 65) == ES_E_CONFIG);
    CHECK(init_with_id(&a, id, 64) == ES_OK);
    CHECK(init_with_id(&a, "Az09._-:", 8) == ES_OK && init_with_id(&a, ":", 1) == ES_OK);
    CHECK(es_dev_update(x, 1) == ES_OK && es_agent_release_buf(&a, f, sizeof f) > 0);
}

/* A DRBG never instantiated (a zeroed static one: firmware that forgot
 * es_drbg_platform) or already retired draws nothing: es_agent_init refuses it
 * with ES_E_ENTROPY, seals every state and releases nothing */
static void test_unready_drbg_is_refused(void)
{
    static es_drbg_t zero; /* static: all zero, as firmware's would be */
    static uint8_t f[1 << 16];
    uint8_t src[64];
    es_agent_t a;
    es_drbg_t d;
    int32_t x[ES_CFG_INPUTS] = {1, 2, 3, 4};
    CHECK(!es_drbg_ready(&zero) && !es_drbg_ready(NULL));
    CHECK(es_below(&zero, 1000) == 0 && zero.err == ES_E_ENTROPY); /* no byte of the zero key */
    memset(&zero, 0, sizeof zero);
    CHECK(es_dev_init() == ES_OK);
    f[0] = 0;
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 0, 0, NULL, 0, &zero) == ES_E_ENTROPY);
    CHECK(!es_dev_m0.base.noised && !es_dev_m1.base.noised && !es_dev_m2.base.noised);
    CHECK(es_dev_update(x, 1) == ES_E_SEALED && es_dev_m2.base.sealed);
    CHECK(es_agent_release_buf(&a, f, sizeof f) == ES_E_NOISE && f[0] == 0);
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 0, 0, NULL, 0, NULL) == ES_E_ENTROPY);
    /* each way of seeding marks it ready; retiring clears the mark */
    CHECK(es_drbg_seeded(&d, (const uint8_t *)"r", 1) == ES_OK && es_drbg_ready(&d));
    es_drbg_retire(&d);
    CHECK(!es_drbg_ready(&d) && d.ready == 0);
    CHECK(es_dev_init() == ES_OK);
    CHECK(es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                        (const uint8_t *)"unit", 4, 0, 0, NULL, 0, &d) == ES_E_ENTROPY);
    CHECK(es_dev_update(x, 1) == ES_E_SEALED && es_agent_release_buf(&a, f, sizeof f) == ES_E_NOISE);
    sha_block(src, "ready", 0);
    sha_block(src + 32, "ready", 1);
    board(src, sizeof src);
    CHECK(es_drbg_platform(&d) == ES_OK && es_drbg_ready(&d));
    CHECK(es_drbg_init(&d, src, 32, NULL, 0) == ES_OK && es_drbg_ready(&d));
    CHECK(es_drbg_init(&d, (const uint8_t *)"short", 5, NULL, 0) == ES_E_ENTROPY && !es_drbg_ready(&d));
    CHECK(es_drbg_platform(&d) == ES_E_ENTROPY && !es_drbg_ready(&d)); /* the source is spent */
}

/* configs the host never writes: shares beyond 2**48 (the scale product would wrap),
 * unordered or oversized bounds */
static void test_invalid_configs_are_refused(void)
{
    static uint32_t mem[(ES_CFG_M1_MEM_BYTES + 3) / 4];
    es_cdf_cfg_t c = es_cfg_m1;
    es_profile_cfg_t p = es_cfg_m2;
    es_cdf_t cdf;
    int32_t lo[1] = {10}, hi[1] = {10};
    double lo_f[1] = {0.0}, hi_f[1] = {1.0 / 0.0};
    c.q = ES_MAX_SHARE + 1;
    CHECK(es_cdf_mem_size(&c) == 0);
    p.p = ES_MAX_SHARE + 1;
    CHECK(es_profile_mem_size(&p) == 0);
    c = es_cfg_m1;
    c.lo_i = lo;
    c.hi_i = hi;
    CHECK(es_cdf_init(&cdf, &c, 1, mem, sizeof mem) == ES_OK);
    cdf.base.noised = 1;
    CHECK(es_cdf_update_i32(&cdf, lo, 1) == ES_E_CONFIG);
    c.lo_f = lo_f;
    c.hi_f = hi_f;
    CHECK(es_cdf_update_f64(&cdf, lo_f, 1) == ES_E_CONFIG);
    CHECK(cdf.items == 0);
}

static void test_scale_cap(void)
{
    CHECK(es_dlap_scale_ok((uint64_t)7 << 22, 7) && !es_dlap_scale_ok(((uint64_t)7 << 22) + 1, 7));
    CHECK(es_dlap_scale_ok(1, (uint64_t)1 << 48) && !es_dlap_scale_ok(1, 0));
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
    test_entropy_health_tests();
    test_platform_entropy();
    test_memory_sizes_and_layout_errors();
    test_cdf_counts_are_exact();
    test_profile_saturates_and_ignores_outside_ids();
    test_agent_lifecycle();
    test_full_state_refuses_release();
    test_failed_construction_fails_closed();
    test_device_id_charset();
    test_unready_drbg_is_refused();
    test_invalid_configs_are_refused();
    test_scale_cap();
    test_noise_is_signed_and_bounded();
    printf("%d passed, %d failed\n", passed, failed);
    return failed;
}
