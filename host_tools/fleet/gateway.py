"""`edgesynth gateway`: frames from an MQTT broker into the store (docs/transport.md).

The gateway subscribes to ``edgesynth/+/frames/+`` at QoS 1 in a persistent
session (clean session off, a fixed client id) with manual acknowledgement.
Each message is one frame, checked as ``ingest`` checks a frame of a file (tag
under the keyring, payload decoded with limits; edgesynth.frames.parse_frame)
and stored by the store's rules. The messages that have arrived together (at
most BATCH) are committed in one transaction, one fsync for all, and only
then answered, message by message: the report, the receipt on
``edgesynth/<device>/receipts``, the PUBACK. A gateway killed at any moment
therefore loses nothing: the broker redelivers every frame it has not
acknowledged, and a frame committed but not acknowledged comes back as a
duplicate (idempotent, answered again).

Messages are handled in the thread that runs the network loop, so the
store's connection stays in one thread, and a batch is answered before the
loop reconnects, so a PUBACK never refers to a message of an earlier
connection.
"""
import contextlib
import os
import time

from edgesynth.errors import FrameError, IngestStopped, InputError, Refused, StoreWriteError
from edgesynth.fleet.broker import FRAMES, as_connection, receipt, receipt_topic, topic_device
from edgesynth.fleet.ingest import REJECTED, Outcome, Report, stored_report
from edgesynth.fleet.keys import Keyring, file_identity
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.fleet.storage import open_store
from edgesynth.frames import parse_frame, split_envelope

MAX_FRAME = 1 << 20     # bytes: larger messages are rejected unread (files of any size go through ingest)
BATCH_BYTES = 16 << 20  # bytes of messages in one batch at most (the broker's message_size_limit bounds one)
RETRY = "retry"         # receipt result that is not final: the device keeps the frame and sends it again
CLIENT_ID = "edgesynth-gateway"
BATCH = 256            # messages committed in one transaction at most
LOOP_TIMEOUT = 0.2      # s: how often the loop looks at ``stop``
RECONNECT_MAX = 5.0     # s: longest wait between reconnection attempts


