"""assemble --store over marginals windows of several plans (issue 18): the
store merges each configuration's frames on its own and gives the bytes of
assembling the same frame files, locally and on Dask; any other selection
of several configurations is still refused, and so are too many plans."""
import numpy as np
import pandas as pd
import pytest

import edgesynth as es
from edgesynth.errors import InputError
from edgesynth.fleet import assembly
from edgesynth.frames import parse_frame

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "hour", "values": [0, 1, 2, 3]},
                      {"name": "temp", "bounds": [-10.0, 30.0], "bins": 8}]}
N = 3000


def records(seed):
    rng = np.random.default_rng(seed)
    site = rng.choice(["north", "south", "east", "west"], N, p=[.5, .3, .15, .05])
    temp = np.where(site == "north", rng.normal(5, 3, N), rng.normal(15, 5, N)).round(2)
    return pd.DataFrame({"site": site, "hour": rng.integers(0, 4, N), "temp": temp})


def store_of(path, frames):
    with es.connect_store(str(path), create=True) as st:
        st.put_many([parse_frame(f)[0] for f in frames])
    return str(path)


@pytest.fixture(scope="module")
def two_plans(tmp_path_factory):
    """Frames of two marginals plans (another epsilon: another config id),
    devices interleaved across the plans, and a store holding them."""
    a = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1)
    b = es.plan(mechanism="marginals", schema=SCHEMA, epsilon="1/2")
    frames = [es.simulate(cfg, records(i), seed=i, runtime="numpy", epoch=epoch, device_id=dev)
              for i, (cfg, epoch, dev) in enumerate([(a, 0, "d1"), (b, 1, "d2"), (a, 0, "d3"), (b, 1, "d1")])]
    ids = {parse_frame(f)[0].mechs[0].config_id() for f in frames}
    assert len(ids) == 2  # two plans
    return frames, store_of(tmp_path_factory.mktemp("mst") / "s.db", frames)


def test_store_of_two_plans_gives_the_frame_files_bytes(two_plans):
    frames, store = two_plans
    from_files = es.assemble(frames)
    from_store = es.assemble(store=store)
    assert from_store.to_bytes() == from_files.to_bytes()
    s = from_store.summary()
    assert len(s["plans"]) == 2 and s["frames"] == 4
    assert es.assemble(store=store, mechanism="marginals").to_bytes() == from_files.to_bytes()
    # one configuration chosen: only that plan's frames
    cid = parse_frame(frames[0])[0].mechs[0].config_id()
    assert es.assemble(store=store, config_id=cid).to_bytes() == es.assemble([frames[0], frames[2]]).to_bytes()


def test_cdf_and_marginals_configurations_are_still_refused(two_plans, tmp_path):
    frames, _ = two_plans
    cdf = es.plan({"t": (0, 50)}, epsilon=1, mechanism="cdf", ram="32K", bins=64)
    other = es.simulate(cdf, np.random.default_rng(5).uniform(0, 50, size=(200, 1)), seed=5, runtime="numpy",
                        device_id="d9", epoch=0)
    store = store_of(tmp_path / "mixed.db", [frames[0], frames[1], other])
    with pytest.raises(InputError, match="3 configurations"):
        es.assemble(store=store)
    with pytest.raises(InputError, match="configurations"):
        es.assemble(store=store, mechanism="marginals")


def test_a_mechanism_other_than_marginals_is_refused_over_several_plans(two_plans):
    with pytest.raises(InputError, match="2 configurations"):
        es.assemble(store=two_plans[1], mechanism="cdf")


def test_more_plans_than_the_cap_are_refused_in_one_line(two_plans, monkeypatch):
    monkeypatch.setattr(assembly, "MAX_PLANS", 1)
    with pytest.raises(InputError, match="2 configurations; marginals windows of at most 1 plans"):
        es.assemble(store=two_plans[1])


def test_dask_workers_give_the_same_bytes(two_plans):
    pytest.importorskip("distributed", reason="the cluster extra (dask[distributed]) is not installed")
    frames, store = two_plans
    assert es.assemble(store=store, workers=2).to_bytes() == es.assemble(frames).to_bytes()
