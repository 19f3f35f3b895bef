"""Publish released frames to the gateway over MQTT (micropython-lib's umqtt.simple).

Protocol (docs/transport.md): each frame goes with QoS 1 to
``edgesynth/<device>/frames/<epoch>``; the gateway answers on
``edgesynth/<device>/receipts`` with one JSON object per frame
``{"epoch", "seq", "sha256", "result", "reason"}``. A frame stays in the
outbox (agent/transport/outbox.py, on flash) from before its first publish
until a receipt names its SHA-256: "stored", "duplicate" and "conflict" free
it as delivered, "rejected" frees it as refused (the same bytes can never be
accepted; ``rejected`` counts them and ``last_rejection`` says why), "retry"
keeps it (the gateway cannot check it yet, e.g. its keyring lacks the device)
and it is published again after ``resend_ms``. A PUBACK only means the broker
has the frame, so it frees nothing; a frame with no receipt ``resend_ms``
after its last publish is published again on the same connection (the broker
may have dropped it: no gateway subscribed yet, a full queue).

The client is a ``umqtt.simple.MQTTClient`` made by the caller with a fixed
client id: the Publisher connects it with a persistent session, so receipts
published while the device was offline wait at the broker. Network errors
never raise from ``send``, ``poll`` or ``flush``: the socket gets a
``timeout_ms`` timeout after each connect and before each publish (umqtt.simple
sets none), and on an OSError or MQTTException the connection is dropped
and retried with exponential backoff (``backoff_ms`` doubling up to
``max_backoff_ms``); frames published on a lost connection are published
again on the next one (the gateway treats repeats as duplicates).

Heap: the topic and the resend buffer (``max_frame`` bytes) are preallocated;
a publish allocates only what umqtt.simple allocates (a 4-byte packet header)
plus the SHA-256 and file name of the outbox entry.
"""
import binascii
import json
import time

from ..errors import ConfigError
from .outbox import DIGEST, Outbox, OutboxFull  # noqa: F401  (OutboxFull is part of this module's interface)

PREFIX = "edgesynth/"
FINAL = ("stored", "duplicate", "conflict")

if hasattr(time, "ticks_ms"):  # MicroPython
    _now, _diff, _sleep = time.ticks_ms, time.ticks_diff, time.sleep_ms
else:  # CPython (host tests)
    def _now():
        return int(time.monotonic() * 1000) & 0x3FFFFFFF

    def _diff(a, b):
        return ((a - b + 0x20000000) & 0x3FFFFFFF) - 0x20000000

    def _sleep(ms):
        time.sleep(ms / 1000)

try:
    from umqtt.simple import MQTTException
except ImportError:  # host tests: the Publisher takes any client
    class MQTTException(Exception):
        pass

# What umqtt.simple 1.3.4 raises when the link breaks: OSError from the socket
# (a timeout included), IndexError reading an empty CONNACK, AssertionError on
# an unexpected packet, MQTTException on a refused connect. Any of them means
# "reconnect later"; anything else (TypeError, ValueError: a configuration or
# programming error) propagates instead of being retried forever.
_NET_ERRORS = (OSError, IndexError, AssertionError, MQTTException)


def topic_safe(device_id):
    """``device_id`` as bytes if it may name an MQTT topic level: 1..64 bytes,
    none of '/', '+', '#' or NUL. ValueError otherwise."""
    b = device_id.encode() if isinstance(device_id, str) else bytes(device_id)
    if not 1 <= len(b) <= 64 or b"/" in b or b"+" in b or b"#" in b or b"\0" in b:
        raise ValueError("device id %r cannot name an MQTT topic: 1..64 bytes without '/', '+', '#' or NUL"
                         % (device_id,))
    return b


