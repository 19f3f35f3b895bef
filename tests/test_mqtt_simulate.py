"""`simulate --runtime micropython --publish`: the device on the MicroPython unix
port publishes each window's frame itself, through agent/transport/mqtt.py and
umqtt.simple, to a real mosquitto and `edgesynth gateway`; the outbox frees a
frame on its receipt and the command waits for every receipt.

Checks: the frames are byte-identical to `simulate --runtime micropython -o`
for the same seed, and stored byte-identical; every window gets a "stored"
receipt (a second run: "duplicate"), printed as `publish` prints it; the
library's es.simulate_publish gives the same, and with a host runtime publishes
the same bytes from the host; a gateway that rejects the frames (wrong key)
makes the command exit 2; an unreachable broker, and umqtt.simple neither
cached nor reachable, are one-line errors. With more windows than outbox slots
a receipt reaches the host before the last release (frames go out as they are
released); the device's outbox ends empty, or holding exactly the frames
without a receipt, and anything else is an error; with -o - the frames alone
are on stdout.
"""
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.fleet.keys import new_key
from edgesynth.ram import TRANSPORT_SLOTS
from edgesynth.runtimes import umqtt
from edgesynth.runtimes.micropython import _check_outbox
from tests.mqtt_broker import umqtt_path  # noqa: F401  (pytest fixture)
from tests.test_mqtt import Gateway, broker, no_stray_gateways, receipts, stored_raw  # noqa: F401  (fixtures)
from tests.test_store import run

SEED = "00112233445566778899aabbccddeeff"
WINDOWS = ("--time-column", "t", "--window", 10, "--start", 0, "--end", 40)


@pytest.fixture
def world(tmp_path, broker, umqtt_path, monkeypatch):  # noqa: F811
    """(tmp, keyring, config, readings, broker, gateway); the umqtt cache is the
    session's (no network needed once cached)."""
    monkeypatch.setenv(umqtt.CACHE_ENV, umqtt_path.rsplit("/", 1)[0])
    ring = str(tmp_path / "ring.json")
    new_key(ring, "dev-1")
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "64K", "--hash-seed", "ab",
               "-o", tmp_path / "c.json")[0] == 0
    (tmp_path / "d.csv").write_text("t,x0\n" + "".join("%d,%.3f\n" % (t, (t * 7 % 40) / 40) for t in range(40)))
    gw = Gateway(broker.url, tmp_path / "gw.db", ring)
    gw.wait_subscribed()
    return tmp_path, ring, broker, gw


def simulate(tmp, ring, out, *extra):
    return run("simulate", "--config", tmp / "c.json", "--input", tmp / "d.csv", "--device-id", "dev-1",
               "--keyring", ring, "--runtime", "micropython", "--seed", SEED, *WINDOWS, "-o", tmp / out, *extra)


def test_device_publishes_each_window_byte_identical_to_the_offline_run(world):
    tmp, ring, broker, gw = world  # noqa: F811
    code, out, err = simulate(tmp, ring, "offline.bin")
    assert code == 0, err
    code, out, err = simulate(tmp, ring, "published.bin", "--publish", broker.url)
    assert code == 0, err
    assert (tmp / "published.bin").read_bytes() == (tmp / "offline.bin").read_bytes()
    assert receipts(out) == [("dev-1", e, "stored") for e in range(4)]
    assert "4 frame(s) published: 4 stored or duplicate, 0 refused, 0 without a receipt" in err
    stored = stored_raw(tmp / "gw.db")
    assert [(d, e) for d, e, _ in stored] == [("dev-1", e) for e in range(4)]
    assert b"".join(raw for _, _, raw in stored) == (tmp / "offline.bin").read_bytes()
    # the same windows again: the device's frames are duplicates at the gateway
    code, out, err = simulate(tmp, ring, "again.bin", "--publish", broker.url)
    assert code == 0, err
    assert receipts(out) == [("dev-1", e, "duplicate") for e in range(4)]
    assert gw.finish() == 0


