/* A streaming msgpack writer with the canonical choices of agent/msgpack_out.py:
 * the smallest format for every integer, float64 for real-valued bounds (ints
 * for an integer channel's), bin32 for the
 * payload, counters as little-endian bin blocks. Bytes collect in a 64-byte
 * chunk and go to the sink (and the MAC) when it fills, so a frame of any size
 * streams through a few dozen bytes of stack. With no sink it only counts. */
#include <string.h>

#include "es_core.h"

void es_enc_reset(es_enc_t *e, es_sink_fn sink, void *ctx, es_hmac_t *mac)
{
    e->sink = sink;
    e->ctx = ctx;
    e->mac = mac;
    e->n = 0;
    e->err = 0;
    e->fill = 0;
}

void es_enc_flush(es_enc_t *e)
{
    if (e->fill && e->sink) {
        if (e->mac)
            es_hmac_update(e->mac, e->buf, e->fill);
        if (!e->err && e->sink(e->ctx, e->buf, e->fill))
            e->err = ES_E_SINK;
    }
    e->fill = 0;
}

void es_enc_raw(es_enc_t *e, const uint8_t *p, size_t n)
{
    e->n += n;
    if (!e->sink)
        return;
    while (n) {
        size_t take = ES_ENC_CHUNK - e->fill;
        if (take > n)
            take = n;
        memcpy(e->buf + e->fill, p, take);
        e->fill = (uint16_t)(e->fill + take);
        p += take;
        n -= take;
        if (e->fill == ES_ENC_CHUNK)
            es_enc_flush(e);
    }
}

/* tag byte then the low `size` bytes of v, big-endian */
static void head(es_enc_t *e, uint8_t tag, uint64_t v, unsigned size)
{
    uint8_t b[9];
    unsigned i;
    b[0] = tag;
    for (i = 0; i < size; i++)
        b[1 + i] = (uint8_t)(v >> (8 * (size - 1 - i)));
    es_enc_raw(e, b, size + 1);
}

void es_enc_uint(es_enc_t *e, uint64_t v)
{
    if (v < 0x80)
        head(e, (uint8_t)v, 0, 0);
    else if (v < 0x100)
        head(e, 0xCC, v, 1);
    else if (v < 0x10000)
        head(e, 0xCD, v, 2);
    else if (v < 0x100000000ULL)
        head(e, 0xCE, v, 4);
    else
        head(e, 0xCF, v, 8);
}

void es_enc_int(es_enc_t *e, int64_t v)
{
    uint64_t u = (uint64_t)v; /* two's complement bytes */
    if (v >= 0)
        es_enc_uint(e, u);
    else if (v >= -32)
        head(e, (uint8_t)u, 0, 0);
    else if (v >= -0x80)
        head(e, 0xD0, u, 1);
    else if (v >= -0x8000)
        head(e, 0xD1, u, 2);
    else if (v >= -0x80000000LL)
        head(e, 0xD2, u, 4);
    else
        head(e, 0xD3, u, 8);
}

void es_enc_f64_bits(es_enc_t *e, uint64_t bits)
{
    head(e, 0xCB, bits, 8);
}

void es_enc_nil(es_enc_t *e)
{
    head(e, 0xC0, 0, 0);
}

static void sized(es_enc_t *e, uint32_t n, uint8_t fix, uint32_t fixmax, uint8_t t8, uint8_t t16,
                  uint8_t t32)
{
    if (n <= fixmax)
        head(e, (uint8_t)(fix | n), 0, 0);
    else if (t8 && n < 0x100)
        head(e, t8, n, 1);
    else if (n < 0x10000)
        head(e, t16, n, 2);
    else
        head(e, t32, n, 4);
}

void es_enc_array(es_enc_t *e, uint32_t n)
{
    sized(e, n, 0x90, 15, 0, 0xDC, 0xDD);
}

void es_enc_map(es_enc_t *e, uint32_t n)
{
    sized(e, n, 0x80, 15, 0, 0xDE, 0xDF);
}

void es_enc_str(es_enc_t *e, const uint8_t *p, size_t n)
{
    sized(e, (uint32_t)n, 0xA0, 31, 0xD9, 0xDA, 0xDB);
    es_enc_raw(e, p, n);
}

void es_enc_bin_head(es_enc_t *e, uint32_t n)
{
    if (n < 0x100)
        head(e, 0xC4, n, 1);
    else if (n < 0x10000)
        head(e, 0xC5, n, 2);
    else
        head(e, 0xC6, n, 4);
}

void es_enc_bin32_head(es_enc_t *e, uint32_t n)
{
    head(e, 0xC6, n, 4);
}

void es_enc_i32_le(es_enc_t *e, const int32_t *v, size_t n)
{
    size_t i;
    es_enc_bin_head(e, (uint32_t)(4 * n));
    if (!e->sink) {
        e->n += 4 * n;
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t u = (uint32_t)v[i];
        uint8_t b[4];
        b[0] = (uint8_t)u;
        b[1] = (uint8_t)(u >> 8);
        b[2] = (uint8_t)(u >> 16);
        b[3] = (uint8_t)(u >> 24);
        es_enc_raw(e, b, 4);
    }
}

void es_enc_u16_le(es_enc_t *e, const uint16_t *v, size_t n)
{
    size_t i;
    es_enc_bin_head(e, (uint32_t)(2 * n));
    for (i = 0; i < n; i++) {
        uint8_t b[2];
        b[0] = (uint8_t)v[i];
        b[1] = (uint8_t)(v[i] >> 8);
        es_enc_raw(e, b, 2);
    }
}

void es_enc_key(es_enc_t *e, const char *s)
{
    es_enc_str(e, (const uint8_t *)s, strlen(s));
}

void es_enc_strs(es_enc_t *e, const char *const *s, uint32_t n)
{
    uint32_t i;
    es_enc_array(e, n);
    for (i = 0; i < n; i++)
        es_enc_key(e, s[i]);
}

/* The value of an integral double given as IEEE-754 bits, without floating
 * point (integer-only firmware links no soft-float helpers): the host gives
 * integer bounds below 2**53 in magnitude (host_tools/ccore.py validate). */
static int64_t whole_of_bits(uint64_t bits)
{
    unsigned exp = (unsigned)(bits >> 52) & 0x7FF;
    uint64_t mant = (bits & ((1ULL << 52) - 1)) | (1ULL << 52), v;
    if (exp < 1023)
        v = 0; /* +-0: the only integral value below 1 in magnitude */
    else if (exp <= 1075)
        v = mant >> (1075 - exp);
    else
        v = mant << (exp > 1085 ? 10 : exp - 1075); /* beyond 2**53: refused by the host */
    return bits >> 63 ? -(int64_t)v : (int64_t)v;
}

void es_enc_bounds(es_enc_t *e, const uint64_t *bits, uint16_t int_mask, uint32_t n)
{
    uint32_t i;
    es_enc_array(e, n);
    for (i = 0; i < n; i++)
        if (int_mask >> i & 1)
            es_enc_int(e, whole_of_bits(bits[i]));
        else
            es_enc_f64_bits(e, bits[i]);
}

void es_enc_u64_array(es_enc_t *e, const uint64_t *v, uint32_t n)
{
    uint32_t i;
    es_enc_array(e, n);
    for (i = 0; i < n; i++)
        es_enc_uint(e, v[i]);
}
