"""cffi (API mode) build of the native core agent/c as ``host_tools._es_native``.

setup.py hands ``ffibuilder`` to setuptools through ``cffi_modules``, so
``pip install`` compiles it; host_tools/native.py falls back to the Python
agent, with a warning, where it could not be built. Paths are relative to the
project root, as setuptools requires.
"""
from cffi import FFI

SOURCES = ["agent/c/es_sha256.c", "agent/c/es_drbg.c", "agent/c/es_dlap.c", "agent/c/es_msgpack.c",
           "agent/c/es_privhp.c", "agent/c/es_quant_i32.c", "agent/c/es_quant_f64.c",
           "agent/c/es_agent.c"]

CDEF = """
typedef struct { ...; } es_sha256_t;
typedef struct { ...; } es_hmac_t;
typedef struct { int8_t err; ...; } es_drbg_t;
typedef struct {
    uint8_t d, r, j, sketch; uint32_t k, w; uint64_t q, clamp_p; const uint64_t *sigma;
    uint16_t int_mask; const int32_t *lo_i, *hi_i; const double *lo_f, *hi_f;
    const uint64_t *lo_bits, *hi_bits; const char *const *names;
    const uint8_t *hash_seed; uint8_t hash_seed_len; ...;
} es_privhp_cfg_t;
typedef struct { int32_t *tree; int32_t *sketch; uint16_t *hash; int64_t clamp; uint32_t items;
                 uint8_t L, factor, per, sealed; ...; } es_privhp_t;
typedef struct { uint8_t sealed; ...; } es_agent_t;

void es_sha256_init(es_sha256_t *c);
void es_sha256_update(es_sha256_t *c, const uint8_t *p, size_t n);
void es_sha256_final(es_sha256_t *c, uint8_t out[32]);
void es_hmac_key(es_hmac_t *h, const uint8_t *key, size_t n);
void es_hmac_start(es_hmac_t *h);
void es_hmac_update(es_hmac_t *h, const uint8_t *p, size_t n);
void es_hmac_finish(es_hmac_t *h, uint8_t out[32]);
int es_drbg_init(es_drbg_t *d, const uint8_t *entropy, size_t n_entropy,
                 const uint8_t *nonce, size_t n_nonce);
int es_drbg_seeded(es_drbg_t *d, const uint8_t *seed, size_t n);
uint64_t es_below(es_drbg_t *d, uint64_t m);
int64_t es_dlap(es_drbg_t *d, uint64_t num, uint64_t den);

size_t es_privhp_mem_size(const es_privhp_cfg_t *cfg);
int es_privhp_init(es_privhp_t *m, const es_privhp_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_privhp_update_i32(es_privhp_t *m, const int32_t *x);
int es_privhp_update_i32_rows(es_privhp_t *m, const int32_t *x, size_t n);
int es_privhp_update_f64(es_privhp_t *m, const double *x);
int es_privhp_update_f64_rows(es_privhp_t *m, const double *x, size_t n);

int es_agent_init(es_agent_t *a, es_privhp_t *const *mechs, uint8_t n_mechs, uint8_t relation,
                  uint64_t eps_num, uint64_t eps_den, const uint8_t *device_id, uint8_t id_len,
                  uint32_t epoch, uint32_t seq, const uint8_t *key, size_t key_len,
                  es_drbg_t *rng);
size_t es_agent_frame_size(const es_agent_t *a);
long es_agent_release_buf(es_agent_t *a, uint8_t *out, size_t cap);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source("host_tools._es_native", '#include "es_core.h"', sources=SOURCES,
                      include_dirs=["agent/c"], extra_compile_args=["-O2", "-std=c99"])

if __name__ == "__main__":
    ffibuilder.compile(verbose=False)