class Publisher:
    """Send frames through ``client`` (an unconnected umqtt.simple.MQTTClient)
    and keep them in ``outbox`` (an Outbox) until their receipts.

    Counters (ints): ``published`` (publishes the broker acknowledged),
    ``delivered`` (frames freed by a final positive receipt), ``rejected``
    (frames freed by a "rejected" receipt), ``unmatched`` (receipts for no
    frame held: repeats, or frames freed earlier), ``reconnects`` (successful
    connects), ``errors`` (network errors). ``last_rejection`` is
    ``(epoch, seq, reason)`` of the latest rejected frame, or None.
    ``retried`` counts "retry" receipts (the frame is kept).
    ``on_receipt``: None, or a callable given ``(epoch, seq, result, reason)``
    for each receipt that names a held frame, before the frame is freed (a
    log, or the host simulator's report).
    ``max_frame`` bounds a frame in bytes (the resend buffer's size);
    ``resend_ms`` (>= 1) is the delay after which a held frame with no final
    receipt is published again on the same connection; ``timeout_ms`` (>= 1)
    is the socket timeout of every network operation.
    """

    def __init__(self, client, device_id, outbox, max_frame=4096, backoff_ms=250, max_backoff_ms=30000,
                 resend_ms=30000, timeout_ms=10000):
        dev = topic_safe(device_id)
        self.client = client
        self.outbox = outbox
        self.max_frame = max_frame
        self.receipts_topic = (PREFIX.encode() + dev + b"/receipts")
        prefix = PREFIX.encode() + dev + b"/frames/"
        self._topic = bytearray(len(prefix) + 10)  # 10 digits hold any uint32 epoch
        self._topic[:len(prefix)] = prefix
        self._plen = len(prefix)
        self._buf = bytearray(max_frame)
        self._n = 0
        self._gather_fn = self._gather  # bound once: MicroPython allocates a bound method per lookup
        self._msgs = 0  # receipts taken: check_msg returns None both when idle and after a message
        self._sent = bytearray(outbox.max_frames)  # 1 when a slot was published on the current connection
        self._at = [0] * outbox.max_frames  # tick (ms) of each slot's last publish
        self.resend_ms = resend_ms
        self.timeout_ms = timeout_ms
        self._own = False  # True while send() is given a view of self._buf (release)
        self.connected = False
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self._delay = 0
        self._last_try = 0
        self._last_ping = 0
        self.published = self.delivered = self.rejected = self.unmatched = self.reconnects = self.errors = 0
        self.retried = 0
        self.last_rejection = None
        self.on_receipt = None
        client.set_callback(self._on_message)

    # ------------------------------------------------------------ public
    def send(self, epoch, seq, frame):
        """Store ``frame`` (the bytes Agent.release() returned for ``epoch``,
        ``seq``) in the outbox, then publish it. Returns True when the broker
        acknowledged the publish, False when it stays queued for ``flush``.
        OutboxFull (nothing stored) when the outbox has no room even after
        publishing the held frames that are due and taking the receipts that
        are waiting."""
        if len(frame) > self.max_frame:
            raise ValueError("frame of %d bytes is above max_frame %d" % (len(frame), self.max_frame))
        try:
            slot = self.outbox.put(epoch, seq, frame)
        except OutboxFull:
            if self._ensure():
                if self._own:  # the resends below reuse self._buf: keep the frame (rare path, one copy)
                    frame = bytes(frame)
                self._resend()  # held frames the broker dropped, or not yet published since a reboot
                self._receipts()  # they may free room
            slot = self.outbox.put(epoch, seq, frame)
        self._sent[slot] = 0
        return self._publish(slot, frame)

    def release(self, source):
        """Release ``source`` (an Agent, or an agent.ledger.Device) straight
        into the preallocated buffer and ``send`` the frame under the source's
        epoch and seq: no frame-sized allocation. Same return and OutboxFull."""
        a = getattr(source, "agent", source)
        self._n = 0
        source.release(self._gather_fn)
        self._own = True
        try:
            return self.send(a.epoch, a.seq, memoryview(self._buf)[:self._n])
        finally:
            self._own = False

    def poll(self):
        """Connect if due, publish the frames of the outbox not yet published
        on this connection (after a reboot or a reconnect: all of them, oldest
        first) or last published ``resend_ms`` ago, then take every receipt waiting at the broker. Cheap when
        there is nothing to do: call it between readings. Returns the number
        of frames still in the outbox."""
        if self._ensure():
            self._resend()
            self._keepalive()
            self._receipts()
        return self.outbox.count

    def flush(self, timeout_ms=10000):
        """``poll`` until the outbox is empty (True) or ``timeout_ms`` passed (False)."""
        start = _now()
        while True:
            if self.poll() == 0:
                return True
            if _diff(_now(), start) >= timeout_ms:
                return False
            _sleep(20)

    def close(self):
        """Disconnect cleanly (the outbox keeps what is unacknowledged)."""
        if self.connected:
            try:
                self.client.disconnect()
            except _NET_ERRORS:
                pass
        self.connected = False

    # ------------------------------------------------------------ internals
    def _due(self, slot, now):
        return self.outbox.held(slot) and (not self._sent[slot] or _diff(now, self._at[slot]) >= self.resend_ms)

    def _resend(self):
        box = self.outbox
        now = _now()
        for i in range(box.max_frames):  # no allocation unless a frame waits
            if self._due(i, now):
                break
        else:
            return
        for slot in box.slots():
            # a receipt taken while umqtt waited for an earlier PUBACK may have freed this slot
            if not self._due(slot, now):
                continue
            try:
                n = box.read_into(slot, self._buf)
            except OSError:  # freed meanwhile, or its file unreadable: the next poll sees it again
                continue
            if not self._publish(slot, memoryview(self._buf)[:n]):
                return

    def _keepalive(self):
        # a client made with keepalive K must talk within 1.5 K s or the broker drops it
        k = getattr(self.client, "keepalive", 0)
        if k and self.connected and _diff(_now(), self._last_ping) >= k * 500:
            self._last_ping = _now()
            try:
                self._timeout()  # check_msg leaves the socket blocking without one
                self.client.ping()  # the PINGRESP is read by check_msg
            except _NET_ERRORS:
                self._lost()

    def _receipts(self):
        try:
            for _ in range(4 * self.outbox.max_frames + 4):  # bounded: a flood cannot hold the device
                before = self._msgs
                if self.client.check_msg() is None and self._msgs == before:
                    break
        except _NET_ERRORS:
            self._lost()

    def _gather(self, buf, n):
        # release sink: append buf[:n] to the frame being gathered
        end = self._n + n
        if end > self.max_frame:
            raise ValueError("frame above max_frame %d bytes" % self.max_frame)
        self._buf[self._n:end] = buf if n == len(buf) else memoryview(buf)[:n]
        self._n = end

    def _publish(self, slot, frame):
        if not self._ensure():
            return False
        epoch = self.outbox.epoch(slot)
        n = self._plen + _digits(self._topic, self._plen, epoch)
        at = _now()
        try:
            self._timeout()
            self.client.publish(memoryview(self._topic)[:n], frame, qos=1)
        except _NET_ERRORS:
            self._lost()
            return False
        self.published += 1
        if self.outbox.held(slot):  # its receipt may have come while umqtt waited for the PUBACK
            self._sent[slot] = 1
            self._at[slot] = at
        return True

    def _timeout(self):
        sock = getattr(self.client, "sock", None)
        if sock is not None and hasattr(sock, "settimeout"):
            sock.settimeout(self.timeout_ms / 1000)

    def _ensure(self):
        # connected, or a connect attempt when the backoff allows one
        if self.connected:
            return True
        if self._delay and _diff(_now(), self._last_try) < self._delay:
            return False
        self._last_try = _now()
        try:
            self.client.connect(False)  # persistent session: receipts wait for us while offline
            self._timeout()
            self.client.subscribe(self.receipts_topic, 1)
        except _NET_ERRORS:
            self.errors += 1
            self._close_socket()
            self._delay = min(self.max_backoff_ms, self._delay * 2 if self._delay else self.backoff_ms)
            return False
        self.connected = True
        self._delay = 0
        self._last_ping = _now()
        self.reconnects += 1
        for i in range(len(self._sent)):
            self._sent[i] = 0
        return True

    def _lost(self):
        self.errors += 1
        self.connected = False
        self._close_socket()
        self._delay = self.backoff_ms
        self._last_try = _now()

    def _close_socket(self):
        sock = getattr(self.client, "sock", None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _on_message(self, topic, msg):
        if bytes(topic) != self.receipts_topic:
            return
        try:
            r = json.loads(msg)
            hexd = r["sha256"]
            result = r["result"]
            digest = binascii.unhexlify(hexd) if isinstance(hexd, str) and len(hexd) == 2 * DIGEST else None
        except (ValueError, KeyError, TypeError):
            digest = None
        self._msgs += 1
        if digest is None:
            self.unmatched += 1
            return
        slot = self.outbox.find(digest)
        if slot < 0 or not (result in FINAL or result == "rejected" or result == "retry"):
            self.unmatched += 1
            return
        if self.on_receipt is not None:
            self.on_receipt(self.outbox.epoch(slot), self.outbox.seq(slot), result, r.get("reason"))
        if result == "retry":  # kept: published again resend_ms after its last publish
            self.retried += 1
            self._sent[slot] = 1
            self._at[slot] = _now()
            return
        if result == "rejected":
            self.rejected += 1
            self.last_rejection = (self.outbox.epoch(slot), self.outbox.seq(slot), r.get("reason", ""))
        else:
            self.delivered += 1
        self.outbox.free(slot)
        self._sent[slot] = 0


def _digits(buf, at, v):
    # decimal digits of v >= 0 written at buf[at:]; returns how many
    n = 1
    t = v
    while t >= 10:
        t //= 10
        n += 1
    for i in range(n - 1, -1, -1):
        buf[at + i] = 48 + v % 10
        v //= 10
    return n


def from_config(mq, device_id):
    """The Publisher of a device.json "mqtt" block (agent/main_loop.py):
    {"host", "port" (1883), "client_id" ("edgesynth-<device id>"), "keepalive"
    (seconds, 0 = none), "user", "password", "ssl" (false), "outbox"
    (directory, "outbox"), "max_frames" (16), "max_bytes" (65536),
    "max_frame" (4096), "backoff_ms" (250), "max_backoff_ms" (30000),
    "resend_ms" (30000), "timeout_ms" (10000), "ssl_params" ({}: passed to
    umqtt.simple, e.g. {"cert_reqs": 2, "cadata": <DER bytes>,
    "server_hostname": "..."} to verify the server; without it TLS does not
    check the server's certificate)}. ConfigError for a malformed block.
    Imports umqtt.simple (install it with mip: docs/deployment.md)."""
    if not isinstance(mq.get("host"), str) or not mq["host"]:
        raise ConfigError('device.mqtt.host must name the broker, e.g. "192.0.2.10"')
    if mq.get("user") is not None and mq.get("password") is None:
        raise ConfigError("device.mqtt.user needs device.mqtt.password (umqtt.simple sends both or neither)")
    for k in ("resend_ms", "timeout_ms"):
        if k in mq and not (isinstance(mq[k], int) and mq[k] >= 1):
            raise ConfigError("device.mqtt.%s must be an integer >= 1 (milliseconds)" % k)
    from umqtt.simple import MQTTClient  # a board-only module: the Publisher itself takes any client
    client = MQTTClient(mq.get("client_id", "edgesynth-" + device_id), mq["host"], mq.get("port", 1883),
                        mq.get("user"), mq.get("password"), mq.get("keepalive", 0), mq.get("ssl", False),
                        mq.get("ssl_params", {}))
    box = Outbox(mq.get("outbox", "outbox"), mq.get("max_frames", 16), mq.get("max_bytes", 65536))
    return Publisher(client, device_id, box, mq.get("max_frame", 4096), mq.get("backoff_ms", 250),
                     mq.get("max_backoff_ms", 30000), mq.get("resend_ms", 30000), mq.get("timeout_ms", 10000))
