"""Plan a marginals device config: the candidate marginals, their public
partitions, the budget split and the RAM check (docs/mechanisms/marginals.md,
"Planner").

One window's config. The candidate set is every 1-way and every 2-way
marginal of the schema (or the ``marginals`` given); each is ungrouped
unless ``partitions`` gives it a public partition. The next window of a
stream is planned from the model of the windows released so far by
edgesynth.mechanisms.marginals.adapt.plan_from_model, which chooses the
marginals and their partitions and calls plan_marginals
(docs/mechanisms/marginals.md, Planner, "Adaptive windows").

Budget split (the pure-DP analogue of PPSyn's rho_w proportional to
|P_w|**(2/3)): marginal w with G_w groups gets epsilon_w; its noise of scale
b_w = 1/epsilon_w (sensitivity 1 per marginal) has an expected L1 error of
about G_w * b_w = G_w / epsilon_w. Minimising sum_w G_w / epsilon_w under
sum_w epsilon_w = epsilon gives epsilon_w proportional to sqrt(G_w) (the
Lagrange condition G_w / epsilon_w**2 = const). The split is integer: the
weights are isqrt(G_w * 2**40) and the shares sigma_w over q = 2**20 *
den(epsilon) add up to epsilon * q exactly (largest remainder, computed in
integers, every share at least 1).
"""
import math
from itertools import combinations

from edgesynth.agent.marginals.build import MAX_CELLS, MAX_COUNTERS, MAX_MARGINALS
from edgesynth.agent.spec import MAX_SCALE
from edgesynth.budget import Q_BITS
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.marginals.model import MAX_CELLS as HOST_CELLS
from edgesynth.noise import dlap_variance
from edgesynth.ram import RUNTIME_OVERHEAD, heap_need, marginals_transient, ram_notes, require_fit

WEIGHT_BITS = 40  # sqrt weights as isqrt(G * 2**40): 20 bits of fraction


def candidates(d):
    """Every 1-way then every 2-way marginal of ``d`` columns, as sorted tuples."""
    return [(i,) for i in range(d)] + list(combinations(range(d), 2))


def split_sqrt(total, ngroups):
    """Integer shares >= 1, one per marginal, proportional to sqrt(ngroups)
    and adding up to ``total`` exactly (integer arithmetic only)."""
    n = len(ngroups)
    if total < n:
        raise InputError("the budget cannot give each of %d marginals a share" % n)
    w = [math.isqrt(g << WEIGHT_BITS) for g in ngroups]
    W = sum(w)
    rest = total - n
    parts = [1 + rest * x // W for x in w]
    left = total - sum(parts)
    order = sorted(range(n), key=lambda i: (-(rest * w[i] % W), i))
    for i in order[:left]:
        parts[i] += 1
    return parts


def plan_marginals(schema, eps, ram=None, runtime="c", relation="add-remove", marginals=None, partitions=None):
    """Public device config (JSON-ready dict) measuring ``marginals`` (default:
    candidates(d)) of ``schema`` (a Schema) at ``eps`` (a Fraction).

    ``partitions``: optional {column tuple: list of one group id per cell
    (C order)}, public partitions, e.g. from an earlier window's model.
    ``ram`` (bytes, optional): refuse a state that does not fit the ``runtime``
    ("c" or "micropython": 4 bytes per group total, on MicroPython also 2
    per cell of a partitioned marginal's group map (the C core reads the map
    from its const config, in flash on a board), plus the runtime's measured charge,
    edgesynth.ram.heap_need: the C core's fixed charge, or MicroPython's base
    and per-column and per-marginal shape terms).
    InputError, in one line, for a config no device can run or whose joint
    domain (prod(sizes)) is above the host model's MAX_CELLS.
    """
    if runtime not in RUNTIME_OVERHEAD:
        raise InputError("marginals plans for the %s runtime, not %r"
                         % (" or ".join(sorted(RUNTIME_OVERHEAD)), runtime))
    sizes = schema.sizes
    d = len(sizes)
    joint = math.prod(sizes)
    if joint > HOST_CELLS:  # the host fits its model on the full joint table: refuse before any device runs
        raise InputError("marginals: the schema's joint domain has %d cells, the host model holds %d; "
                         "use fewer columns or bins" % (joint, HOST_CELLS))
    cols = [tuple(c) for c in (candidates(d) if marginals is None else marginals)]
    if not 1 <= len(cols) <= MAX_MARGINALS:
        raise InputError("marginals: %d marginals, a device measures 1..%d" % (len(cols), MAX_MARGINALS))
    partitions = dict(partitions or {})
    unknown = [c for c in partitions if tuple(c) not in cols]
    if unknown:
        raise InputError("marginals: a partition is given for %r, which is not measured" % (unknown[0],))
    groups, ngroups, map_bytes = [], [], 0
    for c in cols:
        if list(c) != sorted(set(c)) or not c or c[-1] >= d or c[0] < 0:
            raise InputError("marginals: %r is not an increasing tuple of column indices below %d" % (c, d))
        cells = math.prod(sizes[i] for i in c)
        if cells > MAX_CELLS:
            raise InputError("marginals: the marginal of %s has %d cells, more than a device's %d"
                             % (" x ".join(schema.names[i] for i in c), cells, MAX_CELLS))
        lab = partitions.get(c)
        if lab is None:
            groups.append(None)
            ngroups.append(cells)
            continue
        lab = [int(v) for v in lab]
        G = max(lab) + 1 if lab else 0
        if len(lab) != cells or min(lab) < 0 or len(set(lab)) != G:
            raise InputError("marginals: the partition of %r must give each of its %d cells a group id, "
                             "ids 0..G-1 each used" % (c, cells))
        groups.append(lab)
        ngroups.append(G)
        if runtime == "micropython":  # an array('H') in the heap; C firmware keeps it in flash
            map_bytes += 2 * cells
    if sum(ngroups) > MAX_COUNTERS:
        raise InputError("marginals: %d group totals, more than a device's %d" % (sum(ngroups), MAX_COUNTERS))
    factor = 2 if relation == "replace" else 1
    q = (1 << Q_BITS) * eps.denominator
    sigma = split_sqrt(eps.numerator << Q_BITS, ngroups)
    for c, p in zip(cols, sigma):
        if factor * q > p * MAX_SCALE:
            raise InputError("marginals: epsilon %s over %d marginals leaves the marginal of %s a noise scale "
                             "above 2**22; raise epsilon or measure fewer marginals"
                             % (eps, len(cols), " x ".join(schema.names[i] for i in c)))
    counters = 4 * sum(ngroups) + map_bytes
    need = heap_need(counters, runtime, "marginals", channels=d, arrays=len(cols),
                     transient=marginals_transient(schema.to_json(), groups))
    require_fit(ram, need, counters, runtime, "marginals over %d marginals (%d group totals)"
                % (len(cols), sum(ngroups)))
    mech = {"kind": "marginals", "schema": schema.to_json(), "cols": [list(c) for c in cols],
            "groups": groups, "q": q, "sigma": sigma}
    return device_config(eps, relation, mech, {
        "mechanism": "marginals",
        "schema": schema.to_json(),
        "marginals": len(cols),
        "group_totals": sum(ngroups),
        **ram_notes(ram, counters, need, runtime),
        "noise_sd": [math.sqrt(dlap_variance(factor * q, p)) for p in sigma],
        "epsilon": str(eps),
    })
