"""`plan --transport mqtt`: the MQTT transport's heap (edgesynth.ram.TRANSPORT_POOL,
measured by benchmarks/bench_transport_heap.py, plus a resend buffer of the
largest frame) comes off --ram before the counters are chosen.

Checks: the config is exactly the plan of the budget left to the agent, which
plus the charge fits --ram and is the largest that does; the charge is in the
expected peak and the printed breakdown; the config's device.mqtt block sizes
the outbox and the buffer, which holds the config's frames; a budget too small
for the transport, the C runtime and a missing --ram are refused in one line;
and a device built from the plan runs its main loop with the transport on the
unix port in the planned heap (-X heapsize=RAM, 32-bit-equivalent words),
publishing its frames to a real mosquitto and `edgesynth gateway`.
"""
import json
import os
import subprocess
import time

import pytest

import edgesynth as es
from edgesynth.agent import Agent
from edgesynth.config import for_device
from edgesynth.fleet.keys import load, new_key, write_credentials
from edgesynth.planning import BUDGET_STEP, frame_bound
from edgesynth.ram import FRAME_SLACK, TRANSPORT_POOL, TRANSPORT_SLOTS, transport_heap
from edgesynth.runtimes.micropython import device_bundle, find_micropython, heap_flag
from edgesynth.targets.bundle import compile_module
from tests.mqtt_broker import umqtt_path  # noqa: F401  (pytest fixture)
from tests.test_mqtt import Gateway, broker, no_stray_gateways, stored_raw  # noqa: F401  (fixtures)
from tests.test_store import run

BOUNDS = [(0, 50), (0, 100)]
RAM = 64 * 1024


def plan(ram, **kw):
    return es.plan(BOUNDS, epsilon=1, ram=ram, hash_seed="ab", **kw)


def fits(budget):
    """Whether the agent's plan of ``budget`` plus the transport it needs fits RAM."""
    cfg = plan(budget)
    return budget + transport_heap("mqtt", frame_bound(cfg)) <= RAM


def test_the_transport_comes_off_the_agents_budget():
    cfg = plan(RAM, transport="mqtt")
    p, t = cfg["plan"], cfg["plan"]["transport"]
    budget = t["agent_ram_bytes"]
    alone = plan(budget)
    assert cfg["mechanisms"] == alone["mechanisms"]  # exactly the agent's plan of what the transport leaves
    assert t["heap_bytes"] == transport_heap("mqtt", t["max_frame"]) and budget + t["heap_bytes"] <= RAM
    assert not fits(budget + BUDGET_STEP)  # the largest budget that leaves room for the transport
    assert p["ram_bytes"] == RAM and p["counter_bytes"] == alone["plan"]["counter_bytes"]
    assert p["counter_bytes"] < plan(RAM)["plan"]["counter_bytes"]
    assert p["expected_peak_bytes"] == alone["plan"]["expected_peak_bytes"] + t["heap_bytes"] <= RAM
    assert p["runtime_overhead_bytes"] == alone["plan"]["runtime_overhead_bytes"] + t["heap_bytes"]
    assert t["max_frame"] == frame_bound(cfg) and t["max_frames"] == TRANSPORT_SLOTS
    assert cfg["device"] == {"mqtt": {"max_frame": t["max_frame"], "max_frames": TRANSPORT_SLOTS,
                                      "max_bytes": TRANSPORT_SLOTS * t["max_frame"]}}
    data = {"x0": [float(i % 50) for i in range(300)], "x1": [float(i % 100) for i in range(300)]}
    frame = es.simulate(cfg, data, seed=b"s" * 16, device_id="d" * 64, epoch=2 ** 32 - 1, seq=2 ** 32 - 1,
                        key=bytes(32))
    assert len(frame) <= t["max_frame"]


def test_cli_prints_the_transport_line_and_refuses_what_cannot_fit(tmp_path):
    code, out, err = run("plan", "--bounds", "0:50,0:100", "--epsilon", "1", "--ram", "64K", "--transport", "mqtt",
                         "--hash-seed", "ab", "-o", tmp_path / "c.json")
    assert code == 0, err
    t = json.loads((tmp_path / "c.json").read_text())["plan"]["transport"]
    assert "of which the mqtt transport %d B" % t["heap_bytes"] in out
    assert "%d B buffer for the largest frame" % t["max_frame"] in out
    for args, msg in ((["--ram", "32K"], "with --transport mqtt the heap also holds the transport"),
                      (["--ram", "64K", "--device-runtime", "c"], "the C core has none"),
                      ([], "--transport mqtt needs --ram")):
        code, out, err = run("plan", "--bounds", "0:50,0:100", "--epsilon", "1", "--transport", "mqtt", *args,
                             "-o", tmp_path / "x.json")
        assert code == 2 and err.startswith("error: ") and msg in err and len(err.strip().splitlines()) == 1


