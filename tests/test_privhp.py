"""PrivHP on the host, on real agent releases: the numpy ingestion leaves
exactly the state per-item updates leave; growth and consistency (PrivHP
paper, Alg. 3-4) and the sampler."""
import numpy as np
import pytest
from scipy import stats

from edgesynth import agent
from edgesynth.data.synthdata import multifractal
from edgesynth.frames import iter_frames
from edgesynth.mechanisms.privhp.generator import assemble_privhp
from edgesynth.mechanisms.privhp.growth import grow, split
from edgesynth.mechanisms.privhp.vector import ingest
from edgesynth.runtimes.simulate import as_readings
from tests.conftest import privhp_config
from tests.helpers import release, state_of

CONFIGS = {
    "cms float": privhp_config(d=2, r=16, k=64, w=256, j=2),
    "cs float": privhp_config(d=2, r=16, k=64, w=256, j=3, sketch="cs"),
    "cms int bounds": privhp_config(d=2, r=16, k=64, w=256, j=2, lo=[0, -2048], hi=[4096, 2048]),
    "pmm": privhp_config(d=1, r=10, k=4096, w=1),
    "deep 3-d": privhp_config(d=3, r=29, k=8, w=64, j=1, lo=[0.0, -1.0, 10], hi=[1.0, 1.0, 20]),
    "k=1": privhp_config(d=1, r=8, k=1, w=16, j=2),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batch_equals_per_item(name):
    cfg = CONFIGS[name]
    m = cfg["mechanisms"][0]
    rng = np.random.default_rng(0)
    lo, hi = np.array(m["lo"], float), np.array(m["hi"], float)
    x = lo + (hi - lo) * (rng.random((3000, len(lo))) * 1.2 - 0.1)   # 10% out of range each side
    x[:20] = lo                                                      # edges exactly
    x[20:40] = hi
    if isinstance(m["lo"][0], int):
        x = np.round(x)
        x[40:50, 0] += 0.5                                           # non-integral reading on an int channel
    a = agent.Agent(cfg, seed=b"batch-seed-00000")
    a.update_many(as_readings(x, cfg))
    b = agent.Agent(cfg, seed=b"batch-seed-00000")
    ingest(b.mechs[0], x[:1234])
    ingest(b.mechs[0], x[1234:])                                     # blocks compose
    assert a.release() == b.release()


def test_split_closed_form_properties():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 100, 1000)
    c0, c1 = rng.normal(40, 60, 1000), rng.normal(40, 60, 1000)
    a, b = split(p, c0, c1)
    assert np.all(a >= 0) and np.all(b >= 0)
    np.testing.assert_allclose(a + b, p)
    # shared error cancels: adding the same offset to both children changes nothing
    a2, b2 = split(p, np.maximum(c0, 0) + 7.0, np.maximum(c1, 0) + 7.0)
    inside = (np.maximum(c0, 0) + 7 < p) & (np.maximum(c1, 0) + 7 < p) & (np.abs(c0 - c1) < p / 2)
    np.testing.assert_allclose(a2[inside], split(p, np.maximum(c0, 0), np.maximum(c1, 0))[0][inside])


@pytest.mark.parametrize("k,w,j,sketch", [(16, 64, 1, "cms"), (8, 32, 3, "cms"), (32, 64, 3, "cs"),
                                          (4096, 1, 1, "cms")])
def test_consistency_invariants(make_config, k, w, j, sketch):
    cfg = make_config(d=2, r=12, k=k, w=w, j=j, sketch=sketch)
    data = multifractal(np.random.default_rng(1), 5000, 2, 0.8)
    st = state_of(cfg, data)
    trace = []
    leaves = grow(st, trace)
    counts = {}
    for level, paths, c in trace:
        for p, v in zip(np.asarray(paths).tolist(), np.asarray(c).tolist()):
            counts[(level, p)] = v
    for lv, p, m in zip(leaves.level.tolist(), leaves.path.tolist(), leaves.mass.tolist()):
        counts[(lv, p)] = m
    internal = {(lv, p) for lv, paths, _ in trace for p in np.asarray(paths).tolist()}
    assert all(v >= 0 for v in counts.values())
    for lv, p in internal:
        kids = counts[(lv + 1, 2 * p)] + counts[(lv + 1, 2 * p + 1)]
        assert kids == pytest.approx(counts[(lv, p)], rel=1e-9, abs=1e-9)
    assert leaves.mass.sum() == pytest.approx(counts[(0, 0)], rel=1e-9)
    if k < (1 << 12):
        # at most k hot nodes per grown level
        for lv, paths, _ in trace:
            if lv > st.L:
                assert len(paths) <= k


def test_sampler_reproduces_leaf_probabilities(make_config):
    cfg = make_config(d=2, r=6, k=4, w=16)
    data = multifractal(np.random.default_rng(2), 4000, 2, 0.7)
    gen = assemble_privhp(list(iter_frames(release(cfg, data))))
    n = 200000
    pts = gen.sample(n, np.random.default_rng(3))
    inside = np.all((pts[:, None, :] >= gen.box_lo[None]) & (pts[:, None, :] < gen.box_hi[None]), axis=2)
    assert np.all(inside.sum(axis=1) == 1), "leaf boxes must partition the domain"
    counts = inside.sum(axis=0)
    expected = gen.prob * n
    keep = expected >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    chi2 = ((obs - exp) ** 2 / exp).sum()
    assert stats.chi2.sf(chi2, len(exp) - 1) > 1e-6


def test_sampler_is_uniform_inside_a_leaf(make_config):
    cfg = make_config(d=1, r=3, k=2, w=4)
    gen = assemble_privhp(list(iter_frames(release(cfg, np.full((500, 1), 0.3)))))
    pts = gen.sample(50000, np.random.default_rng(4))[:, 0]
    i = np.argmax(gen.prob)
    a, b = gen.box_lo[i, 0], gen.box_hi[i, 0]
    sel = pts[(pts >= a) & (pts < b)]
    assert stats.kstest((sel - a) / (b - a), "uniform").pvalue > 1e-6


def test_nonpositive_root_gives_uniform_generator(make_config):
    cfg = make_config(d=2, r=8, k=4, w=16)
    frame = release(cfg, np.zeros((0, 2)), seed=b"empty-stream-seed")
    gen = assemble_privhp(list(iter_frames(frame)))
    pts = gen.sample(20000, np.random.default_rng(5))
    assert np.all(pts >= 0) and np.all(pts < 1)
    if gen.leaves.level.size == 1:
        assert stats.kstest(pts[:, 0], "uniform").pvalue > 1e-6
