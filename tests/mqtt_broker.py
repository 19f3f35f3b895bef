"""Test helpers for the MQTT path: a real mosquitto on a free loopback port,
and micropython-lib's umqtt.simple (edgesynth.runtimes.umqtt) for the MicroPython unix port.

    from mqtt_broker import Broker, umqtt_dir

``Broker(tmp_dir)`` starts ``mosquitto -c <temp config>`` (listener on
127.0.0.1 only, persistence to ``tmp_dir``); ``restart()`` stops it (SIGTERM,
so it saves its persistence file) and starts it again on the same port;
``stop()`` ends it. ``broker`` and ``umqtt_path`` are pytest fixtures over them.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from edgesynth.errors import InputError
from edgesynth.runtimes import umqtt

MOSQUITTO = "/usr/sbin/mosquitto"


def mosquitto_bin():
    exe = shutil.which("mosquitto") or (MOSQUITTO if os.path.exists(MOSQUITTO) else None)
    if exe is None:
        pytest.skip("mosquitto is not installed (apt-get install mosquitto; .ci/run installs it)")
    return exe


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A mosquitto process on 127.0.0.1:``port`` with persistence in ``tmp_dir``."""

    def __init__(self, tmp_dir, port=None):
        self.exe = mosquitto_bin()
        self.dir = str(tmp_dir)
        self.port = port or free_port()
        self.url = "mqtt://127.0.0.1:%d" % self.port
        self.conf = os.path.join(self.dir, "mosquitto.conf")
        with open(self.conf, "w") as fh:
            fh.write("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\n"
                     "persistence_location %s/\nautosave_interval 1\nmax_inflight_messages 0\n"
                     "max_queued_messages 100000\nlog_dest file %s/mosquitto.log\n"
                     % (self.port, self.dir, self.dir))
            if os.geteuid() == 0:  # else mosquitto drops to user mosquitto, who cannot write tmp_dir
                fh.write("user root\n")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([self.exe, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("mosquitto exited: %s" % self.proc.stderr.read().decode(errors="replace"))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not listen on port %d" % self.port)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        self.start()


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.stop()


def umqtt_dir(cache_dir):
    """A directory holding umqtt/simple.py (micropython-umqtt.simple, pinned
    version and hash; edgesynth.runtimes.umqtt), cached in ``cache_dir``;
    pytest.skip when it is not cached and PyPI cannot be reached."""
    try:
        return umqtt.umqtt_dir(str(cache_dir))
    except InputError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def umqtt_path(pytestconfig, tmp_path_factory):
    """The umqtt directory to put on MICROPYPATH (cached under pytest's cache dir)."""
    cache = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    cache = cache.mkdir("mqtt") if cache is not None else tmp_path_factory.mktemp("mqtt")
    return umqtt_dir(cache)
