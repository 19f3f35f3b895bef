"""Host collision recovery for PrivHP sketch levels (growth.recover, issue 13):
least squares over every cell the candidates touch instead of the minimum
over rows. Exact where the cells determine the counts; better than the
minimum when candidates crowd the cells; and, on a
seeded device release, a smaller joint W1 than the minimum over rows."""
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

import edgesynth as es
from edgesynth.data.synthdata import multifractal
from edgesynth.frames import iter_frames
from edgesynth.mechanisms.privhp import growth
from edgesynth.mechanisms.privhp.growth import recover, sketch_cells, split
from edgesynth.merge import merge_releases
from tests.conftest import privhp_config


def _state(j, w, sketch="cms", seed=0, var=0.0):
    """A one-sketch state with random hash parameters (the device's hash
    family: a + b x0 + c x1 + d x2 mod P) and no counters yet."""
    rng = np.random.default_rng(seed)
    prm = rng.integers(1, 1 << 15, size=(1, j, 8 if sketch == "cs" else 4))
    return SimpleNamespace(j=j, w=w, sketch=sketch, hash=prm, sketches=np.zeros((1, j, w), np.int64),
                           sketch_var=np.array([var]))


def _fill(state, level, nodes, counts):
    """Sketch 0 as the device leaves it after ``counts[i]`` readings in node ``nodes[i]``."""
    rows, signs = sketch_cells(state, 0, level, nodes)
    flat = np.zeros(state.j * state.w, np.int64)
    np.add.at(flat, rows.ravel(), (signs * counts[None, :]).ravel())
    state.sketches[0] = flat.reshape(state.j, state.w)


def _min_rows(state, level, nodes):
    """The paper's query: count-min's minimum over rows."""
    rows, _ = sketch_cells(state, 0, level, nodes)
    return state.sketches[0].ravel()[rows].min(axis=0).astype(float)


@pytest.mark.parametrize("sketch", ["cms", "cs"])
def test_exact_without_noise_when_the_cells_determine_the_counts(sketch):
    st = _state(j=3, w=256, sketch=sketch)
    level, parents = 10, np.arange(0, 600, 7)
    kids = np.column_stack((2 * parents, 2 * parents + 1))
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 500, size=kids.size)
    _fill(st, level, kids.ravel(), counts)
    p = counts.reshape(-1, 2).sum(axis=1).astype(float)
    a, b = recover(st, 0, level, kids, p)
    np.testing.assert_allclose(np.column_stack((a, b)).ravel(), counts, atol=0.01)  # lsmr's tolerance


def test_children_are_consistent_non_negative_and_blind_to_mass_outside_the_candidates():
    """Noise, an emptied parent, and 400 readings of the level outside the
    candidates (pruned subtrees): pairs stay in [0, parent] and sum to it,
    and on count-min the outside mass, which adds to cells alike in the
    mean, moves no estimate at all when it is spread evenly (a pair enters
    every row with +1 and -1)."""
    st = _state(j=2, w=64, var=400.0)
    level, parents = 12, np.arange(40)
    kids = np.column_stack((2 * parents, 2 * parents + 1))
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 50, size=kids.size)
    others = np.arange(5000, 5400)
    _fill(st, level, np.concatenate((kids.ravel(), others)), np.concatenate((counts, np.full(400, 3))))
    st.sketches[0] += rng.integers(-40, 41, size=st.sketches[0].shape)
    p = counts.reshape(-1, 2).sum(axis=1).astype(float)
    p[3] = 0.0                                           # a parent consistency emptied
    a, b = recover(st, 0, level, kids, p)
    assert np.all(a >= 0) and np.all(b >= 0) and a[3] == b[3] == 0
    np.testing.assert_allclose(a + b, p)
    st.sketches[0] += 17                                 # the same outside mass in every cell
    a2, _ = recover(st, 0, level, kids, p)
    np.testing.assert_allclose(a2, a, atol=0.05)         # LSMR's tolerance