@pytest.mark.parametrize("runtime", ["micropython", "cpython"])
def test_frames_on_stdout_stay_clean_and_receipts_go_to_stderr(world, runtime):
    """-o -: stdout carries the frames only, for the device's publisher and the host's alike."""
    tmp, ring, broker, gw = world  # noqa: F811
    code, out, err = simulate(tmp, ring, "offline.bin", "--runtime", runtime)
    assert code == 0, err
    r = CliRunner().invoke(main, [str(a) for a in (
        "simulate", "--config", tmp / "c.json", "--input", tmp / "d.csv", "--device-id", "dev-1", "--keyring", ring,
        "--runtime", runtime, "--seed", SEED, *WINDOWS, "--publish", broker.url, "-o", "-")],
        catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes == (tmp / "offline.bin").read_bytes()
    assert sorted(receipts(r.stderr)) == [("dev-1", e, "stored") for e in range(4)]
    assert gw.finish() == 0


def test_library_simulate_publish_matches_simulate(world):
    tmp, ring, broker, gw = world  # noqa: F811
    import numpy as np
    t = np.arange(40.0)
    data = {"x0": (t * 7 % 40) / 40}
    got = []
    res = es.simulate_publish(tmp / "c.json", data, broker.url, SEED, runtime="micropython", device_id="dev-1",
                              keyring=ring, window=10, start=0, end=40, times=t, seq=5, on_receipt=got.append,
                              timeout=20)
    assert res.ok, res.summary()
    want = es.simulate_windows(tmp / "c.json", data, t, 10, 0, 40, SEED, runtime="micropython", device_id="dev-1",
                               keyring=ring, seq=5)
    assert [(f.epoch, f.raw) for f in res.frames] == want
    assert sorted(f.epoch for f in got) == [0, 1, 2, 3] and all(f.receipt["result"] == "stored" for f in got)
    assert [f.receipt["seq"] for f in res.frames] == [5, 6, 7, 8]
    # the host runtimes publish from the host: the same bytes, so the gateway has them already
    res = es.simulate_publish(tmp / "c.json", data, broker.url, SEED, runtime="cpython", device_id="dev-1",
                              keyring=ring, window=10, start=0, end=40, times=t, seq=5, timeout=20)
    assert [(f.epoch, f.raw) for f in res.frames] == want
    assert res.ok and [f.receipt["result"] for f in res.frames] == ["duplicate"] * 4
    assert gw.finish() == 0


def test_each_frame_goes_out_as_it_is_released_and_the_outbox_ends_empty(world):
    """More windows than the outbox's 16 slots: the receipt for window 0 comes
    (in the device's own output order) before the last window's release; a
    device that published only after its run would show every release first."""
    tmp, ring, broker, gw = world  # noqa: F811
    import numpy as np
    n = TRANSPORT_SLOTS + 4
    t = np.arange(2.0 * n)
    events = []
    res = es.simulate_publish(tmp / "c.json", {"x0": (t % 10) / 10}, broker.url, SEED, runtime="micropython",
                              device_id="dev-1", keyring=ring, window=2, start=0, end=2 * n, times=t, timeout=60,
                              progress=lambda k: events.append("released"),
                              on_receipt=lambda f: events.append(("receipt", f.epoch)))
    assert res.ok, res.summary()  # and publish_micropython found the device's outbox empty
    assert events.count("released") == n and sorted(e for e in events if e != "released") == \
        [("receipt", e) for e in range(n)]
    last_release = len(events) - 1 - events[::-1].index("released")
    assert events.index(("receipt", 0)) < last_release, events
    assert gw.finish() == 0


def test_frames_without_a_receipt_stay_in_the_outbox_and_are_named(tmp_path, broker, umqtt_path,  # noqa: F811
                                                                    monkeypatch):
    """No gateway: the device flushes for ``timeout`` and keeps every frame;
    publish_micropython finds exactly those in its outbox (no error) and the
    result names them."""
    monkeypatch.setenv(umqtt.CACHE_ENV, umqtt_path.rsplit("/", 1)[0])
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "64K", "-o", tmp_path / "c.json")[0] == 0
    res = es.simulate_publish(tmp_path / "c.json", {"x0": [0.1, 0.5, 0.9]}, broker.url, SEED,
                              runtime="micropython", window=10, start=0, end=20, times=[1, 12, 15], timeout=1)
    assert not res.ok and [(f.epoch, f.receipt) for f in res.missing] == [(0, None), (1, None)]


