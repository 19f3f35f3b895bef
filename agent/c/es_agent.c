/* The agent's envelope and release (agent/device.py): a fixarray(4) of magic,
 * device id, the payload as bin32 and the HMAC-SHA256 tag (or nil). The
 * payload is counted once without a sink, then streamed; the MAC sees exactly
 * the bytes before the tag element. docs/wire-format.md has the layout. */
#include <string.h>

#include "es_core.h"

#define FORMAT 1

int es_mech_init(es_mech_t *m, size_t state_size, const es_mech_ops_t *ops, uint8_t factor,
                 void *mem, size_t size, size_t need)
{
    if (!need || (factor != 1 && factor != 2))
        return ES_E_CONFIG;
    if (!mem || size < need || ((uintptr_t)mem & 3))
        return ES_E_MEMORY;
    memset(m, 0, state_size);
    memset(mem, 0, need);
    m->ops = ops;
    m->factor = factor;
    return ES_OK;
}

/* The end of es_agent_init: the DRBG is spent (its buffer holds the last draws'
 * bytes), and after a failure no state may count or be released. */
static int finish_init(es_agent_t *a, es_mech_t *const *mechs, uint8_t n_mechs, es_drbg_t *rng, int st)
{
    unsigned i;
    if (rng)
        es_drbg_retire(rng);
    if (st != ES_OK) {
        a->sealed = 1;
        for (i = 0; mechs && i < n_mechs && i < 8; i++)
            if (mechs[i])
                mechs[i]->sealed = 1;
    }
    return st;
}

int es_device_id_ok(const uint8_t *id, size_t n)
{
    size_t i;
    if (!id || !n || n > 64)
        return 0;
    for (i = 0; i < n; i++) {
        uint8_t c = id[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              c == '.' || c == '_' || c == '-' || c == ':'))
            return 0;
    }
    return 1;
}

int es_agent_init(es_agent_t *a, es_mech_t *const *mechs, uint8_t n_mechs, uint8_t relation,
                  uint64_t eps_num, uint64_t eps_den, const uint8_t *device_id, uint8_t id_len,
                  uint32_t epoch, uint32_t seq, const uint8_t *key_bytes, size_t key_len,
                  es_drbg_t *rng)
{
    unsigned i;
    memset(a, 0, sizeof *a);
    if (!n_mechs || n_mechs > 8 || (relation != ES_ADD_REMOVE && relation != ES_REPLACE) ||
        !eps_num || !eps_den || !es_device_id_ok(device_id, id_len))
        /* an id outside the host's rule would make frames the host refuses (frames.py) */
        return finish_init(a, mechs, n_mechs, rng, ES_E_CONFIG);
    for (i = 0; i < n_mechs; i++)
        if (!mechs[i] || !mechs[i]->ops || mechs[i]->factor != relation)
            /* uninitialised, or noise scale factor != relation (device.py RELATIONS) */
            return finish_init(a, mechs, n_mechs, rng, ES_E_CONFIG);
    for (i = 0; i < n_mechs; i++)
        if (mechs[i]->ops->step && n_mechs != 1)
            /* a continual mechanism steps at every release: it holds the device alone */
            return finish_init(a, mechs, n_mechs, rng, ES_E_CONFIG);
    if (!es_drbg_ready(rng)) /* a zeroed DRBG would give fixed, public noise */
        return finish_init(a, mechs, n_mechs, rng, ES_E_ENTROPY);
    a->mechs = mechs;
    a->n_mechs = n_mechs;
    a->relation = relation;
    a->eps_num = eps_num;
    a->eps_den = eps_den;
    a->device_id = device_id;
    a->id_len = id_len;
    a->epoch = epoch;
    a->seq = seq;
    if (key_bytes) {
        a->has_key = 1;
        es_hmac_key(&a->mac, key_bytes, key_len);
    }
    for (i = 0; i < n_mechs; i++) {
        int st = mechs[i]->ops->draw_noise(mechs[i], rng);
        if (st != ES_OK)
            return finish_init(a, mechs, n_mechs, rng, st);
        mechs[i]->noised = 1;
    }
    return finish_init(a, mechs, n_mechs, rng, ES_OK);
}

static void payload(const es_agent_t *a, es_enc_t *e)
{
    unsigned i;
    es_enc_map(e, 7); /* keys in sorted byte order */
    es_enc_key(e, "device");
    es_enc_str(e, a->device_id, a->id_len);
    es_enc_key(e, "epoch");
    es_enc_uint(e, a->epoch);
    es_enc_key(e, "eps");
    es_enc_array(e, 2);
    es_enc_uint(e, a->eps_num);
    es_enc_uint(e, a->eps_den);
    es_enc_key(e, "fmt");
    es_enc_uint(e, FORMAT);
    es_enc_key(e, "mechs");
    es_enc_array(e, a->n_mechs);
    for (i = 0; i < a->n_mechs; i++)
        a->mechs[i]->ops->encode(a->mechs[i], e);
    es_enc_key(e, "relation");
    es_enc_key(e, a->relation == ES_REPLACE ? "replace" : "add-remove");
    es_enc_key(e, "seq");
    es_enc_uint(e, a->seq);
}

