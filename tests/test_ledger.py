"""The device main loop with a persistent state and ledger (agent/main_loop.py,
agent/ledger.py): provisioning, budget exhaustion, reboots, resends the host
deduplicates, rollback and deletion of the state, durable renames."""
import json
import os
import shutil
import stat

import pytest

from edgesynth import agent
from edgesynth.agent import main_loop
from edgesynth.agent.errors import ConfigError, StateError
from edgesynth.firmware_shims import fs
from edgesynth.firmware_shims.sensors import StepClock
from edgesynth.fleet.store import DUPLICATE, STORED, Store
from edgesynth.frames import iter_frames, parse_frame

KEY = bytes(range(32))


class Readings:
    def __init__(self, n, k=0):
        self.rows = [((i * 37 + k) % 4096, (i * 11 + 3 * k) % 4096) for i in range(n)]

    def read(self):
        return self.rows.pop(0) if self.rows else None


@pytest.fixture
def device(tmp_path, make_config):
    """write(**device block) -> path of a device.json, provisioned as "gw" on first use."""
    cfg = make_config(d=2, r=8, k=16, w=16, j=1, lo=[0, 0], hi=[4096, 4096])
    cred = tmp_path / "device.key"
    cred.write_text(json.dumps({"id": "gw", "key": KEY.hex()}))
    cfg["device"] = {"credentials": str(cred), "sample_ms": 1, "release_ms": 100,
                     "state": str(tmp_path / "state.bin"), "lifetime_epsilon": [2, 1]}
    path = tmp_path / "device.json"

    def write(**dev):
        cfg["device"].update(dev)
        path.write_text(json.dumps(cfg))
        if cfg["device"].get("state") and not fs.exists(cfg["device"]["state"]):
            main_loop.provision(str(path))
        return str(path)
    return write


def run(path, n, k=0):
    """Frames released by one boot of the main loop over n readings."""
    chunks = []
    released = main_loop.run(path, Readings(n, k), StepClock(), lambda b, m: chunks.append(bytes(b[:m])))
    return released, list(iter_frames(b"".join(chunks)))


def test_budget_stops_releases_and_survives_reboot(device):
    path = device()
    released, rels = run(path, 350)           # four windows of 100 readings, budget for two
    assert released == 2 and [(r.epoch, r.seq) for r in rels] == [(0, 0), (1, 1)]
    released, rels = run(path, 350, k=1)       # reboot: still no budget
    assert released == 0 and rels == []


def test_reboot_mid_send_resends_identical_frame_and_host_deduplicates(device, tmp_path):
    path = device(lifetime_epsilon=[10, 1])
    size = len(agent.Agent(json.load(open(path)), seed=b"size-probe", device_id="gw", key=KEY).release())
    sent = []

    def dying(b, n):
        sent.append(bytes(b[:n]))
        if sum(map(len, sent)) > size + 40:     # power lost early in the second frame (sizes vary by a byte)
            raise OSError("radio lost power")
    with pytest.raises(OSError):
        main_loop.run(path, Readings(250), StepClock(), dying)
    first_and_part = b"".join(sent)
    released, rels = run(path, 150, k=7)        # reboot: resend, then carry on
    assert released == 2                         # the resend does not count as a new release
    assert [(r.epoch, r.seq) for r in rels] == [(1, 1), (2, 2), (3, 3)]
    first, end = parse_frame(first_and_part)
    part = first_and_part[end:]
    assert (first.epoch, first.seq) == (0, 0) and 40 < len(part) < size
    assert rels[0].raw[:len(part)] == part       # the resend is the same bytes as the cut-off send
    with Store(str(tmp_path / "s.db"), create=True) as st:
        assert st.put(first) == STORED
        assert [st.put(r) for r in rels] == [STORED, STORED, STORED]
        assert st.put(rels[0]) == DUPLICATE


def keyed(device_id):
    return KEY if device_id == "gw" else None


def test_frames_of_a_provisioned_device_are_tagged_with_its_key(device):
    released, rels = run(device(), 100)
    assert released == 1 and rels[0].tagged
    assert parse_frame(rels[0].raw, key_for=keyed, require_tag=True)[0].verified


def test_a_ledger_needs_credentials(device, tmp_path):
    path = device()
    cfg = json.load(open(path))
    del cfg["device"]["credentials"]
    open(path, "w").write(json.dumps(cfg))
    with pytest.raises(ConfigError, match="needs device.credentials"):
        run(path, 100)
    with pytest.raises(ConfigError, match="needs device.credentials"):
        main_loop.provision(path)


@pytest.mark.parametrize("cred", ['{"id": "gw"}', '{"id": "gw", "key": "00"}', '{"id": 5, "key": "%s"}' % KEY.hex(),
                                  '{"id": "gw", "key": "zz%s"}' % KEY.hex()[2:], "not json"])
def test_malformed_credentials_are_refused(device, tmp_path, cred):
    path = device()
    (tmp_path / "device.key").write_text(cred)
    with pytest.raises(ConfigError, match="credentials must be"):
        run(path, 100)


def test_a_config_id_that_contradicts_the_credentials_is_refused(device):
    with pytest.raises(ConfigError, match="contradicts"):
        run(device(id="gw-other"), 100)


def test_restoring_the_state_file_cannot_overspend_the_budget(device, tmp_path):
    """Issue 11 item 13: release, copy the state away, release more, restore the
    copy, try to release beyond the lifetime budget."""
    path = device()                               # budget for two releases
    assert run(path, 100)[0] == 1
    shutil.copy(tmp_path / "state.bin", tmp_path / "copy")
    assert run(path, 100, k=1)[0] == 1
    assert run(path, 100, k=2)[0] == 0            # spent
    shutil.copy(tmp_path / "copy", tmp_path / "state.bin")
    with pytest.raises(StateError, match="restored copy"):
        run(path, 300, k=3)


def test_deleting_the_state_of_a_provisioned_device_stops_it(device, tmp_path):
    path = device()
    assert run(path, 100)[0] == 1
    os.remove(tmp_path / "state.bin")
    with pytest.raises(StateError, match="no state record"):
        run(path, 100)


def test_write_atomic_fsyncs_the_file_then_the_directory_after_the_rename(tmp_path, monkeypatch):
    """Issue 11 item 14: a rename is durable only once its directory is fsynced."""
    events = []
    fsync, rename = os.fsync, os.rename

    def spy_fsync(fd):
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        fsync(fd)

    def spy_rename(a, b):
        events.append("rename")
        rename(a, b)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "rename", spy_rename)
    fs.write_atomic(str(tmp_path / "f"), lambda f: f.write(b"x"))
    assert events == ["fsync file", "rename", "fsync dir"]
    assert (tmp_path / "f").read_bytes() == b"x"