class _Gateway:
    def __init__(self, conn, store, keys, report, stop, client_id, max_frame, status):
        self.conn, self.store, self.keys, self.stop, self.status = conn, store, keys, stop, status
        self.key_for, self.keyring_failure = keys(), None
        self.client_id = client_id
        self.max_frame = max_frame
        self.outcome = Outcome()
        self.done = self.outcome.tally(report)
        self.refused = None  # the broker's reason when it refuses the connection
        self.connected = False
        self.batch = []  # messages received, not yet handled
        self.batch_bytes = 0
        self.client = conn.client(client_id, clean_session=False, manual_ack=True)
        # no limit on our own QoS 1 messages in flight: paho would queue receipts beyond it while
        # ack() sends the PUBACK at once, and a PUBACK must never precede its frame's receipt
        self.client.max_inflight_messages_set(0)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(self, client, userdata, flags, reason, properties):
        if reason.is_failure:
            self.refused = str(reason)
            return
        self.connected = True
        self.session = flags.session_present
        client.subscribe(FRAMES, qos=1)  # kept by the session too; again in case the broker lost it

    def _on_subscribe(self, client, userdata, mid, reasons, properties):
        if any(r.is_failure for r in reasons):  # e.g. an ACL of the broker
            self.refused = "subscribing to %s: %s" % (FRAMES, ", ".join(str(r) for r in reasons))
            return
        self.status("subscribed to %s on %s as %s (%s session)" % (
            FRAMES, self.conn.url, self.client_id, "resumed" if self.session else "new"))

    def _on_disconnect(self, client, userdata, flags, reason, properties):
        if self.connected and not self.stop():
            self.status("connection to %s lost (%s); reconnecting" % (self.conn.url, reason))
        self.connected = False

    def _on_message(self, client, userdata, msg):
        if not self.stop():  # else not acknowledged: the broker redelivers it to the next gateway
            self.batch.append(msg)
            self.batch_bytes += len(msg.payload)

    def _flush(self):
        """Verify the batch, commit its frames in one transaction, then per
        message, in order: report, receipt, PUBACK."""
        batch, self.batch, self.batch_bytes = self.batch, [], 0
        self._reload_keys()
        checked = []  # (message, topic's device, Release or None, reason refused; RETRY: device unknown)
        for msg in batch:
            device = topic_device(msg.topic)
            rel, reason = None, self._refusal(msg.payload, device)
            if reason is None and self.keyring_failure is not None:
                reason = RETRY  # never verified (nor stored) under keys that may since have been revoked
            if reason is None:
                try:
                    if self.key_for(device) is None:
                        reason = RETRY  # our keyring lacks the device: not the frame's fault
                    else:
                        rel = parse_frame(msg.payload, 0, key_for=self.key_for, require_tag=True)[0]
                except Refused as e:  # revoked: final; the receipt's reason does not name the keyring's path
                    reason = e.public
                except FrameError as e:
                    reason = str(e)
            checked.append((msg, device, rel, reason))
        try:
            results = iter(self.store.put_many([rel for _, _, rel, _ in checked if rel is not None]))
        except StoreWriteError as e:
            raise IngestStopped("%s. The gateway stopped; every frame answered before is stored, and the %d "
                                "frame(s) in hand are not acknowledged, so the broker keeps them (this run: "
                                "%s). Fix the cause (free space) and start the gateway again"
                                % (e, len(batch), self.outcome.summary()))
        for msg, device, rel, reason in checked:  # in arrival order: PUBACKs keep the order of the frames
            if reason is RETRY:
                self._retry(msg, device)
                continue
            if rel is None:
                r = Report(msg.topic, 0, REJECTED, reason=reason)
            else:
                r = stored_report(msg.topic, 0, rel, next(results))
            self.done(r)
            if device:  # the subscription guarantees one; the check keeps a stray message from crashing us
                self.client.publish(receipt_topic(device), receipt(msg.payload, r.result, r.epoch, r.seq,
                                                                    r.reason), qos=1)
            self.client.ack(msg.mid, msg.qos)

    def _reload_keys(self):
        """Take the keyring file's current keys (read again if it changed). A
        keyring that cannot be read is said once on the status line, and
        until it loads again every frame is answered 'retry' (_flush)."""
        try:
            self.key_for = self.keys()
        except InputError as e:
            if self.keyring_failure != str(e):
                self.status("cannot read the keyring again (%s): every frame is answered 'retry' (the devices keep "
                            "them) until it loads" % e)
            self.keyring_failure = str(e)
            return
        if self.keyring_failure is not None:
            self.status("keyring read again: frames are verified and stored")
        self.keyring_failure = None

    def _retry(self, msg, device):
        """Answer a frame with a non-final "retry" receipt: the device keeps
        it and sends it again. Either the keyring does not know the device
        (yet; a key added to the keyring file meanwhile is picked up) or it
        cannot be read at the moment."""
        if self.keyring_failure is not None:
            why = "the gateway cannot read its keyring"
        else:
            why = "no key for device %r at the gateway" % device
            self.status("no key for device %r in the keyring: answered 'retry' (the device keeps the frame); add "
                        "its key with `edgesynth keys new`" % device)
        self.client.publish(receipt_topic(device), receipt(msg.payload, RETRY, reason=why), qos=1)
        self.client.ack(msg.mid, msg.qos)

    def _refusal(self, data, device):
        """Why the message cannot hold a frame of ``device``, or None."""
        if device is None:
            return "not a frames topic"
        if len(data) > self.max_frame:
            return "message of %d bytes, above the gateway's %d-byte limit" % (len(data), self.max_frame)
        try:
            envelope = split_envelope(data)
            envelope_device, stop = envelope[0], envelope[4]
        except FrameError as e:
            return str(e)
        if envelope_device != device:
            return "frame of device %r published under the topic of device %r" % (envelope_device, device)
        if stop != len(data):
            return "%d bytes after the frame (one frame per message)" % (len(data) - stop)
        return None

    def run(self):
        self.conn.connect(self.client)
        try:
            self._serve()
        except BaseException:
            # the store failed, or the broker refused us: the frame in hand stays unacknowledged,
            # so the broker keeps it for the next gateway; close the connection before raising
            with contextlib.suppress(Exception):
                self.client.disconnect()
                self.client.loop(timeout=LOOP_TIMEOUT)
            raise
        return self.outcome

    def _serve(self):
        delay = 0.1
        while not self.stop():
            rc = self.client.loop(timeout=LOOP_TIMEOUT)
            while rc == 0 and 0 < len(self.batch) < BATCH and self.batch_bytes < BATCH_BYTES:  # what has arrived
                n = len(self.batch)
                rc = self.client.loop(timeout=0)
                if len(self.batch) == n:
                    break
            if self.batch:
                self._flush()  # before a reconnection, which discards the PUBACKs not yet sent
            if self.refused:
                raise InputError("the broker %s refused the gateway: %s" % (self.conn.url, self.refused))
            if rc == 0:
                delay = 0.1
                continue
            # connection lost: reconnect with backoff; unacknowledged frames come back
            time.sleep(delay)
            delay = min(2 * delay, RECONNECT_MAX)
            try:
                self.client.reconnect()
            except OSError:
                pass
        # stop: the message being handled (if any) finished inside loop(); the receipts and
        # PUBACKs still queued go out before the DISCONNECT, which closes the session cleanly
        self.client.disconnect()
        deadline = time.monotonic() + 2
        while self.connected and time.monotonic() < deadline and self.client.loop(timeout=LOOP_TIMEOUT) == 0:
            pass


