"""Device keys: keyring file rules, tagging by device id, verification before parsing."""
import json
import os
import stat
import threading

import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth.frames as frames_mod
from edgesynth import agent
from edgesynth.agent.errors import ConfigError
from edgesynth.cli import main
from edgesynth.errors import BadEnvelope, BadTag, InputError
from edgesynth.fleet.keys import load, new_key
from edgesynth.frames import parse_frame, read_frames
from tests.test_frames import envelope


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(3)
    csv = tmp_path / "data.csv"
    with open(csv, "w") as fh:
        fh.write("a,b\n")
        for a, b in rng.uniform(0, 10, (400, 2)):
            fh.write("%.3f,%.3f\n" % (a, b))
    cfg = tmp_path / "device.json"
    code, _, err = run("plan", "--bounds", "0:10,0:10", "--epsilon", "1", "--ram", "40K", "--hash-seed", "k",
                       "-o", cfg)
    assert code == 0, err
    return tmp_path, csv, cfg


def test_keys_new_creates_private_keyring_and_never_prints_the_key(tmp_path):
    ring = tmp_path / "ring.json"
    code, out, err = run("keys", "new", "dev-1", "--keyring", ring)
    assert code == 0
    assert stat.S_IMODE(os.stat(ring).st_mode) == 0o600
    key = json.loads(ring.read_text())["keys"]["dev-1"]
    assert len(bytes.fromhex(key)) == 32 and key not in out + err
    code, out, err = run("keys", "new", "dev-1", "--keyring", ring)
    assert code == 2 and "already has a key" in err and json.loads(ring.read_text())["keys"]["dev-1"] == key
    code, out, err = run("keys", "new", "dev-1", "--keyring", ring, "--force")
    assert code == 0 and json.loads(ring.read_text())["keys"]["dev-1"] != key
    assert run("keys", "new", "dev-2", "--keyring", ring)[0] == 0
    assert run("keys", "list", "--keyring", ring)[1].split() == ["dev-1", "dev-2"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_keyring_readable_by_others_or_malformed_is_refused(tmp_path):
    ring = tmp_path / "ring.json"
    new_key(str(ring), "d")
    os.chmod(ring, 0o644)
    with pytest.raises(InputError, match="chmod 600"):
        load(str(ring))
    os.chmod(ring, 0o600)
    ring.write_text('{"format": 1, "keys": {"d": "abcd"}}')
    with pytest.raises(InputError, match="not 32 bytes"):
        load(str(ring))
    with pytest.raises(InputError, match="1..64 characters"):
        new_key(str(tmp_path / "r2.json"), "x" * 65)


def test_device_ids_are_one_safe_token_everywhere(tmp_path, make_config):
    """A device id is printed in ack lines: keys, the agent and the envelope
    decoder all apply agent.wire.device_id_bytes (A-Z a-z 0-9 . _ - :)."""
    ring = tmp_path / "ring.json"
    for bad in ("a\nack x frame 0 a 0 0 stored", "gw 1", "gw\u2028", "caf\u00e9", "a/b", ""):
        code, out, err = run("keys", "new", bad, "--keyring", ring)
        assert code == 2 and "device id" in err and len(err.splitlines()) == 1, (bad, err)
        with pytest.raises(ConfigError, match="device id"):
            agent.Agent(make_config(), seed=b"s" * 16, device_id=bad)
    assert not ring.exists()
    assert run("keys", "new", "gw-17.b_2:x", "--keyring", ring)[0] == 0
    key = b"K" * 32
    with pytest.raises(BadEnvelope, match="may hold only"):      # tagged, so it reaches the id check
        parse_frame(envelope(b"\x80", device=b"a\nack", key=key), key_for=lambda d: key)


def test_simulate_with_keyring_tags_and_assemble_checks_per_device(setup):
    tmp, csv, cfg = setup
    ring, other = tmp / "ring.json", tmp / "other.json"
    for dev in ("gw-1", "gw-2"):
        run("keys", "new", dev, "--keyring", ring)
    run("keys", "new", "gw-1", "--keyring", other)
    outs = []
    for dev in ("gw-1", "gw-2"):
        out = tmp / ("%s.bin" % dev)
        code, msg, err = run("simulate", "--config", cfg, "--input", csv, "--columns", "a,b", "--seed", "01",
                             "--device-id", dev, "--keyring", ring, "-o", out)
        assert code == 0 and "tagged" in msg, err
        outs.append(out)
    keyring = load(str(ring))
    for out, dev in zip(outs, ("gw-1", "gw-2")):
        (rel,) = read_frames(str(out), key_for=keyring.key_for, require_tag=True)
        assert rel.verified and rel.device == dev
    code, out, err = run("assemble", *outs, "--keyring", ring, "--json")
    assert code == 0 and json.loads(out)["devices"] == ["gw-1", "gw-2"], err
    code, out, err = run("assemble", outs[0], "--keyring", other)   # gw-1 has another key there
    assert code == 2 and "does not verify" in err
    code, out, err = run("assemble", outs[1], "--keyring", other)   # gw-2 unknown there
    assert code == 2 and "no key known" in err
    code, out, err = run("simulate", "--config", cfg, "--input", csv, "--columns", "a,b",
                         "--device-id", "gw-9", "--keyring", ring, "-o", tmp / "x.bin")
    assert code == 2 and "no key for device 'gw-9'" in err
    code, out, err = run("assemble", outs[0], "--keyring", ring, "--key", "00ff")
    assert code == 2 and "not both" in err


def test_tag_is_checked_in_constant_time_before_any_parsing(monkeypatch):
    key = b"K" * 32
    calls = []
    real = frames_mod.hmac.compare_digest
    monkeypatch.setattr(frames_mod.hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    garbage = b"\xc1" * 50                       # not msgpack at all
    with pytest.raises(BadTag):                  # a payload error would mean it was parsed first
        parse_frame(envelope(garbage, key=b"wrong key"), key_for=lambda d: key)
    assert calls == [1]
    with pytest.raises(BadTag):
        parse_frame(envelope(garbage), key_for=lambda d: key)     # untagged, device has a key


def test_keys_new_refuses_a_symlinked_keyring_and_leaves_link_and_target(tmp_path):
    target, link = tmp_path / "real.json", tmp_path / "ring.json"
    new_key(str(target), "d")
    before = target.read_bytes()
    link.symlink_to(target)
    assert load(str(link)).devices() == ["d"]                  # reading through a link is fine
    code, out, err = run("keys", "new", "e", "--keyring", link)
    assert code == 2 and "symbolic link" in err
    assert link.is_symlink() and target.read_bytes() == before


def test_keyring_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "ring.fifo"
    os.mkfifo(fifo)
    got = []

    def attempt():
        try:
            load(str(fifo))
        except InputError as e:
            got.append(str(e))
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(60)                       # a hang guard, not a timing check: the refusal needs no writer
    if t.is_alive():                 # unblock the reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert got and "not a regular file" in got[0]
    code, out, err = run("keys", "list", "--keyring", os.devnull)
    assert code == 2 and "not a regular file" in err


def test_keyring_nesting_and_duplicate_devices_are_refused(tmp_path):
    ring = tmp_path / "ring.json"
    deep = 200000
    for text, why in (('{"format": 1, "keys": %s}' % ("[" * deep + "]" * deep), "nests deeper"),
                      ('{"format": 1, "keys": {"d": "%s", "d": "%s"}}' % ("11" * 32, "22" * 32), "'d' appears twice"),
                      ('{"format": 1, "format": 1, "keys": {}}', "'format' appears twice"),
                      ('{"format": 1, "keys": {"a\\nb": "%s"}}' % ("11" * 32), "bad device id")):
        ring.write_text(text)
        os.chmod(ring, 0o600)
        code, out, err = run("keys", "list", "--keyring", ring)
        assert code == 2 and why in err and len(err.splitlines()) == 1, (why, err)
    ring.write_text('{"format": 1, "note": "[[[[[{{{{{", "keys": {"d": "%s"}}' % ("11" * 32))
    assert load(str(ring)).devices() == ["d"]                   # brackets inside strings do not nest


def test_keys_credentials_writes_what_the_device_main_loop_reads(tmp_path):
    from edgesynth.agent.main_loop import _identity
    ring, cred = tmp_path / "k.json", tmp_path / "device.key"
    assert run("keys", "new", "gw-3", "--keyring", ring)[0] == 0
    code, out, err = run("keys", "credentials", "gw-3", "--keyring", ring, "-o", cred)
    key = load(str(ring)).require("gw-3")
    assert code == 0 and key.hex() not in out + err, err
    assert stat.S_IMODE(os.stat(cred).st_mode) == 0o600
    assert _identity({"credentials": str(cred)}) == ("gw-3", key)
    code, _, err = run("keys", "credentials", "gw-4", "--keyring", ring, "-o", tmp_path / "other.key")
    assert code == 2 and "no key for device 'gw-4'" in err and not (tmp_path / "other.key").exists()
