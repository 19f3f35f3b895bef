"""The device main loop: sample the sensors, release one frame per period.

Releases follow the clock, never a count of readings: the release time is an
output too (docs/privacy.md section 12). Each period is one epoch with a fresh state
and fresh noise; disjoint epochs compose in parallel, so every reading keeps
the config's epsilon (docs/privacy.md). A phdstream config is one continual
state instead: each period is one step of it (Agent.next_window), and each
event keeps the config's epsilon over the whole stream
(docs/mechanisms/phdstream.md).

The optional "device" block of device.json drives it:

    "device": {"credentials": "device.key", "adc_pins": [26, 27], "sample_ms": 1000,
               "release_ms": 3600000, "out": "frames.bin",
               "state": "state.bin", "lifetime_epsilon": [30, 1]}

"credentials" names a file on the device, never in the public config, holding
its identity: {"id": "gw-17", "key": "<64 hex digits>"} (the key of that id in
the fleet keyring). With it frames are tagged; without it the id is "id"
(default "device") and frames are untagged.

With "state" the loop runs through agent/ledger.py and the device must be
provisioned: "credentials" set and ``provision()`` run once on the device
(it writes the genesis record of the ledger and binds the identity to the
platform counter). Noise and counters persist in
that file (checkpointed every "checkpoint_every" readings, default only at the
start and at the release of a window), every release is charged to the ledger
and the loop stops when the next release would exceed "lifetime_epsilon".
After a reboot a released-but-unsent window is resent byte-identically, and an
unreleased one continues with its own noise. A missing, forged or rolled-back
state record stops the device (StateError): docs/trust.md section 6.

With an "mqtt" block ({"host": "192.0.2.10", "outbox": "outbox", ...},
agent/transport/mqtt.py ``from_config``) each frame is published to the
gateway instead of appended to "out": it is kept in the flash outbox until
its receipt, receipts are taken between readings, and a full outbox stops
the loop with OutboxFull (the ledgered window stays sealed and is resent
after the restart, once the outbox's frames were published and their
receipts taken, up to the publisher's timeout_ms). docs/transport.md.
"""
import json

from .device import Agent
from .errors import BudgetError, ConfigError
from .shims import shim


def _identity(dev):
    """``(device id, key or None)`` of a "device" block: from the credentials
    file it names, else ``(dev["id"] or "device", None)``. The file is the
    JSON of `edgesynth keys credentials`, or the 32 raw bytes of `edgesynth
    keys export` (no JSON is 32 bytes long), whose id is then ``dev["id"]``.
    ConfigError for a malformed credentials file or an "id" that contradicts it."""
    path = dev.get("credentials")
    if path is None:
        return dev.get("id", "device"), None
    import binascii
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) == 32:
        if "id" not in dev:
            raise ConfigError("%s: a raw 32-byte key file needs device.id" % path)
        return dev["id"], data
    try:
        cred = json.loads(data.decode())
    except ValueError:  # UnicodeError included
        cred = None
    try:
        device_id, key = cred["id"], binascii.unhexlify(cred["key"])
    except (TypeError, KeyError, ValueError):
        device_id, key = None, b""
    if not isinstance(device_id, str) or len(key) != 32:
        raise ConfigError('%s: credentials must be {"id": ..., "key": "<64 hex digits>"}' % path)
    if dev.get("id", device_id) != device_id:
        raise ConfigError("device.id %r contradicts the credentials' id %r" % (dev["id"], device_id))
    return device_id, key


def _ledgered(cfg):
    dev = cfg.get("device", {})
    device_id, key = _identity(dev)
    if key is None:
        raise ConfigError("device.state needs device.credentials: an unauthenticated ledger can be reset "
                          "by anyone who can write the filesystem")
    return dev["state"], device_id, key


def provision(config_path="device.json"):
    """Start the identity in the credentials file: write its genesis record.

    Once per identity, on the device, after copying its credentials file, e.g.
    ``mpremote exec "import agent.main_loop as m; m.provision()"``. Refuses
    when a state file exists or the identity is already bound to this board's
    platform counter (agent.ledger.provision).
    """
    from . import ledger
    with open(config_path) as fh:
        cfg = json.load(fh)
    path, device_id, key = _ledgered(cfg)
    ledger.provision(cfg, path, device_id, key)