def gateway(broker, store, keyring, *, on_frame=None, stop=None, on_status=None, client_id=CLIENT_ID,
            max_frame=MAX_FRAME, cafile=None, cert=None, key=None, username=None, password=None):
    """Run an MQTT gateway until ``stop()`` returns true (a callable, e.g.
    ``threading.Event().is_set``; None: forever).

    broker: ``mqtt://HOST[:PORT]`` or ``mqtts://HOST[:PORT]`` (then ``cafile``,
        ``cert``/``key`` for TLS); ``username``/``password`` as mosquitto's
        password_file checks them (password default: $EDGESYNTH_MQTT_PASSWORD).
    store, keyring: as es.ingest (a path, created if missing, or an open Store;
        a keyring path or es.load_keyring(...)).
    on_frame: called with one ingest Report per frame after its commit, before
        its receipt and PUBACK (``path`` is the message's topic).
    on_status: called with a line of text when the gateway has subscribed
        (at start and after each reconnection) and when the connection is lost.
    client_id: the persistent session's id; one gateway per id.
    max_frame: messages above this many bytes (default 1 MiB) are rejected.

    Returns the Outcome (counts of stored, duplicate, conflict, rejected). A bad
    frame is counted and answered with a "rejected" receipt, never raised;
    IngestStopped is raised if the store cannot be written (that frame is not
    acknowledged, so the broker keeps it), InputError if the broker cannot be
    reached at start or refuses the connection.
    """
    conn = as_connection(broker, cafile=cafile, cert=cert, key=key, username=username, password=password)
    ring = keyring if isinstance(keyring, Keyring) else load_keyring(keyring)  # its identity: of the bytes read
    with open_store(store, ring) as (st, _):
        gw = _Gateway(conn, st, _keyring_reader(keyring, ring), on_frame or (lambda r: None),
                      stop or (lambda: False), client_id, max_frame, on_status or (lambda line: None))
        return gw.run()


def _keyring_reader(keyring, ring):
    """A callable giving the current ``key_for``. ``keyring``: a Keyring
    (then always ``ring``) or the path ``ring`` was loaded from, which is
    read again whenever its (inode, mtime, size) differs from those of the
    bytes last read (Keyring.identity, an fstat of the fd read, so a change
    made during or after a load is seen next time), so a device added with
    `edgesynth keys new` or revoked while the gateway runs is known from
    then on. Raises InputError while the file cannot be read or is not a
    valid keyring (removed, wrong mode, too large): the old keys are not
    used then, since they may hold devices revoked since. Writers replace
    the file by an atomic rename, so a half-written keyring is never read."""
    if isinstance(keyring, Keyring):
        return lambda: ring.key_for
    path, seen = os.fspath(keyring), {"ring": ring, "failed": False}

    def current():
        try:
            now = file_identity(os.stat(path))
        except OSError:
            now = None
        if seen["failed"] or now != seen["ring"].identity:
            seen["failed"] = True
            seen["ring"] = load_keyring(path)
            seen["failed"] = False
        return seen["ring"].key_for
    return current
