"""The MQTT live path, host side, against a real mosquitto on a loopback port:
frames published arrive byte-identical in the store, resends are duplicates,
a hostile publisher never gets a frame stored, and neither gateway kills
(SIGKILL) nor a broker restart lose a frame."""
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

import edgesynth as es
from edgesynth import agent
from edgesynth.fleet.keys import load, new_key
from tests.mqtt_broker import Broker, free_port
from tests.test_store import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def broker(tmp_path):
    """tests/mqtt_broker.py's mosquitto (skips without it), in its own folder."""
    (tmp_path / "broker").mkdir()
    b = Broker(tmp_path / "broker")
    yield b
    b.stop()


class Gateway:
    """`edgesynth gateway` in a subprocess, its stdout and stderr lines collected.
    Every one started is killed when its test ends, passed or failed (no_stray_gateways)."""
    started = []

    def __init__(self, url, db, ring, *extra):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-m", "edgesynth.cli", "gateway", "--broker", url,
                                      "--store", str(db), "--keyring", ring, *extra], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        Gateway.started.append(self.proc)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._collect, args=(s, lines), daemon=True)
                        for s, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _collect(stream, lines):
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_subscribed(self, n=1, timeout=10):
        end = time.monotonic() + timeout
        while sum("subscribed to" in line for line in self.err) < n:
            assert self.proc.poll() is None and time.monotonic() < end, self.err
            time.sleep(0.02)

    def finish(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        code = self.proc.wait(10)
        for t in self.threads:
            t.join(5)
        return code


@pytest.fixture(autouse=True)
def no_stray_gateways():
    yield
    while Gateway.started:
        p = Gateway.started.pop()
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.fixture
def fleet(env, broker):
    tmp, ring, keys, frame = env
    gw = Gateway(broker.url, tmp / "gw.db", ring)
    gw.wait_subscribed()
    yield tmp, ring, frame, broker, gw
    if gw.proc.poll() is None:
        gw.finish(signal.SIGKILL)


def stored_raw(db):
    con = sqlite3.connect(str(db))
    try:
        return sorted(con.execute("SELECT device, epoch, raw FROM frames"))
    finally:
        con.close()


def receipts(out):
    """[(label..., result)] of `publish` lines: (device, epoch, result)."""
    return [(p[4], int(p[5]), p[6]) for p in (line.split() for line in out.splitlines()) if p[0] == "receipt"]


def test_published_frames_arrive_byte_identical_and_resends_are_duplicates(fleet):
    tmp, ring, frame, broker, gw = fleet
    f = tmp / "frames.bin"
    f.write_bytes(b"".join(frame(d, e, e) for d in ("a", "b") for e in range(4)))
    code, out, err = run("publish", f, "--broker", broker.url, "--timeout", 20)
    assert code == 0, err
    assert sorted(receipts(out)) == sorted((d, e, "stored") for d in ("a", "b") for e in range(4))
    # the same bytes through files: the same rows
    assert run("ingest", f, "--store", tmp / "files.db", "--keyring", ring)[0] == 0
    assert stored_raw(tmp / "gw.db") == stored_raw(tmp / "files.db")
    before = stored_raw(tmp / "gw.db")
    code, out, err = run("publish", f, "--broker", broker.url, "--timeout", 20)
    assert code == 0, err
    assert [r for *_, r in receipts(out)] == ["duplicate"] * 8
    assert stored_raw(tmp / "gw.db") == before
    assert gw.finish() == 0
    assert sum(line.split()[0] == "ack" for line in gw.out) == 16
    assert "gateway stopped: 8 stored, 8 duplicate(s), 0 conflict(s), 0 rejected" in gw.err[-1]


def _raw_publish(url, topic, payload, device):
    """Publish ``payload`` as a hostile client would; the receipt's dict."""
    import paho.mqtt.client as mqtt
    got = threading.Event()
    answer = {}
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="hostile")

    def on_message(cl, u, msg):
        answer.update(json.loads(msg.payload))
        got.set()
    subscribed = threading.Event()
    c.on_message = on_message
    c.on_subscribe = lambda *a: subscribed.set()
    c.connect("127.0.0.1", int(url.rsplit(":", 1)[1]))
    c.loop_start()
    c.subscribe("edgesynth/%s/receipts" % device, qos=1)
    assert subscribed.wait(5)
    c.publish(topic, payload, qos=1).wait_for_publish(5)
    assert got.wait(10), "no receipt for %s" % topic
    c.disconnect()
    c.loop_stop()
    assert answer["sha256"] == hashlib.sha256(payload).hexdigest()
    return answer