static size_t payload_size(const es_agent_t *a)
{
    es_enc_t e;
    es_enc_reset(&e, NULL, NULL, NULL);
    payload(a, &e);
    return e.n;
}

size_t es_agent_frame_size(const es_agent_t *a)
{
    return 1 + 5 + (a->id_len < 32 ? 1 : 2) + a->id_len + 5 + payload_size(a) +
           (a->has_key ? 34 : 1);
}

int es_agent_seal(es_agent_t *a)
{
    unsigned i;
    for (i = 0; i < a->n_mechs; i++) /* a state re-initialised since es_agent_init holds raw counts */
        if (!a->mechs[i]->noised)
            return ES_E_NOISE;
    if (!a->n_mechs)
        return ES_E_NOISE;
    /* a state that refused a reading for ES_E_FULL counts the first ES_MAX_ITEMS only:
     * where the cut falls depends on the stream's length, so adding one reading could
     * swap another out (twice the add-remove sensitivity). Never released. */
    for (i = 0; i < a->n_mechs; i++)
        if (a->mechs[i]->full)
            return ES_E_FULL;
    if (a->err)
        return a->err;
    /* a continual mechanism's step, once per window: at its seal */
    for (i = 0; !a->sealed && i < a->n_mechs; i++)
        if (a->mechs[i]->ops->step) {
            int st = a->mechs[i]->ops->step(a->mechs[i]);
            if (st != ES_OK) {
                a->err = (int8_t)st;
                a->sealed = 1;
                a->mechs[i]->sealed = 1;
                return st;
            }
        }
    a->sealed = 1;
    for (i = 0; i < a->n_mechs; i++)
        a->mechs[i]->sealed = 1;
    return ES_OK;
}

/* The frame of a sealed agent. Apart from es_agent_release so that its
 * encoder is not on the stack while a continual mechanism steps. */
#ifdef __GNUC__
__attribute__((noinline))
#endif
static long stream_frame(es_agent_t *a, es_sink_fn sink, void *ctx)
{
    es_enc_t e;
    size_t size = payload_size(a);
    if (a->has_key)
        es_hmac_start(&a->mac);
    es_enc_reset(&e, sink, ctx, a->has_key ? &a->mac : NULL);
    es_enc_array(&e, 4);
    es_enc_key(&e, "ESF1");
    es_enc_str(&e, a->device_id, a->id_len);
    es_enc_bin32_head(&e, (uint32_t)size);
    payload(a, &e);
    es_enc_flush(&e); /* the MAC covers everything up to here */
    e.mac = NULL;
    if (a->has_key) {
        uint8_t tag[32];
        es_hmac_finish(&a->mac, tag);
        es_enc_bin_head(&e, 32);
        es_enc_raw(&e, tag, 32);
    } else {
        es_enc_nil(&e);
    }
    es_enc_flush(&e);
    return e.err ? e.err : (long)e.n;
}

long es_agent_release(es_agent_t *a, es_sink_fn sink, void *ctx)
{
    int st = es_agent_seal(a);
    return st != ES_OK ? st : stream_frame(a, sink, ctx);
}

typedef struct {
    uint8_t *p;
    size_t cap, n;
} outbuf_t;

static int to_buf(void *ctx, const uint8_t *p, size_t n)
{
    outbuf_t *o = (outbuf_t *)ctx;
    if (n > o->cap - o->n)
        return ES_E_SINK;
    memcpy(o->p + o->n, p, n);
    o->n += n;
    return 0;
}

long es_agent_release_buf(es_agent_t *a, uint8_t *out, size_t cap)
{
    outbuf_t o;
    o.p = out;
    o.cap = cap;
    o.n = 0;
    return es_agent_release(a, to_buf, &o);
}

int es_agent_next_window(es_agent_t *a, uint32_t epoch)
{
    unsigned i;
    if (!a->n_mechs)
        return ES_E_CONFIG;
    for (i = 0; i < a->n_mechs; i++)
        if (!a->mechs[i]->ops->step)
            return ES_E_CONFIG; /* a one-shot state would reuse its noise */
    if (!a->sealed || a->err) /* this window's events would join the next one's step */
        return a->err ? a->err : ES_E_SEALED;
    if (epoch <= a->epoch)
        return ES_E_CONFIG;
    if (a->seq == UINT32_MAX)
        return ES_E_RANGE;
    a->seq++;
    a->epoch = epoch;
    a->sealed = 0;
    for (i = 0; i < a->n_mechs; i++)
        a->mechs[i]->sealed = 0;
    return ES_OK;
}
