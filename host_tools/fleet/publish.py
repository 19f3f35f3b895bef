"""`edgesynth publish`: recorded frames to an MQTT broker, waiting for the
gateway's receipts (docs/transport.md).

The publisher subscribes to the receipts of every device concerned before it
publishes anything, publishes each frame with QoS 1 to its topic, and matches
receipts to frames by the SHA-256 of the frame bytes. After a reconnection it
publishes again every frame still without a receipt: the gateway stores a
frame once and answers a resend "duplicate", so a receipt lost while the
publisher was away costs only a resend.
"""
import hashlib
import json
import os
import secrets
import threading
import time

from edgesynth.errors import InputError
from edgesynth.fleet.broker import as_connection, frame_topic, receipt_topic
from edgesynth.fleet.ingest import shown
from edgesynth.frames import iter_frames, read_frames

ACKED = ("stored", "duplicate")


class Sent:
    """One published frame: ``label`` ("FILE frame I"), ``device``, ``epoch``,
    ``raw`` bytes, ``sha256``, and ``receipt`` (the gateway's dict, or None)."""

    def __init__(self, label, rel):
        self.label, self.device, self.epoch, self.raw = label, rel.device, rel.epoch, rel.raw
        self.sha256 = hashlib.sha256(rel.raw).hexdigest()
        self.receipt = None

    @property
    def acked(self):
        return self.receipt is not None and self.receipt.get("result") in ACKED

    def text(self):
        """One line: "receipt LABEL DEVICE EPOCH RESULT[: reason]"."""
        r = self.receipt or {}
        reason = r.get("reason")
        return "receipt %s %s %d %s%s" % (self.label, shown(self.device), self.epoch, r.get("result"),
                                          ": %s" % reason if reason else "")


class Published:
    """The outcome of es.publish: ``frames`` (Sent, in order); ``ok`` iff every
    frame was stored or a duplicate; ``missing``: frames without a receipt."""

    def __init__(self, frames):
        self.frames = frames

    @property
    def ok(self):
        return all(f.acked for f in self.frames)

    @property
    def missing(self):
        return [f for f in self.frames if f.receipt is None]

    def summary(self):
        got = [f for f in self.frames if f.receipt is not None]
        return "%d frame(s) published: %d stored or duplicate, %d refused, %d without a receipt" % (
            len(self.frames), sum(f.acked for f in got), sum(not f.acked for f in got), len(self.missing))


def _frames(sources):
    """Sent records of ``sources``: paths of frame files (several frames back
    to back) or bytes of frames."""
    out = []
    for n, src in enumerate(sources):
        if isinstance(src, (bytes, bytearray, memoryview)):
            rels, name = list(iter_frames(bytes(src))), "<frames %d>" % n
        else:
            name = os.fspath(src)
            rels = read_frames(name)
        out += [Sent("%s frame %d" % (shown(name), i), rel) for i, rel in enumerate(rels)]
    return out


def publish(frames, broker, timeout=30.0, *, on_receipt=None, client_id=None, cafile=None, cert=None, key=None,
            username=None, password=None):
    """Publish frames with QoS 1 and wait up to ``timeout`` seconds for the
    gateway's receipt of each.

    frames: a path, bytes, or a list of paths/bytes; each holds one or more
        frames back to back (as `simulate` and the device write them).
    broker, cafile, cert, key, username, password: as es.gateway.
    on_receipt: called with each Sent as its receipt arrives (from the
        network thread).
    client_id: default a random "edgesynth-publish-..." id (clean session).

    Returns a Published (``ok``, ``frames``, ``missing``). Raises FrameError for
    an unreadable frame file (before anything is published) and InputError
    if the broker cannot be reached or refuses the connection.
    """
    if isinstance(frames, (str, bytes, bytearray, memoryview, os.PathLike)):
        frames = [frames]
    sent = _frames(frames)
    conn = as_connection(broker, cafile=cafile, cert=cert, key=key, username=username, password=password)
    by_sha = {}
    for f in sent:
        by_sha.setdefault(f.sha256, []).append(f)
    devices = sorted({f.device for f in sent})
    done = threading.Condition()
    state = {"refused": None, "sub": None}
    client = conn.client(client_id or "edgesynth-publish-" + secrets.token_hex(6), clean_session=True)

    def on_connect(c, userdata, flags, reason, properties):
        if reason.is_failure:
            with done:
                state["refused"] = str(reason)
                done.notify_all()
            return
        # receipts first: a receipt published before the subscription would be missed
        state["sub"] = c.subscribe([(receipt_topic(d), 1) for d in devices])[1]

    def on_subscribe(c, userdata, mid, reasons, properties):
        if mid != state["sub"]:
            return
        with done:
            waiting = [f for f in sent if f.receipt is None]
        for f in waiting:
            c.publish(frame_topic(f.device, f.epoch), f.raw, qos=1)

    def on_message(c, userdata, msg):
        try:
            r = json.loads(msg.payload)
        except (ValueError, UnicodeDecodeError):
            return  # not a receipt: ignored, as receipts of other publishers are
        if not isinstance(r, dict) or not isinstance(r.get("sha256"), str) or r.get("result") == "retry":
            return  # "retry" is not final: the frame goes again when the gateway knows its device
        mine = by_sha.get(r["sha256"], [])
        with done:
            new = [f for f in mine if f.receipt is None]
            for f in new:
                f.receipt = r
            done.notify_all()
        for f in new:
            if on_receipt:
                on_receipt(f)

    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    client.reconnect_delay_set(1, 4)
    conn.connect(client)
    client.loop_start()
    try:
        end = time.monotonic() + timeout
        with done:
            while not state["refused"] and any(f.receipt is None for f in sent):
                left = end - time.monotonic()
                if left <= 0:
                    break
                done.wait(left)
        if state["refused"]:
            raise InputError("the broker %s refused the connection: %s" % (conn.url, state["refused"]))
    finally:
        client.disconnect()
        client.loop_stop()
    return Published(sent)