def test_hostile_publisher_gets_rejected_receipts_and_nothing_stored(fleet):
    tmp, ring, frame, broker, gw = fleet
    good = frame("a", 1, 1)
    bad_tag = good[:-1] + bytes([good[-1] ^ 1])
    cases = [
        ("edgesynth/a/frames/1", bad_tag, "a", "does not verify"),
        ("edgesynth/a/frames/1", b"\x00garbage" * 100, "a", "bad magic"),
        ("edgesynth/b/frames/1", good, "b", "device 'a' published under the topic of device 'b'"),
        ("edgesynth/a/frames/1", good + b"\x00", "a", "1 bytes after the frame"),
        ("edgesynth/a/frames/1", b"\x94" * ((1 << 20) + 1), "a", "above the gateway's 1048576-byte limit"),
    ]
    for topic, payload, device, why in cases:
        r = _raw_publish(broker.url, topic, payload, device)
        assert r["result"] == "rejected" and why in r["reason"], r
    assert gw.proc.poll() is None
    assert stored_raw(tmp / "gw.db") == []
    # a real frame still goes through
    assert es.publish(good, broker.url, timeout=10).ok
    assert gw.finish() == 0
    assert "1 stored, 0 duplicate(s), 0 conflict(s), 5 rejected" in gw.err[-1]


def test_a_device_the_keyring_lacks_gets_retry_until_its_key_is_added(fleet, make_config):
    """Not the frame's fault: a non-final "retry" receipt (the device keeps the frame), nothing
    stored; once `keys new` adds the device to the keyring file, the same bytes are stored."""
    tmp, ring, frame, broker, gw = fleet
    new_key(tmp / "ring2.json", "z")
    cfg = make_config(d=1, r=4, k=16, w=4, j=1)
    a = agent.Agent(cfg, seed=b"z-seed", device_id="z", epoch=3, seq=3, key=load(tmp / "ring2.json").require("z"))
    a.update((0.25,))
    z = bytes(a.release())
    r = _raw_publish(broker.url, "edgesynth/z/frames/3", z, "z")
    assert r["result"] == "retry" and "no key for device 'z'" in r["reason"], r
    assert stored_raw(tmp / "gw.db") == []
    ring_doc, extra = json.loads(open(ring).read()), json.loads((tmp / "ring2.json").read_text())
    ring_doc["keys"].update(extra["keys"])
    with open(ring, "w") as fh:  # as `keys new` would have added it; a new mtime
        json.dump(ring_doc, fh)
    assert _raw_publish(broker.url, "edgesynth/z/frames/3", z, "z")["result"] == "stored"
    assert stored_raw(tmp / "gw.db") == [("z", 3, z)]
    assert gw.finish() == 0


