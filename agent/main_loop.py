"""The device main loop: sample the sensors, release one frame per period.

Releases follow the clock, never a count of readings: the release time is an
output too (notes/privhp.md 7.9). Each period is one epoch with a fresh state
and fresh noise; disjoint epochs compose in parallel, so every reading keeps
the config's epsilon (docs/privacy.md).

The optional "device" block of device.json drives it:

    "device": {"id": "gw-17", "adc_pins": [26, 27], "sample_ms": 1000,
               "release_ms": 3600000, "out": "frames.bin",
               "state": "state.bin", "lifetime_epsilon": [30, 1]}

With "state" the loop runs through agent/ledger.py: noise and counters persist
in that file (checkpointed every "checkpoint_every" readings, default only at
the start and at the release of a window), every release is charged to the
ledger and the loop stops when the next release would exceed
"lifetime_epsilon". After a reboot a released-but-unsent window is resent
byte-identically, and an unreleased one continues with its own noise.
"""
import json


def run(config_path="device.json", sensor=None, clock=None, sink=None, max_epochs=None):
    """Run until the sensor is exhausted (recorded streams) or forever.

    ``sensor.read()`` returns a reading or None at the end of a recording;
    ``clock`` has ``now``/``elapsed``/``wait`` (firmware_shims.sensors);
    ``sink(buf, n)`` receives frame bytes (default: append to the "out" file).
    Returns the number of frames released.
    """
    import agent
    with open(config_path) as fh:
        cfg = json.load(fh)
    dev = cfg.get("device", {})
    device_id = dev.get("id", "device")
    sample_ms = dev.get("sample_ms", 1000)
    release_ms = dev.get("release_ms", 3600000)
    if sensor is None:
        from firmware_shims.sensors import AdcSensor
        sensor = AdcSensor(dev.get("adc_pins", [26]))
    if clock is None:
        from firmware_shims.sensors import TicksClock
        clock = TicksClock()
    out = None
    if sink is None:
        out = open(dev.get("out", "frames.bin"), "ab")

        def sink(buf, n):
            out.write(buf if n == len(buf) else memoryview(buf)[:n])
    if dev.get("state"):
        released = _run_ledgered(cfg, dev, device_id, sensor, clock, sink, sample_ms, release_ms, max_epochs)
        if out is not None:
            out.close()
        return released
    epoch = dev.get("first_epoch", 0)
    released = 0
    reading = sensor.read()
    while reading is not None and (max_epochs is None or released < max_epochs):
        a = agent.Agent(cfg, device_id=device_id, epoch=epoch)
        start = clock.now()
        while reading is not None and clock.elapsed(start) < release_ms:
            a.update(reading)
            clock.wait(sample_ms)
            reading = sensor.read()
        a.release(sink)
        a = None
        released += 1
        epoch += 1
    if out is not None:
        out.close()
    return released


def _run_ledgered(cfg, dev, device_id, sensor, clock, sink, sample_ms, release_ms, max_epochs):
    from agent.errors import BudgetError
    from agent.ledger import Device
    d = Device(cfg, dev["state"], device_id=device_id)
    every = dev.get("checkpoint_every", 0)
    released = 0
    if d.sealed:  # rebooted after a release: resend it (free), then a new window
        d.release(sink)
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
            clock.wait(sample_ms)
            reading = sensor.read()
        try:
            d.release(sink)
        except BudgetError:
            break
        released += 1
        d.next_epoch()
    return released
