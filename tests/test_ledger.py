"""The device main loop with a persistent state and ledger (agent/main_loop.py,
agent/ledger.py): budget exhaustion, reboots, resends the host deduplicates."""
import json

import pytest

import agent
from agent import main_loop
from firmware_shims.sensors import StepClock
from host_tools.frames import iter_frames, parse_frame
from host_tools.store import DUPLICATE, STORED, Store


class Readings:
    def __init__(self, n, k=0):
        self.rows = [((i * 37 + k) % 4096, (i * 11 + 3 * k) % 4096) for i in range(n)]

    def read(self):
        return self.rows.pop(0) if self.rows else None


@pytest.fixture
def device(tmp_path, make_config):
    cfg = make_config(d=2, r=8, k=16, w=16, j=1, lo=[0, 0], hi=[4096, 4096])
    cfg["device"] = {"id": "gw", "sample_ms": 1, "release_ms": 100, "state": str(tmp_path / "state.bin"),
                     "lifetime_epsilon": [2, 1]}
    path = tmp_path / "device.json"

    def write(**dev):
        cfg["device"].update(dev)
        path.write_text(json.dumps(cfg))
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
    size = len(agent.Agent(json.load(open(path)), seed=b"size-probe", device_id="gw").release())
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
    with Store(str(tmp_path / "s.db")) as st:
        assert st.put(first) == STORED
        assert [st.put(r) for r in rels] == [STORED, STORED, STORED]
        assert st.put(rels[0]) == DUPLICATE
