/* The marginals update for double readings (agent/marginals/__init__.py
 * update with floats): a value v with 0 <= v < sizes[c] is column c's cell
 * floor(v) (Python's int(v), which truncates: the same for v >= 0); any other
 * value, NaN and +-inf included, is its "other" cell. Only firmware with
 * float readings links this file. */
#include "es_marginals.h"

int es_marginals_update_f64(es_marginals_t *m, const double *x, size_t n)
{
    const es_marginals_cfg_t *c = m->cfg;
    uint16_t cell[ES_MAX_CHANNELS];
    size_t k;
    unsigned i;
    for (k = 0; k < n; k++, x += c->d) {
        int st;
        for (i = 0; i < c->d; i++) /* NaN fails both comparisons */
            cell[i] = x[i] >= 0.0 && x[i] < (double)c->sizes[i] ? (uint16_t)x[i] : (uint16_t)(c->sizes[i] - 1);
        if ((st = es_marginals_count(m, cell)) != ES_OK)
            return st;
    }
    return ES_OK;
}