def test_gateway_killed_three_times_while_five_devices_publish_loses_nothing(env, broker, make_config):
    tmp, ring = env[:2]
    devices = ["dev%d" % i for i in range(5)]
    for d in devices:
        new_key(ring, d)
    keys, cfg = load(ring), make_config(d=1, r=4, k=16, w=4, j=1)

    def frame(dev, epoch):
        a = agent.Agent(cfg, seed=b"%s-%d" % (dev.encode(), epoch), device_id=dev, epoch=epoch, seq=epoch,
                        key=keys.require(dev))
        a.update((0.5,))
        return bytes(a.release())
    per_device = 10
    frames = {d: [frame(d, e) for e in range(per_device)] for d in devices}
    db = tmp / "gw.db"
    gw = Gateway(broker.url, db, ring)
    gw.wait_subscribed()
    results = {}

    threads = [threading.Thread(target=_device, args=(broker.url, frames[d], results.setdefault(d, []), 0.1),
                                daemon=True) for d in devices]
    for t in threads:
        t.start()
    rng = random.Random(7)
    acks = []  # frames answered by each gateway: the kills land mid-run
    for _ in range(3):
        time.sleep(rng.uniform(0.1, 0.4))
        gw.finish(signal.SIGKILL)
        acks.append(len(gw.out))
        gw = Gateway(broker.url, db, ring)
        gw.wait_subscribed()
    for t in threads:
        t.join(40)
    assert gw.finish() == 0
    acks.append(len(gw.out))
    assert all(acks), acks
    for d in devices:
        assert all(r.ok for r in results[d]), [r.summary() for r in results[d]]
    want = sorted((d, e, f) for d in devices for e, f in enumerate(frames[d]))
    assert stored_raw(db) == want  # every frame once (the primary key), byte-identical


def _device(url, frames, results, pause=0.0):
    """Publish ``frames`` one at a time, each waiting for its receipt, as a
    device's outbox does, ``pause`` seconds apart; a broker that cannot be
    reached is tried again, for a minute at most (then the test's checks fail)."""
    end = time.monotonic() + 60
    for f in frames:
        time.sleep(pause)
        while time.monotonic() < end:
            try:
                results.append(es.publish(f, url, timeout=30))
                break
            except es.InputError:
                time.sleep(0.1)


def test_broker_restart_mid_run_loses_nothing(fleet):
    tmp, ring, frame, broker, gw = fleet
    frames = [frame("b", e, e) for e in range(12)]
    results = []
    t = threading.Thread(target=_device, args=(broker.url, frames, results), daemon=True)
    t.start()
    time.sleep(0.3)
    broker.stop()
    time.sleep(0.3)
    broker.start()
    t.join(40)
    assert len(results) == 12 and all(r.ok for r in results), [r.summary() for r in results]
    assert [raw for _, _, raw in stored_raw(tmp / "gw.db")] == frames
    assert gw.finish() == 0
    assert any("connection to %s lost" % broker.url in line for line in gw.err)
    assert "resumed session" in gw.err[-2]


def test_frames_published_while_the_gateway_is_down_are_stored_when_it_returns(fleet):
    """The persistent session: the broker keeps the frames for the gateway."""
    tmp, ring, frame, broker, gw = fleet
    assert gw.finish() == 0
    frames = [frame("a", e, e) for e in range(3)]
    done = {}
    t = threading.Thread(target=lambda: done.update(r=es.publish(frames, broker.url, timeout=20)), daemon=True)
    t.start()
    time.sleep(0.5)
    gw2 = Gateway(broker.url, tmp / "gw.db", ring)
    gw2.wait_subscribed()
    t.join(25)
    assert done["r"].ok
    assert gw2.finish() == 0
    assert "resumed session" in " ".join(gw2.err)
    assert [raw for _, _, raw in stored_raw(tmp / "gw.db")] == frames


def test_sigterm_exits_0_with_a_summary(fleet):
    tmp, ring, frame, broker, gw = fleet
    assert es.publish(frame("a", 0, 0), broker.url, timeout=10).ok
    assert gw.finish(signal.SIGTERM) == 0
    assert gw.err[-1] == "gateway stopped: 1 stored, 0 duplicate(s), 0 conflict(s), 0 rejected"
    assert gw.out[0].startswith("ack edgesynth/a/frames/0 frame 0 a 0 0 stored")


def test_publish_without_receipts_times_out_naming_the_frames(env, broker, tmp_path):
    tmp, ring, keys, frame = env
    f = tmp / "one.bin"
    f.write_bytes(frame("a", 5, 5))
    code, out, err = run("publish", f, "--broker", broker.url, "--timeout", 0.5)
    assert code == 2
    assert "one.bin frame 0: no receipt within 0.5 s (device a epoch 5)" in err


