"""micropython-lib's umqtt.simple for the MicroPython unix port, pinned.

The device publishes with ``umqtt.simple`` (agent/transport/mqtt.py). On a
board it is installed with mip (docs/deployment.md); here it is fetched once
from PyPI (``micropython-umqtt.simple``, the pinned version and SHA-256) into
a cache directory and put on MICROPYPATH. pip cannot fetch this sdist (a
micropython-lib package has no setup.py, so `pip download` fails preparing its
metadata), hence the small reader of the PyPI simple index (PEP 691 JSON).

A cached copy is used whenever its hash matches, so no network is needed
after the first run; without one, and without PyPI, InputError says where
to put the file.
"""
import hashlib
import io
import json
import os
import shutil
import tarfile
import urllib.request

from edgesynth.errors import InputError

VERSION = "1.3.4"
SDIST = "micropython-umqtt.simple-%s.tar.gz" % VERSION
SDIST_SHA256 = "b6a2520239e3992c63a7de9370ee9b3d9d27819a90359c521f1c0f7ccab8d12f"
SIMPLE_SHA256 = "8555d2f654deb8eb0d724f79b0811a78cc94029d070f3d96bbd74288653d63a5"  # umqtt/simple.py in it
INDEX = "https://pypi.org/simple/micropython-umqtt-simple/"
CACHE_ENV = "EDGESYNTH_CACHE"  # directory for downloaded device libraries
NET_TIMEOUT = 30  # s per request


def cache_dir():
    """$EDGESYNTH_CACHE, else $XDG_CACHE_HOME/edgesynth, else ~/.cache/edgesynth."""
    d = os.environ.get(CACHE_ENV)
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "edgesynth")


def _sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _fetch(dest):
    """Write umqtt/__init__.py and umqtt/simple.py from the pinned sdist into ``dest``."""
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=NET_TIMEOUT) as r:
        files = json.load(r)["files"]
    url = next(f["url"] for f in files if f["filename"] == SDIST)
    with urllib.request.urlopen(url, timeout=NET_TIMEOUT) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != SDIST_SHA256:
        raise ValueError("%s from PyPI does not have the pinned SHA-256" % SDIST)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        src = t.extractfile("micropython-umqtt.simple-%s/umqtt/simple.py" % VERSION).read()
    os.makedirs(os.path.join(dest, "umqtt"), exist_ok=True)
    open(os.path.join(dest, "umqtt", "__init__.py"), "w").close()
    with open(os.path.join(dest, "umqtt", "simple.py"), "wb") as fh:
        fh.write(src)


def umqtt_dir(cache=None):
    """A directory holding umqtt/simple.py (the pinned micropython-umqtt.simple),
    to put on MICROPYPATH: the cached copy under ``cache`` (default
    cache_dir()) when its SHA-256 matches, else fetched from PyPI into it.
    InputError when neither works (no network, a tampered copy)."""
    dest = os.path.join(cache or cache_dir(), "umqtt-simple-" + VERSION)
    simple = os.path.join(dest, "umqtt", "simple.py")
    if os.path.isfile(simple) and _sha256(simple) == SIMPLE_SHA256:
        return dest
    tmp = "%s.part%d" % (dest, os.getpid())
    try:
        _fetch(tmp)
        if _sha256(os.path.join(tmp, "umqtt", "simple.py")) != SIMPLE_SHA256:
            raise ValueError("umqtt/simple.py in %s does not have the pinned SHA-256" % SDIST)
        shutil.rmtree(dest, ignore_errors=True)  # a copy whose hash did not match
        os.replace(tmp, dest)
    except (OSError, StopIteration, KeyError, ValueError, tarfile.TarError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.isfile(simple) and _sha256(simple) == SIMPLE_SHA256:  # made meanwhile by another process
            return dest
        raise InputError("publishing from the micropython runtime needs umqtt.simple %s (micropython-umqtt.simple "
                         "on PyPI), not cached in %s and not fetched: %s. With no network, put its umqtt/simple.py "
                         "(SHA-256 %s) in %s/umqtt/" % (VERSION, dest, e, SIMPLE_SHA256, dest))
    return dest
