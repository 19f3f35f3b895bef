"""MQTT plumbing shared by the gateway and the publisher (docs/transport.md):
broker URLs, the topics, the receipt format and a configured paho client.

Topics (a device id is 1..64 of A-Z a-z 0-9 . _ - :, so it is topic-safe):

    edgesynth/<device>/frames/<epoch>   a release frame, QoS 1, the exact frame bytes
    edgesynth/<device>/receipts         the gateway's answer, QoS 1, one JSON object

A receipt is {"epoch", "seq", "sha256", "result", "reason"}: result "stored",
"duplicate" or "conflict" once the frame is committed (or kept aside), or
"rejected" (final: the same bytes can never be stored); sha256 is of the whole
frame as published, which is how a publisher matches receipts to frames.
"""
import hashlib
import json
import os
import urllib.parse

from edgesynth.errors import InputError

FRAMES = "edgesynth/+/frames/+"  # the gateway's subscription
SCHEMES = {"mqtt": (1883, False), "mqtts": (8883, True)}
PASSWORD_ENV = "EDGESYNTH_MQTT_PASSWORD"


def frame_topic(device, epoch):
    return "edgesynth/%s/frames/%d" % (device, epoch)


def receipt_topic(device):
    return "edgesynth/%s/receipts" % device


def topic_device(topic):
    """The device segment of a frames topic, or None if ``topic`` is not one."""
    parts = topic.split("/")
    if len(parts) == 4 and parts[0] == "edgesynth" and parts[2] == "frames" and parts[1]:
        return parts[1]
    return None


def receipt(data, result, epoch=None, seq=None, reason=None):
    """The receipt payload (bytes) for frame bytes ``data``."""
    return json.dumps({"epoch": epoch, "seq": seq, "sha256": hashlib.sha256(data).hexdigest(),
                       "result": result, "reason": reason}, sort_keys=True).encode()


def parse_url(url):
    """(host, port, tls) of ``mqtt://HOST[:PORT]`` (port 1883) or
    ``mqtts://HOST[:PORT]`` (TLS, port 8883); anything else is an InputError."""
    try:
        u = urllib.parse.urlsplit(url)
        port = u.port
    except ValueError as e:
        raise InputError("--broker %r: %s" % (url, e))
    if u.scheme not in SCHEMES or not u.hostname or u.path not in ("", "/") or u.query or u.fragment:
        raise InputError("--broker %r: give mqtt://HOST[:PORT] or mqtts://HOST[:PORT]" % url)
    if u.username or u.password:
        raise InputError("--broker %r: give the user name with --username and the password in %s, not in "
                         "the URL" % (url, PASSWORD_ENV))
    default, tls = SCHEMES[u.scheme]
    return u.hostname, port or default, tls


class Connection:
    """How to reach a broker: ``url`` (parse_url), and for ``mqtts://`` the
    CA file ``cafile`` (default: the system's CAs) and an optional client
    certificate ``cert`` with its ``key``; ``username`` and ``password``
    (default: the EDGESYNTH_MQTT_PASSWORD environment variable) as
    mosquitto's password_file checks them."""

    def __init__(self, url, *, cafile=None, cert=None, key=None, username=None, password=None):
        self.url = url
        self.host, self.port, self.tls = parse_url(url)
        if (cafile or cert or key) and not self.tls:
            raise InputError("--cafile, --cert and --key need an mqtts:// broker")
        if bool(cert) != bool(key):
            raise InputError("--cert and --key go together")
        for path in (cafile, cert, key):
            if path and not os.path.isfile(path):
                raise InputError("%s: no such file" % path)
        self.cafile, self.cert, self.key = cafile, cert, key
        self.username = username
        self.password = password if password is not None else os.environ.get(PASSWORD_ENV)
        if self.password and not username:
            raise InputError("a password needs --username")

    def client(self, client_id, **kwargs):
        """A paho Client (MQTT 3.1.1, callback API 2) set up for this broker."""
        import paho.mqtt.client as mqtt  # loaded only by the commands that talk MQTT

        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, **kwargs)
        if self.tls:
            c.tls_set(ca_certs=self.cafile, certfile=self.cert, keyfile=self.key)
        if self.username:
            c.username_pw_set(self.username, self.password)
        return c

    def connect(self, client, keepalive=30):
        """Open the connection (the CONNACK comes later, in the loop); a
        network error is an InputError naming the broker."""
        try:
            client.connect(self.host, self.port, keepalive=keepalive)
        except (OSError, ValueError) as e:
            raise InputError("cannot reach the broker %s (%s)" % (self.url, getattr(e, "strerror", None) or e))


def as_connection(broker, **options):
    """``broker`` as a Connection: a URL string plus ``options``, or a Connection."""
    if isinstance(broker, Connection):
        return broker
    return Connection(os.fspath(broker), **options)
