"""agent/transport/mqtt.py's Publisher under CPython with a scripted client:
topic-safe ids, the receipt rules, bounded exponential backoff. (The real
umqtt.simple on MicroPython is tests/test_mqtt_device.py.)"""
import hashlib
import json

import pytest

from edgesynth.agent.transport import mqtt
from edgesynth.agent.transport.outbox import Outbox


class FakeClient:
    """Records publishes; ``down`` makes connect and publish fail as a dead socket does."""

    def __init__(self):
        self.cb = None
        self.down = False
        self.connects = 0
        self.published = []
        self.inbox = []
        self.keepalive = 0

    def set_callback(self, cb):
        self.cb = cb

    def connect(self, clean_session=True):
        self.connects += 1
        if self.down:
            raise OSError("connection refused")
        assert clean_session is False

    def subscribe(self, topic, qos=0):
        self.subscribed = (bytes(topic), qos)

    def publish(self, topic, msg, retain=False, qos=0):
        if self.down:
            raise OSError("broken pipe")
        self.published.append((bytes(topic), bytes(msg), qos))

    def check_msg(self):
        if self.inbox:
            self.cb(b"edgesynth/dev-a/receipts", self.inbox.pop(0))
        return None

    def disconnect(self):
        pass


def receipt(frame, result="stored", **extra):
    r = {"epoch": 0, "seq": 0, "sha256": hashlib.sha256(frame).hexdigest(), "result": result, "reason": None}
    r.update(extra)
    return json.dumps(r).encode()


@pytest.fixture
def pub(tmp_path):
    return mqtt.Publisher(FakeClient(), "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256, backoff_ms=100,
                          max_backoff_ms=400)


@pytest.mark.parametrize("bad", ["", "a/b", "a+", "#", "a\0b", "x" * 65])
def test_ids_that_cannot_name_a_topic_are_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="cannot name an MQTT topic"):
        mqtt.Publisher(FakeClient(), bad, Outbox(str(tmp_path), 2, 100))


def test_topic_qos_and_only_a_final_receipt_for_the_same_bytes_frees(pub):
    c = pub.client
    assert pub.send(12345, 7, b"frame-one") is True
    assert c.published == [(b"edgesynth/dev-a/frames/12345", b"frame-one", 1)]
    assert c.subscribed == (b"edgesynth/dev-a/receipts", 1)
    for noise in (b"not json", b"[1]", json.dumps({"sha256": "zz" * 32, "result": "stored"}).encode(),
                  receipt(b"frame-two"), receipt(b"frame-one", result="queued")):
        c.inbox.append(noise)
    assert pub.poll() == 1 and pub.unmatched == 5 and pub.delivered == 0
    c.inbox.append(receipt(b"frame-one", result="conflict"))
    assert pub.poll() == 0 and pub.delivered == 1


def test_rejected_frees_counts_and_keeps_the_reason(pub):
    pub.send(3, 4, b"bad")
    pub.client.inbox.append(receipt(b"bad", result="rejected", reason="bad tag"))
    assert pub.poll() == 0
    assert pub.rejected == 1 and pub.delivered == 0 and pub.last_rejection == (3, 4, "bad tag")


def test_backoff_doubles_to_its_cap_and_a_reconnect_resends_in_order(pub, monkeypatch):
    now = [1000]
    monkeypatch.setattr(mqtt, "_now", lambda: now[0])
    c = pub.client
    c.down = True
    assert pub.send(0, 0, b"f0") is False and pub.send(1, 1, b"f1") is False  # kept, not lost
    assert c.connects == 1  # the second send came before the first retry was due
    attempts = [now[0]]
    for _ in range(60):  # 3 s in 50 ms steps
        before = c.connects
        pub.poll()
        if c.connects > before:
            attempts.append(now[0])
        now[0] += 50
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert gaps[:4] == [100, 200, 400, 400] and max(gaps) == 400
    c.down = False
    now[0] += 400
    pub.poll()
    assert [t for t, _, _ in c.published] == [b"edgesynth/dev-a/frames/0", b"edgesynth/dev-a/frames/1"]
    assert pub.outbox.count == 2  # published again, still held until the receipts
    pub.poll()
    assert len(c.published) == 2  # once per connection


class ReceiptDuringPuback(FakeClient):
    """Delivers the queued receipts from inside publish, as umqtt.simple does
    while it waits for a QoS 1 PUBACK."""

    def publish(self, topic, msg, retain=False, qos=0):
        super().publish(topic, msg, retain, qos)
        while self.inbox:
            self.cb(b"edgesynth/dev-a/receipts", self.inbox.pop(0))


def test_a_receipt_freeing_a_later_frame_during_a_resend_is_skipped(tmp_path):
    box = Outbox(str(tmp_path), 4, 4096)
    for i in range(3):
        box.put(i, i, b"f%d" % i)
    c = ReceiptDuringPuback()
    pub = mqtt.Publisher(c, "dev-a", box, max_frame=256)
    c.inbox.append(receipt(b"f2"))  # answered while f0's PUBACK is awaited: f2's file is gone
    assert pub.poll() == 2  # no FileNotFoundError out of poll
    assert [m for _, m, _ in c.published] == [b"f0", b"f1"] and pub.delivered == 1


def test_held_frames_are_published_again_after_resend_ms(tmp_path, monkeypatch):
    now = [1000]
    monkeypatch.setattr(mqtt, "_now", lambda: now[0])
    c = FakeClient()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256, resend_ms=500)
    pub.send(0, 0, b"dropped-by-broker")
    for _ in range(100):  # 100 polls, 10 ms apart: 1 s past the first publish
        now[0] += 10
        pub.poll()
    assert [m for _, m, _ in c.published] == [b"dropped-by-broker"] * 3  # at 0, 500 and 1000 ms
    assert c.connects == 1 and pub.outbox.count == 1