def _crowded(seed):
    """600 candidates of a skewed level (parents Pareto, children split
    0.8/0.2 on average) in one row of 32 cells, with discrete-Laplace-like
    noise of sd 5: (state, kids, parents, true child counts)."""
    st = _state(j=1, w=32, seed=seed, var=25.0)
    level, parents = 14, np.arange(0, 300 * 13, 13)
    kids = np.column_stack((2 * parents, 2 * parents + 1))
    rng = np.random.default_rng(100 + seed)
    p_true = (rng.pareto(1.2, size=parents.size) * 20 + 1).astype(np.int64)
    left = rng.binomial(p_true, 0.8)
    counts = np.column_stack((left, p_true - left)).ravel()
    _fill(st, level, kids.ravel(), counts)
    st.sketches[0] += np.round(rng.laplace(0, 5 / np.sqrt(2), st.sketches[0].shape)).astype(np.int64)
    return st, level, kids, p_true.astype(float), counts


def test_crowded_cells_are_shared_among_their_candidates():
    """Far more candidates than cells (the regime of small devices: the
    prior decides much of the answer): the minimum over rows gives every
    candidate of a cell the whole cell; the fit shares it. Over 8 seeds the
    fit's L1 error on the children must beat the minimum's on every seed
    and by 0.75x on average (12 seeds measured 0.41-0.85x, mean 0.54x)."""
    ratios = []
    for seed in range(8):
        st, level, kids, p, counts = _crowded(seed)
        a, b = recover(st, 0, level, kids, p)
        est = _min_rows(st, level, kids.ravel()).reshape(-1, 2)
        a0, b0 = split(p, est[:, 0], est[:, 1])
        err = np.abs(np.column_stack((a, b)).ravel() - counts).sum()
        ratios.append(err / np.abs(np.column_stack((a0, b0)).ravel() - counts).sum())
    assert max(ratios) < 1.0 and np.mean(ratios) < 0.75, ratios


def _leaf_tv(x, leaves, r):
    """Total variation between the grown partition's leaf masses and the
    data's share in each leaf (x in [0, 1)^d; the leaves tile the box)."""
    d = x.shape[1]
    path = np.zeros(len(x), np.int64)
    for t in range(1, r + 1):                 # level t halves channel (t-1) mod d (growth.leaf_cells)
        c, b = (t - 1) % d, (t - 1) // d
        path = (path << 1) | ((x[:, c] * 2.0 ** (b + 1)).astype(np.int64) & 1)
    start = leaves.path << (r - leaves.level)
    order = np.argsort(start)
    leaf = order[np.searchsorted(start[order], path, side="right") - 1]
    share = np.bincount(leaf, minlength=start.size) / len(x)
    mass = np.maximum(leaves.mass, 0.0)
    return 0.5 * np.abs(mass / mass.sum() - share).sum()


@pytest.mark.slow
def test_recovery_beats_the_minimum_over_rows_on_a_device_release(monkeypatch):
    """A crowded 32 KiB-class shape (2048 candidates kept, w = 256, j = 3)
    on 10**6 multifractal points, two seeded releases: the total variation
    between the leaf masses and the data's shares in the same leaves drops
    by more than 1.2x (measured 0.27 against 0.40, 1.5x; the joint W1's
    tree-metric bound at the same shape 1.58x, benchmarks/RESULTS.md)."""
    x = multifractal(np.random.default_rng(5), 10 ** 6, 2, 0.8)
    ours, paper = [], []
    for rep in range(2):
        cfg = privhp_config(d=2, r=15, k=2048, w=256, j=3, hash_seed="rec-%d" % rep)
        frames = es.simulate(cfg, x, seed=zlib.crc32(b"rec%d" % rep), runtime="numpy")
        _, state = merge_releases(list(iter_frames(frames)), "privhp")
        ours.append(_leaf_tv(x, growth.grow(state), 15))

        def minimum(st, s, level, kids, parent):
            est = _min_rows(SimpleNamespace(j=st.j, w=st.w, hash=st.hash[s:s + 1],
                                            sketches=st.sketches[s:s + 1], sketch="cms"),
                            level, kids.ravel()).reshape(-1, 2)
            return split(parent, est[:, 0], est[:, 1])
        with monkeypatch.context() as mp:
            mp.setattr(growth, "recover", minimum)
            paper.append(_leaf_tv(x, growth.grow(state), 15))
    assert np.mean(paper) > 1.2 * np.mean(ours), (ours, paper)
