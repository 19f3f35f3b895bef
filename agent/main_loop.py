"""The device main loop: sample the sensors, release one frame per period.

Releases follow the clock, never a count of readings: the release time is an
output too (notes/privhp.md 7.9). Each period is one epoch with a fresh state
and fresh noise; disjoint epochs compose in parallel, so every reading keeps
the config's epsilon (docs/privacy.md).

The optional "device" block of device.json drives it:

    "device": {"id": "gw-17", "adc_pins": [26, 27], "sample_ms": 1000,
               "release_ms": 3600000, "out": "frames.bin"}
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