def test_retry_receipt_keeps_the_frame_and_resends_it_later(tmp_path, monkeypatch):
    now = [1000]
    monkeypatch.setattr(mqtt, "_now", lambda: now[0])
    c = FakeClient()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256, resend_ms=500)
    pub.send(0, 0, b"unknown-key")
    now[0] += 400
    c.inbox.append(receipt(b"unknown-key", result="retry", reason="no key for the device"))
    assert pub.poll() == 1 and pub.retried == 1 and pub.rejected == 0 and pub.unmatched == 0
    now[0] += 400  # 800 ms after the publish, 400 after the retry receipt: not yet
    pub.poll()
    assert len(c.published) == 1
    now[0] += 100
    pub.poll()
    assert len(c.published) == 2
    c.inbox.append(receipt(b"unknown-key"))
    assert pub.poll() == 0 and pub.delivered == 1


def test_send_on_a_full_outbox_after_a_reboot_publishes_the_held_frames(tmp_path):
    box = Outbox(str(tmp_path), 2, 4096)
    box.put(0, 0, b"old0")
    box.put(1, 1, b"old1")

    class Acking(FakeClient):  # the gateway answers each publish at once
        def publish(self, topic, msg, retain=False, qos=0):
            super().publish(topic, msg, retain, qos)
            self.inbox.append(receipt(bytes(msg)))

    c = Acking()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 2, 4096), max_frame=256)  # the reboot
    assert pub.send(2, 2, b"new") is True
    assert [m for _, m, _ in c.published] == [b"old0", b"old1", b"new"]


class Timed(FakeClient):
    class Sock:
        def __init__(self):
            self.timeouts = []

        def settimeout(self, t):
            self.timeouts.append(t)

        def close(self):
            pass

    def __init__(self):
        super().__init__()
        self.sock = self.Sock()


def test_socket_timeout_after_connect_and_before_each_publish(tmp_path):
    c = Timed()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256, timeout_ms=2500)
    pub.send(0, 0, b"a")
    pub.send(1, 1, b"b")
    assert c.sock.timeouts == [2.5, 2.5, 2.5]


def test_a_timeout_is_a_network_error_and_a_type_error_is_not(tmp_path):
    c = FakeClient()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256)

    def timeout(*a, **k):
        raise OSError(110, "ETIMEDOUT")
    c.publish = timeout
    assert pub.send(0, 0, b"a") is False and pub.errors == 1 and not pub.connected
    pub2 = mqtt.Publisher(FakeClient(), "dev-a", Outbox(str(tmp_path / "b"), 4, 4096), max_frame=256)

    def bug(*a, **k):
        raise TypeError("object with buffer protocol required")
    pub2.client.connect = bug
    with pytest.raises(TypeError):
        pub2.poll()


@pytest.mark.parametrize("block, msg", [({"host": "h", "user": "u"}, "needs device.mqtt.password"),
                                        ({}, "host"), ({"host": "h", "resend_ms": 0}, "resend_ms")])
def test_from_config_refuses_a_malformed_block(tmp_path, block, msg):
    with pytest.raises(mqtt.ConfigError, match=msg):
        mqtt.from_config(block, "dev-a")


def test_ledgered_loop_flushes_the_outbox_before_resending_a_sealed_window():
    from edgesynth.agent import main_loop
    calls = []

    class Sealed:  # a rebooted ledger Device whose window was released but not sent
        sealed = True

        def next_epoch(self):
            calls.append("next_epoch")

    class Pub:
        timeout_ms = 1234

        def flush(self, timeout_ms):
            calls.append(("flush", timeout_ms))

        def release(self, src):
            calls.append("release")

    class NoReadings:
        def read(self):
            return None

    assert main_loop._run_ledgered(Sealed(), 0, NoReadings(), None, None, 1, 10, None, Pub()) == 0
    assert calls == [("flush", 1234), "release", "next_epoch"]


def test_release_into_a_full_outbox_keeps_its_bytes_while_held_frames_are_resent(tmp_path):
    box = Outbox(str(tmp_path), 2, 4096)
    box.put(0, 0, b"held-zero")
    box.put(1, 1, b"held-one")

    class Acking(FakeClient):
        def publish(self, topic, msg, retain=False, qos=0):
            super().publish(topic, msg, retain, qos)
            self.inbox.append(receipt(bytes(msg)))

    class Source:  # an Agent: streams its frame into the sink
        epoch = seq = 2

        def release(self, sink):
            sink(bytearray(b"the-new-frame"), 13)

    c = Acking()
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 2, 4096), max_frame=256)
    assert pub.release(Source()) is True
    assert [m for _, m, _ in c.published] == [b"held-zero", b"held-one", b"the-new-frame"]


def test_a_keepalive_ping_gets_the_socket_timeout_too(tmp_path, monkeypatch):
    now = [1000]
    monkeypatch.setattr(mqtt, "_now", lambda: now[0])
    c = Timed()
    c.keepalive = 1
    c.ping = lambda: c.sock.timeouts.append("ping")
    pub = mqtt.Publisher(c, "dev-a", Outbox(str(tmp_path), 4, 4096), max_frame=256, timeout_ms=2000)
    pub.poll()
    now[0] += 500
    pub.poll()
    assert c.sock.timeouts == [2.0, 2.0, "ping"]