def test_an_outbox_that_disagrees_with_the_receipts_is_an_error():
    windows = [(0, 5, None, []), (1, 6, None, [])]
    _check_outbox([], windows, {0, 1})  # every receipt, empty outbox
    _check_outbox([[1, 6]], windows, {0})  # window 1 unanswered and still held
    with pytest.raises(es.InputError, match=r"outbox ends holding the frames \(epoch, seq\) \[\(0, 5\)\], "
                                            r"but the frames without a final receipt are none"):
        _check_outbox([[0, 5]], windows, {0, 1})  # answered, yet still held
    with pytest.raises(es.InputError, match=r"holding the frames \(epoch, seq\) none, .* are \[\(1, 6\)\]"):
        _check_outbox([], windows, {0})  # unanswered, yet gone from the outbox


def test_rejected_frames_make_the_command_fail(world):
    tmp, ring, broker, gw = world  # noqa: F811
    other = str(tmp / "other.json")
    new_key(other, "dev-1")  # the device tags with a key the gateway does not hold
    code, out, err = simulate(tmp, other, "bad.bin", "--publish", broker.url)
    assert code == 2
    lines = [line for line in out.splitlines() if line.startswith("receipt ")]
    assert len(lines) == 4 and all(" rejected: " in line and "tag" in line for line in lines), out
    assert "0 stored or duplicate, 4 refused" in err and "Traceback" not in err
    assert stored_raw(tmp / "gw.db") == []
    assert gw.finish() == 0


def test_an_unreachable_broker_is_a_one_line_error(tmp_path, umqtt_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(umqtt.CACHE_ENV, umqtt_path.rsplit("/", 1)[0])
    (tmp_path / "d.csv").write_text("x0\n0.5\n")
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "64K", "-o", tmp_path / "c.json")[0] == 0
    code, out, err = run("simulate", "--config", tmp_path / "c.json", "--input", tmp_path / "d.csv", "--runtime",
                         "micropython", "--publish", "mqtt://127.0.0.1:9", "-o", tmp_path / "f.bin")
    assert code == 2 and err.startswith("error: cannot reach the broker mqtt://127.0.0.1:9")
    assert len(err.strip().splitlines()) == 1


def test_no_cached_umqtt_and_no_network_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv(umqtt.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(umqtt, "INDEX", "http://127.0.0.1:9/simple/")  # nothing listens: no network
    with pytest.raises(es.InputError, match="needs umqtt.simple 1.3.4.*not cached.*umqtt/simple.py"):
        umqtt.umqtt_dir()
    (tmp_path / "d.csv").write_text("x0\n0.5\n")
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "64K", "-o", tmp_path / "c.json")[0] == 0
    code, out, err = run("simulate", "--config", tmp_path / "c.json", "--input", tmp_path / "d.csv", "--runtime",
                         "micropython", "--publish", "mqtt://127.0.0.1:9", "-o", tmp_path / "f.bin")
    assert code == 2 and err.startswith("error: publishing from the micropython runtime needs umqtt.simple")
    assert len(err.strip().splitlines()) == 1


def test_a_tampered_cached_copy_is_not_used(tmp_path, monkeypatch, umqtt_path):  # noqa: F811
    monkeypatch.setattr(umqtt, "INDEX", "http://127.0.0.1:9/simple/")
    bad = tmp_path / ("umqtt-simple-" + umqtt.VERSION) / "umqtt"
    bad.mkdir(parents=True)
    (bad / "simple.py").write_text("raise SystemExit('not umqtt')\n")
    with pytest.raises(es.InputError, match="not cached"):
        umqtt.umqtt_dir(str(tmp_path))
    assert umqtt.umqtt_dir(umqtt_path.rsplit("/", 1)[0]) == umqtt_path  # the good copy, offline