def test_the_pool_keeps_the_module_rows_whole_and_halves_the_objects():
    """benchmarks/bench_transport_heap.py's 64-bit rows (docs/deployment.md):
    bytecode and strings do not shrink on 32 bits, objects halve."""
    modules = 5216 + 17824  # umqtt.simple, the transport modules
    objects = (3040, 64, 1568)  # client + outbox + Publisher, connected, largest transient
    pool = modules + sum((b + 1) // 2 for b in objects)
    assert TRANSPORT_POOL["mqtt"] == -(-pool // 256) * 256 == 25600


def test_bad_arguments_are_reported_as_they_are():
    with pytest.raises(es.InputError) as e:
        plan(RAM, transport="mqtt", names="a,b,c")
    assert str(e.value) == "3 names given for 2 channels"  # not "the heap also holds the transport"


@pytest.mark.parametrize("kw", [dict(bounds=BOUNDS), dict(bounds=BOUNDS, sketch="cs", clamp_share=0.1),
                                dict(bounds=[(0, 1)], mechanism="cdf"),
                                dict(bounds=None, mechanism="profile", domain="0:1000", cap=4, sample_bits=12)])
def test_frame_bound_is_the_length_of_a_noisy_frame(kw):
    """frame_bound skips the noise: the counters are packed at a fixed width;
    only privhp's clamp count is a msgpack int, 1 byte unnoised, up to 5 noised."""
    cfg = es.plan(epsilon=1, ram=RAM, hash_seed="ab", **kw)
    a = Agent(for_device(cfg), seed=bytes(32), device_id="d" * 64, epoch=2 ** 32 - 1, seq=2 ** 32 - 1,
              key=bytes(32))
    extra = len(a.release()) - (frame_bound(cfg) - FRAME_SLACK)
    assert extra == 0 if cfg["mechanisms"][0]["kind"] != "privhp" else 0 <= extra <= 4


DRIVER = """
import gc, sys
from agent import main_loop
from firmware_shims.sensors import StepClock

class Readings:
    def __init__(self, n):
        self.i, self.n = 0, n
    def read(self):
        self.i += 1
        return (self.i * 7 % 50, self.i * 13 % 100) if self.i <= self.n else None

n = main_loop.run(sys.argv[1], sensor=Readings(30), clock=StepClock(), max_epochs=3)
gc.collect()
print("MAIN", n, gc.mem_alloc(), gc.mem_free())
"""


def test_a_device_from_the_plan_publishes_within_the_planned_heap(tmp_path, broker, umqtt_path):  # noqa: F811
    try:
        exe = find_micropython()
    except es.InputError as e:
        pytest.skip(str(e))
    ring = str(tmp_path / "ring.json")
    new_key(ring, "dev-ram")
    write_credentials(load(ring), "dev-ram", str(tmp_path / "cred.json"))
    cfg = plan(RAM, transport="mqtt")
    dev = {"credentials": str(tmp_path / "cred.json"), "sample_ms": 1, "release_ms": 10,
           "mqtt": dict(cfg["device"]["mqtt"], host="127.0.0.1", port=broker.port, outbox=str(tmp_path / "outbox"),
                        timeout_ms=5000)}
    device_json = dict(for_device(cfg), device=dev)
    (tmp_path / "device.json").write_text(json.dumps(device_json))
    um = tmp_path / "umqtt-mpy" / "umqtt"  # as mip installs it on a board: compiled
    um.mkdir(parents=True)
    for name in ("__init__.py", "simple.py"):
        compile_module(os.path.join(umqtt_path, "umqtt", name), str(um / (name[:-3] + ".mpy")))
    (tmp_path / "drive.py").write_text(DRIVER)
    gw = Gateway(broker.url, tmp_path / "gw.db", ring)
    gw.wait_subscribed()
    env = dict(os.environ, MICROPYPATH="%s:%s:.frozen" % (device_bundle(), tmp_path / "umqtt-mpy"))
    r = subprocess.run([exe, "-X", "heapsize=" + heap_flag(RAM), str(tmp_path / "drive.py"),
                        str(tmp_path / "device.json")], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split()[:2] == ["MAIN", "3"]
    deadline = time.monotonic() + 10
    while len(stored_raw(tmp_path / "gw.db")) < 3 and time.monotonic() < deadline:  # the gateway's last commit
        time.sleep(0.05)
    assert [(d, e) for d, e, _ in stored_raw(tmp_path / "gw.db")] == [("dev-ram", e) for e in range(3)]
    assert gw.finish() == 0
