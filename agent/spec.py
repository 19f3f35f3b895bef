"""Shared checks for mechanism specs in a device config (construction phase).

Small, allocation-light validators and the noise fill used by every
mechanism's builder (privhp, cdf, profile); every failure is a ConfigError
naming ``kind.field``.
"""
from .errors import ConfigError

MAX_Q = 1 << 48
MAX_SCALE = 1 << 22      # largest noise scale: |noise| >= 2**29 then has probability < e**-127
NOISE_LIMIT = 1 << 29
MAX_CHANNELS = 16


def known_fields(spec, kind, keys):
    """Refuse a key of ``spec`` that is not in ``keys``: a misspelt optional
    key ("skecth", "sampel") would otherwise silently take its default."""
    for name in spec:
        if name not in keys:
            raise ConfigError("%s has no field %r (fields: %s)" % (kind, name, ", ".join(keys)))


def int_field(spec, kind, name, lo, hi):
    """``spec[name]`` as an int in [lo, hi] (bool refused)."""
    v = spec.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or v > hi:
        raise ConfigError("%s.%s must be an integer in [%d, %d], got %r" % (kind, name, lo, hi, v))
    return v


def int_list(spec, kind, name, n, lo, hi):
    """``spec[name]`` as a list of ``n`` ints in [lo, hi]."""
    v = spec.get(name)
    if not isinstance(v, list) or len(v) != n:
        raise ConfigError("%s.%s must list %d integers" % (kind, name, n))
    for i in range(n):
        x = v[i]
        if not isinstance(x, int) or isinstance(x, bool) or x < lo or x > hi:
            raise ConfigError("%s.%s[%d] must be an integer in [%d, %d], got %r" % (kind, name, i, lo, hi, x))
    return v


def names_field(spec, kind, n, default):
    """Channel (input column) names: ``n`` short strings; ``default`` when absent."""
    names = spec.get("names")
    if names is None:
        names = default
    if not isinstance(names, list) or len(names) != n:
        raise ConfigError("%s.names must list %d short name(s)" % (kind, n))
    for s in names:
        if not isinstance(s, str) or not 0 < len(s) <= 64 or "\x00" in s:  # the C core's names end at NUL
            raise ConfigError("%s.names must list %d short name(s) without NUL" % (kind, n))
    return names


def bounds_field(spec, kind, max_int_span):
    """(lo, hi, span) of the public box: ``lo``/``hi`` lists of 1..MAX_CHANNELS
    finite numbers with lo < hi; an integer span at most ``max_int_span`` (the
    mechanism's long division doubles it below 2**30), a float span finite."""
    lo = spec.get("lo")
    hi = spec.get("hi")
    if not isinstance(lo, list) or not isinstance(hi, list) or not 1 <= len(lo) <= MAX_CHANNELS \
            or len(lo) != len(hi):
        raise ConfigError("%s.lo and %s.hi must be lists of equal length 1..%d" % (kind, kind, MAX_CHANNELS))
    span = []
    for i in range(len(lo)):
        a = number(lo[i], "%s.lo[%d]" % (kind, i))
        b = number(hi[i], "%s.hi[%d]" % (kind, i))
        if not a < b:
            raise ConfigError("%s channel %d: lo (%r) must be below hi (%r)" % (kind, i, a, b))
        s = b - a
        if isinstance(s, int) and s > max_int_span:
            e = 0
            while (1 << e) <= max_int_span:    # max_int_span is 2**e - 1
                e += 1
            raise ConfigError("%s channel %d: integer span %d exceeds 2**%d - 1; use float bounds"
                              % (kind, i, s, e))
        if isinstance(s, float) and not (s - s == 0.0):
            raise ConfigError("%s channel %d: span overflows" % (kind, i))
        span.append(s)
    return lo, hi, span


def number(v, what):
    """A finite int or float (bool refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError("%s must be a number, got %r" % (what, v))
    if isinstance(v, float) and not (v - v == 0.0):  # rejects nan and +-inf
        raise ConfigError("%s must be finite, got %r" % (what, v))
    return v


def check_scale(kind, scale_num, scale_den):
    """Refuse a noise scale above MAX_SCALE (a budget share that is too small)."""
    if scale_num > scale_den * MAX_SCALE:
        raise ConfigError("%s: noise scale %d/%d exceeds 2**22; its budget share is too small"
                          % (kind, scale_num, scale_den))


def draw(rng, scale_num, scale_den):
    """One exact discrete Laplace draw of scale num/den, |z| < NOISE_LIMIT."""
    from .dlap import discrete_laplace
    z = discrete_laplace(rng, scale_num, scale_den)
    if z >= NOISE_LIMIT or z <= -NOISE_LIMIT:  # unreachable: scales are capped at MAX_SCALE
        raise ConfigError("noise draw out of range")
    return z


def fill_noise(tab, rng, scale_num, scale_den):
    """Every cell of ``tab`` := one exact discrete Laplace draw of scale num/den."""
    for i in range(len(tab)):
        tab[i] = draw(rng, scale_num, scale_den)


def spec_kind(spec, i, kinds):
    """The kind of mechanism entry ``i`` of a config; ConfigError unless one of ``kinds``."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind not in kinds:
        raise ConfigError("mechanisms[%d].kind %r is not one of %s" % (i, kind, ", ".join(sorted(kinds))))
    return kind


def check_budget(eps, budgets):
    """Refuse unless the mechanisms' (num, den) budgets add up to ``eps``
    exactly (sequential composition; integer arithmetic, no rounding)."""
    num, den = 0, 1
    for n, d in budgets:
        num, den = num * d + n * den, den * d
    if num * eps[1] != eps[0] * den:
        raise ConfigError("mechanism budgets add up to %d/%d, not epsilon %d/%d" % (num, den, eps[0], eps[1]))
