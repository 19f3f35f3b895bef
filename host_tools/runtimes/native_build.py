"""cffi (API mode) build of the native core agent/c as ``edgesynth.runtimes._es_native``.

setup.py hands ``ffibuilder`` to setuptools through ``cffi_modules``, so
``pip install`` compiles it; host_tools/runtimes/native.py falls back to the Python
agent, with a warning, where it could not be built. Paths are relative to the
project root, as setuptools requires.
"""
from cffi import FFI

SOURCES = ["agent/c/es_sha256.c", "agent/c/es_drbg.c", "agent/c/es_dlap.c", "agent/c/es_hashing.c",
           "agent/c/es_msgpack.c", "agent/c/es_privhp.c", "agent/c/es_privhp_i32.c", "agent/c/es_privhp_f64.c",
           "agent/c/es_cdf.c", "agent/c/es_cdf_f64.c", "agent/c/es_profile.c", "agent/c/es_phdstream.c",
           "agent/c/es_marginals.c", "agent/c/es_marginals_f64.c", "agent/c/es_agent.c"]

CDEF = """
typedef struct { ...; } es_sha256_t;
typedef struct { ...; } es_hmac_t;
typedef struct { int8_t err; ...; } es_drbg_t;
typedef struct { uint8_t factor; uint8_t sealed; ...; } es_mech_t;
typedef struct {
    uint8_t d, r, j, sketch; uint32_t k, w; uint64_t q, clamp_p; const uint64_t *sigma;
    uint16_t int_mask; const int32_t *lo_i, *hi_i; const double *lo_f, *hi_f;
    const uint64_t *lo_bits, *hi_bits; const char *const *names;
    const uint8_t *hash_seed; uint16_t hash_seed_len; ...;
} es_privhp_cfg_t;
typedef struct { es_mech_t base; int32_t *tree; int32_t *sketch; uint16_t *hash; int64_t clamp;
                 uint32_t items; uint8_t L, per; ...; } es_privhp_t;
typedef struct {
    uint8_t d, m; uint32_t K; const uint32_t *branching; uint64_t q; const uint64_t *sigma;
    uint16_t int_mask; const int32_t *lo_i, *hi_i; const double *lo_f, *hi_f;
    const uint64_t *lo_bits, *hi_bits; const char *const *names; ...;
} es_cdf_cfg_t;
typedef struct { es_mech_t base; int32_t *nodes; uint32_t per; uint32_t items; ...; } es_cdf_t;
typedef struct {
    uint32_t lo, hi, cap; uint64_t p, q; uint8_t bits; const uint8_t *seed; uint16_t seed_len;
    const char *const *names; ...;
} es_profile_cfg_t;
typedef struct { es_mech_t base; int32_t *ctr; uint16_t keys[8]; ...; } es_profile_t;
typedef struct {
    uint8_t d, depth, counter, fold; uint32_t block, horizon, max_nodes, batch_max, snap;
    uint64_t eps_num, eps_den; const int32_t *lo, *hi; const char *const *names; ...;
} es_phdstream_cfg_t;
typedef struct { es_mech_t base; uint32_t delta, used, nb, nv, nl, t, refused_splits, refused_events, free_pair;
                 int32_t *cn, *cd, *kid, *codes, *q_lo, *q_hi; uint8_t *signs; int8_t err; ...; } es_phdstream_t;
typedef struct {
    uint8_t d; uint16_t n; const uint16_t *sizes; const uint8_t *way, *cols; const uint32_t *ngroups;
    const uint16_t *groups; uint64_t q; const uint64_t *sigma; const uint8_t *schema; uint32_t schema_len; ...;
} es_marginals_cfg_t;
typedef struct { es_mech_t base; int32_t *totals; uint32_t items; ...; } es_marginals_t;
typedef struct { uint8_t sealed; uint32_t epoch, seq; ...; } es_agent_t;

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
int es_entropy_health(const uint8_t *block, size_t n, const uint8_t *previous);
uint64_t es_below(es_drbg_t *d, uint64_t m);
int64_t es_dlap(es_drbg_t *d, uint64_t num, uint64_t den);
void es_derive_params(const uint8_t *seed, size_t n, uint16_t *out, uint32_t count);

size_t es_privhp_mem_size(const es_privhp_cfg_t *cfg);
int es_privhp_init(es_privhp_t *m, const es_privhp_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_privhp_update_i32(es_privhp_t *m, const int32_t *x, size_t n);
int es_privhp_update_f64(es_privhp_t *m, const double *x, size_t n);
size_t es_cdf_mem_size(const es_cdf_cfg_t *cfg);
int es_cdf_init(es_cdf_t *m, const es_cdf_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_cdf_update_i32(es_cdf_t *m, const int32_t *x, size_t n);
int es_cdf_update_f64(es_cdf_t *m, const double *x, size_t n);
size_t es_profile_mem_size(const es_profile_cfg_t *cfg);
int es_profile_init(es_profile_t *m, const es_profile_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_profile_update_i32(es_profile_t *m, const int32_t *id, size_t n);
size_t es_phdstream_mem_size(const es_phdstream_cfg_t *cfg);
int es_phdstream_init(es_phdstream_t *m, const es_phdstream_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_phdstream_update_i32(es_phdstream_t *m, const int32_t *x, size_t n);
int es_phdstream_step(es_phdstream_t *m);
size_t es_marginals_mem_size(const es_marginals_cfg_t *cfg);
int es_marginals_init(es_marginals_t *m, const es_marginals_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
int es_marginals_update_i32(es_marginals_t *m, const int32_t *x, size_t n);
int es_marginals_update_f64(es_marginals_t *m, const double *x, size_t n);

int es_agent_init(es_agent_t *a, es_mech_t *const *mechs, uint8_t n_mechs, uint8_t relation,
                  uint64_t eps_num, uint64_t eps_den, const uint8_t *device_id, uint8_t id_len,
                  uint32_t epoch, uint32_t seq, const uint8_t *key, size_t key_len,
                  es_drbg_t *rng);
size_t es_agent_frame_size(const es_agent_t *a);
long es_agent_release_buf(es_agent_t *a, uint8_t *out, size_t cap);
int es_agent_seal(es_agent_t *a);
int es_agent_next_window(es_agent_t *a, uint32_t epoch);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source("edgesynth.runtimes._es_native", '#include "es_core.h"', sources=SOURCES,
                      include_dirs=["agent/c"], libraries=["m"],  # fmod/floor: es_cdf_f64.c
                      extra_compile_args=["-O2", "-std=c99"])

if __name__ == "__main__":
    ffibuilder.compile(verbose=False)
