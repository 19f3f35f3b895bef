"""assemble on Dask: a tree reduction over device ranges of the store, each
worker process opening the store itself, gives the single-process bytes."""
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.fleet import assembly
from edgesynth.frames import parse_frame

distributed = pytest.importorskip("distributed", reason="the cluster extra (dask[distributed]) is not installed")


def make_store(target, cfg, d, devices, epochs=2):
    """A store (a SQLite path or a postgresql:// URL) of ``devices`` x ``epochs`` frames."""
    rng = np.random.default_rng(11)
    frames = [es.simulate(cfg, rng.uniform(0, 50, size=(100, d)), seed=i * 10 + e, runtime="numpy",
                          device_id="dev%02d" % i, epoch=e) for i in range(devices) for e in range(epochs)]
    with es.connect_store(str(target), create=True) as st:
        st.put_many([parse_frame(f)[0] for f in frames])
    return str(target)


def cdf_plan():
    return es.plan({"t": (0, 50)}, epsilon="1/3", mechanism="cdf", ram="32K", bins=512, device_runtime="c")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask")
    hp = es.plan({"t": (0, 50), "h": (0, 100)}, epsilon=1, ram="32K", n_max=10 ** 4, device_runtime="c")
    return {"privhp": make_store(tmp / "hp.db", hp, 2, 9), "cdf": make_store(tmp / "cdf.db", cdf_plan(), 1, 11)}


@pytest.fixture(scope="module")
def cluster():
    """One local cluster of two worker processes for the module (starting one costs seconds)."""
    c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                 dashboard_address="127.0.0.1:0", silence_logs=40)
    yield c
    c.close()


@pytest.mark.parametrize("kind", ["privhp", "cdf"])
def test_cluster_merge_is_byte_identical(stores, cluster, kind):
    local = es.assemble(store=stores[kind])
    on_dask = es.assemble(store=stores[kind], cluster=cluster.scheduler_address)
    assert on_dask.to_bytes() == local.to_bytes()
    assert on_dask.summary()["frames"] == local.summary()["frames"]
    with es.connect_store(stores[kind]) as st:   # the two workers' store was cut in several ranges, then merged
        assert len(st.device_ranges(assembly.PARTS_PER_WORKER * 2)) == 4


def test_cli_workers_writes_the_same_generator(stores, tmp_path):
    out = tmp_path / "g.bin"
    r = CliRunner().invoke(main, ["assemble", "--store", stores["cdf"], "--workers", "2", "-o", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes() == es.assemble(store=stores["cdf"]).to_bytes()


def test_without_dask_or_scheduler_the_error_says_what_to_do(stores, monkeypatch):
    monkeypatch.setattr(assembly, "CLUSTER_TIMEOUT_S", 2)
    r = CliRunner().invoke(main, ["assemble", "--store", stores["cdf"], "--cluster", "tcp://127.0.0.1:9"])
    assert r.exit_code == 2 and "cannot reach the Dask scheduler tcp://127.0.0.1:9" in r.stderr, r.stderr
    monkeypatch.setitem(sys.modules, "distributed", None)     # `import distributed` now fails
    with pytest.raises(es.InputError, match=r"pip install 'edgesynth\[cluster\]'"):
        es.assemble(store=stores["cdf"], workers=2)
    with pytest.raises(es.InputError, match="not both"):
        es.assemble(store=stores["cdf"], workers=2, cluster="tcp://127.0.0.1:9")


def test_workers_read_a_postgresql_store_by_its_url(stores, cluster):
    """Each task connects to the PostgreSQL store itself (the URL as given)."""
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'edgesynth[postgres]')")
    from tests.pg_server import Server, binaries
    if binaries() is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql; .ci/run installs it)")
    srv = Server(fsync=False)
    try:
        url = make_store(srv.database("dask"), cdf_plan(), 1, 11)
        got = es.assemble(store=url, cluster=cluster.scheduler_address).to_bytes()
    finally:
        srv.stop()
    assert got == es.assemble(store=stores["cdf"]).to_bytes()


def test_a_failed_dask_merge_is_one_error_line(stores, tmp_path, cluster, monkeypatch):
    """A damaged stored frame on --workers 1: stderr is the one error line (no
    worker log or traceback); an error that is not edgesynth's (here a task
    that divides by zero) is an InputError "the Dask merge failed: ..."."""
    import shutil
    import sqlite3
    db = str(tmp_path / "bad.db")
    shutil.copy(stores["cdf"], db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE frames SET raw = ? WHERE device = 'dev03' AND epoch = 1", (b"\x00garbage",))
    r = subprocess.run([sys.executable, "-c", "from edgesynth.cli import main; main()", "assemble", "--store", db,
                        "--workers", "1", "-o", str(tmp_path / "g.bin")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: %s: stored frame" % db) and "(after device 'dev03' epoch 0" in r.stderr
    monkeypatch.setattr(assembly, "_merge_part", lambda *args: 1 // 0)   # pickled by value: runs on the workers
    with pytest.raises(es.InputError, match=r"^the Dask merge failed: ZeroDivisionError: integer division or modulo "
                                            r"by zero$"):
        es.assemble(store=stores["cdf"], cluster=cluster.scheduler_address)
