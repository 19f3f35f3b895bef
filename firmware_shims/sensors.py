"""Sensor input and clock for the device main loop, with host stand-ins.

On a board, ``AdcSensor`` reads ``machine.ADC`` pins (``read_u16``: 0..65535).
The MicroPython unix port and CPython have no ADC, so ``RecordedSensor``
replays readings from a file and ``StepClock`` advances simulated time by a
fixed step per reading: the same main loop then runs on the host against a
recorded stream.
"""
import time


class AdcSensor:
    """One reading per call: a tuple of ``read_u16()`` values of ADC ``pins``."""

    def __init__(self, pins):
        import machine
        self._adcs = [machine.ADC(p) for p in pins]
        self._buf = [0] * len(pins)

    def read(self):
        for i in range(len(self._adcs)):
            self._buf[i] = self._adcs[i].read_u16()
        return self._buf


class RecordedSensor:
    """Readings from a text file, one line per reading, values comma separated
    (integers stay integers). ``read()`` returns None at the end."""

    def __init__(self, path):
        self._fh = open(path)

    def read(self):
        line = self._fh.readline()
        while line and not line.strip():
            line = self._fh.readline()
        if not line:
            self._fh.close()
            return None
        out = []
        for part in line.strip().split(","):
            out.append(float(part) if "." in part or "e" in part else int(part))
        return out


class TicksClock:
    """The board's millisecond clock (wraps; use ``elapsed``)."""

    def now(self):
        return time.ticks_ms()

    def elapsed(self, start):
        return time.ticks_diff(time.ticks_ms(), start)

    def wait(self, ms):
        time.sleep_ms(ms)


class StepClock:
    """Simulated time: ``wait(ms)`` advances it instantly."""

    def __init__(self):
        self.t = 0

    def now(self):
        return self.t

    def elapsed(self, start):
        return self.t - start

    def wait(self, ms):
        self.t += ms