def test_broker_urls_and_options_are_checked(env):
    tmp, ring, keys, frame = env
    for url, why in [("http://x", "give mqtt://HOST"), ("mqtt://u:p@h", "not in the URL"),
                     ("mqtt://h:99999", "--broker")]:
        code, out, err = run("gateway", "--broker", url, "--store", tmp / "s.db", "--keyring", ring)
        assert code == 2 and why in err, err
    code, out, err = run("gateway", "--broker", "mqtt://h", "--cafile", ring, "--store", tmp / "s.db",
                         "--keyring", ring)
    assert code == 2 and "need an mqtts:// broker" in err
    port = free_port()
    code, out, err = run("publish", ring, "--broker", "mqtt://127.0.0.1:%d" % port)
    assert code == 2 and "error:" in err


def test_simulate_publish_sends_every_window_and_waits_for_receipts(fleet):
    tmp, ring, frame, broker, gw = fleet
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "32K", "-o", tmp / "c.json")[0] == 0
    (tmp / "d.csv").write_text("t,x0\n" + "".join("%d,%.2f\n" % (t, t / 40) for t in range(40)))
    code, out, err = run("simulate", "--config", tmp / "c.json", "--input", tmp / "d.csv", "--device-id", "a",
                         "--keyring", ring, "--time-column", "t", "--window", 10, "--start", 0, "--end", 40,
                         "--publish", broker.url, "-o", tmp / "f.bin")
    assert code == 0, err
    assert [r for *_, r in receipts(out)] == ["stored"] * 4
    assert b"".join(raw for _, _, raw in stored_raw(tmp / "gw.db")) == (tmp / "f.bin").read_bytes()


def test_tls_and_password(env, broker, monkeypatch):
    """mqtts:// with the broker's CA and mosquitto's password_file; a wrong password is refused."""
    tmp, ring, keys, frame = env
    d = tmp / "tls"
    d.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True)
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(d / "passwd"), "gw", "s3cret"], check=True)
    broker.stop()
    conf = open(broker.conf).read().replace("allow_anonymous true", "allow_anonymous false")
    with open(broker.conf, "w") as fh:
        fh.write(conf + "certfile %s\nkeyfile %s\npassword_file %s\n" % (d / "cert.pem", d / "key.pem", d / "passwd"))
    broker.start()
    url = broker.url.replace("mqtt://", "mqtts://")
    monkeypatch.setenv("EDGESYNTH_MQTT_PASSWORD", "s3cret")
    gw = Gateway(url, tmp / "gw.db", ring, "--cafile", str(d / "cert.pem"), "--username", "gw")
    gw.wait_subscribed()
    res = es.publish(frame("a", 0, 0), url, timeout=10, cafile=str(d / "cert.pem"), username="gw")
    assert res.ok, res.summary()
    assert gw.finish() == 0
    with pytest.raises(es.InputError, match="refused"):
        es.publish(frame("a", 1, 1), url, timeout=10, cafile=str(d / "cert.pem"), username="gw", password="wrong")
    monkeypatch.setenv("EDGESYNTH_MQTT_PASSWORD", "wrong")
    gw = Gateway(url, tmp / "gw.db", ring, "--cafile", str(d / "cert.pem"), "--username", "gw")
    gw.proc.wait(10)
    assert gw.finish() == 2  # the signal goes nowhere: it has exited
    assert "refused the gateway" in gw.err[-1] and "Traceback" not in "".join(gw.err)
    assert len(stored_raw(tmp / "gw.db")) == 1


def test_a_batch_follows_the_store_rules_frame_by_frame(env):
    """The gateway's batches (Store.put_many): one transaction, the same results
    as one transaction per frame, a frame repeated inside a batch included."""
    from edgesynth.frames import parse_frame
    tmp, ring, keys, frame = env
    a0, a0_other, b0 = (parse_frame(f, key_for=keys.key_for)[0]
                        for f in (frame("a", 0, 0), frame("a", 0, 0, seed=b"other"), frame("b", 0, 0)))
    with es.Store(str(tmp / "s.db"), create=True) as st:
        assert st.put_many([a0, a0, a0_other, b0]) == ["stored", "duplicate", "conflict", "stored"]
        assert st.put_many([b0]) == ["duplicate"] and st.count() == 2 and len(st.conflicts()) == 1
