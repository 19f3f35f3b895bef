"""Test helpers for the MQTT path: a real mosquitto on a free loopback port,
and micropython-lib's umqtt.simple fetched from PyPI for the MicroPython unix port.

    from mqtt_broker import Broker, umqtt_dir

``Broker(tmp_dir)`` starts ``mosquitto -c <temp config>`` (listener on
127.0.0.1 only, persistence to ``tmp_dir``); ``restart()`` stops it (SIGTERM,
so it saves its persistence file) and starts it again on the same port;
``stop()`` ends it. ``broker`` and ``umqtt_path`` are pytest fixtures over them.
"""
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.request

import pytest

MOSQUITTO = "/usr/sbin/mosquitto"
UMQTT_VERSION = "1.3.4"
UMQTT_SDIST = "micropython-umqtt.simple-%s.tar.gz" % UMQTT_VERSION
UMQTT_SHA256 = "b6a2520239e3992c63a7de9370ee9b3d9d27819a90359c521f1c0f7ccab8d12f"
INDEX = "https://pypi.org/simple/micropython-umqtt-simple/"


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


def _fetch_sdist(dest):
    # pip cannot download this sdist (a micropython-lib package has no setup.py,
    # so `pip download` fails preparing its metadata): read the PyPI simple
    # index (PEP 691 JSON) and check the pinned hash
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        files = json.load(r)["files"]
    url = next(f["url"] for f in files if f["filename"] == UMQTT_SDIST)
    with urllib.request.urlopen(url, timeout=30) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != UMQTT_SHA256:
        raise RuntimeError("%s does not have the pinned SHA-256" % UMQTT_SDIST)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        src = t.extractfile("micropython-umqtt.simple-%s/umqtt/simple.py" % UMQTT_VERSION).read()
    os.makedirs(os.path.join(dest, "umqtt"), exist_ok=True)
    open(os.path.join(dest, "umqtt", "__init__.py"), "w").close()
    with open(os.path.join(dest, "umqtt", "simple.py"), "wb") as fh:
        fh.write(src)


def umqtt_dir(cache_dir):
    """A directory holding umqtt/simple.py (micropython-umqtt.simple, pinned
    version and hash), fetched once into ``cache_dir``; pytest.skip when PyPI
    cannot be reached."""
    dest = os.path.join(str(cache_dir), "umqtt-simple-" + UMQTT_VERSION)
    if not os.path.exists(os.path.join(dest, "umqtt", "simple.py")):
        tmp = dest + ".part%d" % os.getpid()
        try:
            _fetch_sdist(tmp)
        except (OSError, StopIteration, KeyError, ValueError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip("cannot fetch %s from PyPI: %s" % (UMQTT_SDIST, e))
        try:
            os.rename(tmp, dest)
        except OSError:  # another session got there first
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


@pytest.fixture(scope="session")
def umqtt_path(pytestconfig, tmp_path_factory):
    """The umqtt directory to put on MICROPYPATH (cached under pytest's cache dir)."""
    cache = pytestconfig.cache.mkdir("mqtt") if pytestconfig.cache is not None else tmp_path_factory.mktemp("mqtt")
    return umqtt_dir(cache)
