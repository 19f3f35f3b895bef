"""Which candidate set and budget split the marginals planner should use
(issue 18, first slice): the real device state (agent/marginals, seeded),
decoded and fitted (edgesynth.mechanisms.marginals.model.fit), on a public
synthetic stand-in with the issue's 6-column domain (16, 3, 12, 24, 10, 9
values; each column a noisy function of the previous one, so 2-way structure
matters), n = 20,000, eps = 1, mean over 3 seeds of the average 1-, 2- and
3-way total variation of a sample of n records:

* planner: every 1- and 2-way marginal, eps_w ~ sqrt(G_w) (plan_marginals);
* 2-way, sqrt: the 2-way marginals only, the same split;
* 2-way, equal: the 2-way marginals only, eps / 15 each.

    python benchmarks/bench_marginals_plan.py [--seeds 3] [--record]
"""
import argparse
import os
import sys
from fractions import Fraction
from itertools import combinations

import msgpack
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import results_append  # noqa: E402
from edgesynth.agent.marginals import Marginals  # noqa: E402
from edgesynth.agent.msgpack_out import Encoder  # noqa: E402
from edgesynth.evaluation.table_metrics import tv  # noqa: E402
from edgesynth.firmware_shims.drbg import seeded_source  # noqa: E402
from edgesynth.mechanisms.marginals.model import fit  # noqa: E402
from edgesynth.mechanisms.marginals.plan import plan_marginals  # noqa: E402
from edgesynth.mechanisms.marginals.schema import Schema  # noqa: E402
from edgesynth.mechanisms.marginals.wire import MarginalsState  # noqa: E402

SIZES = [16, 3, 12, 24, 10, 9]
N = 20000
EPS = Fraction(1)


def table(rng):
    x = [rng.integers(0, SIZES[0], N)]
    for k in SIZES[1:]:
        x.append((x[-1] * 7 + rng.integers(0, 3, N)) % k)
    return np.stack(x, axis=1)


def release(spec, cells, seed):
    m = Marginals(spec)
    m.draw_noise(seeded_source(seed))
    for r in cells.tolist():
        m.update(r)
    out = bytearray()
    enc = Encoder()
    enc.reset(lambda buf, n: out.extend(bytes(buf[:n])))
    m.prepare_release()
    m.encode(enc)
    return MarginalsState.from_payload(msgpack.unpackb(bytes(out)), 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = ap.parse_args()
    schema = Schema.from_json({"columns": [{"name": "c%d" % i, "values": list(range(k))}
                                           for i, k in enumerate(SIZES)]})
    cells = table(np.random.default_rng(0))
    pairs = list(combinations(range(len(SIZES)), 2))
    equal = plan_marginals(schema, EPS, marginals=pairs)["mechanisms"][0]
    equal = dict(equal, sigma=[equal["q"] // len(pairs)] * len(pairs))   # 2**20 / 15 does not divide:
    equal["q"] = equal["sigma"][0] * len(pairs)                            # eps = 1 over q = 15 * sigma
    setups = [("planner: 1- and 2-way, sqrt(G) split", plan_marginals(schema, EPS)["mechanisms"][0]),
              ("2-way only, sqrt(G) split", plan_marginals(schema, EPS, marginals=pairs)["mechanisms"][0]),
              ("2-way only, equal split", equal)]
    rows = ["| candidates, split | marginals | avg 1-way TV | avg 2-way TV | avg 3-way TV |", "|---|---|---|---|---|"]
    for label, spec in setups:
        assert Fraction(sum(spec["sigma"]), spec["q"]) == EPS
        res = []
        for s in range(args.seeds):
            model = fit(schema.sizes, release(spec, cells, b"plan-%d" % s).measurements(), seed=0)
            syn = model.sample(round(model.total), np.random.default_rng(s))  # n is private: the estimate
            res.append([tv(cells, syn, schema.sizes, k)[0] for k in (1, 2, 3)])
        r = np.mean(res, axis=0)
        rows.append("| %s | %d | %.4f | %.4f | %.4f |" % (label, len(spec["cols"]), r[0], r[1], r[2]))
        print(rows[-1], flush=True)
    text = "n = %d, eps = %s, mean of %d seeds\n\n%s" % (N, EPS, args.seeds, "\n".join(rows))
    if args.record:
        results_append(text, title="marginals planner: candidate set and budget split (first slice)")


if __name__ == "__main__":
    main()