def run(config_path="device.json", sensor=None, clock=None, sink=None, max_epochs=None):
    """Run until the sensor is exhausted (recorded streams) or forever.

    ``sensor.read()`` returns a reading or None at the end of a recording;
    ``clock`` has ``now``/``elapsed``/``wait`` (firmware_shims.sensors);
    ``sink(buf, n)`` receives frame bytes (default: append to the "out" file,
    or publish them when the config has an "mqtt" block).
    Returns the number of frames released.
    """
    with open(config_path) as fh:
        cfg = json.load(fh)
    dev = cfg.get("device", {})
    sample_ms = dev.get("sample_ms", 1000)
    release_ms = dev.get("release_ms", 3600000)
    d = None
    if dev.get("state"):  # before the sensors and the out file: a device that must not run stops here
        from .ledger import Device
        path, device_id, key = _ledgered(cfg)
        d = Device(cfg, path, device_id, key)
    else:
        device_id, key = _identity(dev)
    pub = None
    if dev.get("mqtt") and sink is None:
        from .transport.mqtt import from_config
        pub = from_config(dev["mqtt"], device_id)
    if sensor is None:
        sensor = shim("sensors").AdcSensor(dev.get("adc_pins", [26]))
    if clock is None:
        clock = shim("sensors").TicksClock()
    out = None
    if sink is None and pub is None:
        out = open(dev.get("out", "frames.bin"), "ab")

        def sink(buf, n):
            out.write(buf if n == len(buf) else memoryview(buf)[:n])
    try:
        if d is not None:
            return _run_ledgered(d, dev.get("checkpoint_every", 0), sensor, clock, sink, sample_ms, release_ms,
                                 max_epochs, pub)
        epoch = dev.get("first_epoch", 0)
        released = 0
        reading = sensor.read()
        a = None
        while reading is not None and (max_epochs is None or released < max_epochs):
            if a is None:
                a = Agent(cfg, device_id=device_id, epoch=epoch, key=key)
                # read here, while this agent is live: reading a.mechs after
                # the release leaves a stale reference to the counters (a
                # conservative GC root in this frame) that held them through
                # the next Agent's construction (+10.6 KB, 64 KiB MQTT plan)
                keep = a.mechs[0].kind == "phdstream"
            else:  # a continual (phdstream) state: the same pool, the next step
                a.next_window(epoch)
            start = clock.now()
            while reading is not None and clock.elapsed(start) < release_ms:
                a.update(reading)
                if pub is not None:
                    pub.poll()
                clock.wait(sample_ms)
                reading = sensor.read()
            _release(a, sink, pub)
            if not keep:
                a = None  # the next window is a fresh agent with fresh noise
            released += 1
            epoch += 1
        return released
    finally:
        if out is not None:
            out.close()
        if pub is not None:
            pub.close()


def _release(src, sink, pub):
    # src: an Agent or a ledger Device; the frame goes to the sink or the publisher
    if pub is None:
        src.release(sink)
    else:
        pub.release(src)


def _run_ledgered(d, every, sensor, clock, sink, sample_ms, release_ms, max_epochs, pub=None):
    released = 0
    if d.sealed:  # rebooted after a release: resend it (free), then a new window
        if pub is not None:  # publish what the outbox held and take receipts first: they may make room for it
            pub.flush(pub.timeout_ms)
        _release(d, sink, pub)  # the outbox keeps one copy of a frame it already holds
        d.next_epoch()
    reading = sensor.read()
    while reading is not None and (max_epochs is None or released < max_epochs):
        start = clock.now()
        n = 0
        while reading is not None and clock.elapsed(start) < release_ms:
            d.update(reading)
            n += 1
            if every and n % every == 0:
                d.checkpoint()
            if pub is not None:
                pub.poll()
            clock.wait(sample_ms)
            reading = sensor.read()
        try:
            _release(d, sink, pub)
        except BudgetError:
            break
        released += 1
        d.next_epoch()
    return released
