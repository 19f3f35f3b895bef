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
