"""PHDStream entries carry the channel names: a plan's --names reach the
sample's columns through simulate and assemble, the host decoder checks them
strictly, they are part of the configuration's id, and streams of
differently named channels are never assembled together."""
import copy

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import agent
from edgesynth.agent.msgpack_out import Encoder
from edgesynth.cli import main
from edgesynth.errors import MergeError, SchemaError
from edgesynth.mechanisms.phdstream import wire

START = 1_700_000_000  # a multiple of the 100 s window
SEED = b"phd-names-seed-0"


def events(seed=7, n=90):
    """Rows (x, y, op, t) over 3 windows of 100 s: inserts in a moving
    cluster, some of them deleted later."""
    rng = np.random.default_rng(seed)
    rows, live = [], []
    for i, t in enumerate(np.sort(rng.uniform(START, START + 300, n)).tolist()):
        if live and i % 4 == 3:
            x, y = live.pop(int(rng.integers(len(live))))
            rows.append((x, y, "delete", t))
        else:
            x, y = int(rng.integers(100, 400)) + i, int(rng.integers(200, 600))
            live.append((x, y))
            rows.append((x, y, "insert", t))
    return rows


def test_plan_names_reach_the_sampled_columns(tmp_path):
    r = CliRunner()
    cfg, csv = tmp_path / "cfg.json", tmp_path / "in.csv"
    out = r.invoke(main, ["plan", "--mechanism", "phdstream", "--bounds", "0:1000,0:1000", "--epsilon", "1",
                          "--ram", "64K", "--names", "x,y", "--max-events", "100", "-o", str(cfg)])
    assert out.exit_code == 0, out.output
    csv.write_text("x,y,op,t\n" + "".join("%d,%d,%s,%.3f\n" % row for row in events()))
    out = r.invoke(main, ["simulate", "--config", str(cfg), "--input", str(csv), "--time-column", "t", "--window",
                          "100", "--start", str(START), "--end", str(START + 300), "--seed", SEED.hex(),
                          "--op-column", "op", "-o", str(tmp_path / "f.bin")])
    assert out.exit_code == 0, out.output
    out = r.invoke(main, ["assemble", str(tmp_path / "f.bin"), "-o", str(tmp_path / "g.gen")])
    assert out.exit_code == 0, out.output
    gen = es.load(tmp_path / "g.gen")
    assert gen.model.names == ["x", "y"] and gen.steps == [1, 2, 3]
    out = r.invoke(main, ["sample", str(tmp_path / "g.gen"), "--step", "3", "--seed", "1", "-o", "-"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "x,y" and len(lines) == 1 + gen.population(3) > 1
    out = r.invoke(main, ["sample", str(tmp_path / "g.gen"), "--all-steps", "--seed", "1", "-o", "-"])
    assert out.exit_code == 0 and out.stdout.splitlines()[0] == "step,x,y"


def spec(names):
    return {"kind": "phdstream", "names": names, "op": "op", "lo": [0, 0], "hi": [255, 127], "depth": 8,
            "eps": [1, 1], "max_nodes": 255, "batch_max": 64, "snap": 2, "rate_bound": True}


def frames(names, device, windows=3):
    cfg = {"format": 1, "epsilon": [1, 1], "relation": "add-remove", "mechanisms": [spec(names)]}
    a = agent.Agent(cfg, seed=SEED, device_id=device, epoch=0, seq=0)
    rng = np.random.default_rng(3)
    out = []
    for w in range(windows):
        if w:
            a.next_window()
        for x, y in zip(rng.integers(0, 256, 30).tolist(), rng.integers(0, 128, 30).tolist()):
            a.update([x, y, 1])
        out.append(bytes(a.release()))
    return out


def test_different_names_across_devices_are_refused(tmp_path):
    lonlat = frames(["lon", "lat"], "dev-a")
    gen = es.assemble(lonlat + frames(["lon", "lat"], "dev-b"))
    assert gen.model.names == ["lon", "lat"] and gen.sample(step=2, seed=0).columns.tolist() == ["lon", "lat"]
    other = frames(["lat", "lon"], "dev-b")  # same box and parameters, channels named the other way round
    with pytest.raises(MergeError, match="different public configurations"):
        es.assemble(lonlat + other)
    (tmp_path / "f.bin").write_bytes(b"".join(lonlat + other))
    out = CliRunner().invoke(main, ["assemble", str(tmp_path / "f.bin"), "-o", str(tmp_path / "g.gen")])
    assert out.exit_code == 2 and out.output.startswith("error: ") and "different public configurations" in out.output


def payload():
    """A step-1 payload map of the Python device with names lon, lat."""
    cfg = {"format": 1, "epsilon": [1, 1], "relation": "add-remove", "mechanisms": [spec(["lon", "lat"])]}
    a = agent.Agent(cfg, seed=SEED)
    a.update([3, 4, 1])
    a.release()
    chunks = []
    enc = Encoder()
    enc.reset(lambda buf, n: chunks.append(bytes(buf[:n])))
    a.mechs[0].encode(enc)
    return msgpack.unpackb(b"".join(chunks), raw=False)


@pytest.mark.parametrize("bad", [None, "lon", ["lon"], ["lon", "lat", "z"], ["lon", "lon"], ["lon", ""],
                                 ["lon", "x" * 65], ["lon", "la\x00t"], ["lon", 7], ["lon", b"lat"]])
def test_decoder_refuses_bad_names(bad):
    m = payload()
    assert wire.decode(m).params.names == ["lon", "lat"]
    m["p"]["names"] = bad
    with pytest.raises(SchemaError, match="p.names must list 2 distinct strings of 1..64 characters"):
        wire.decode(m)


def test_names_are_part_of_the_config_id():
    m = payload()
    ok = copy.deepcopy(m)
    ok["p"]["names"] = ["é" * 64, "lat"]  # 64 characters (128 bytes): what the device's check lets through
    ids = set()
    for p in (m, ok):
        s = wire.PHDStreamState.from_payload(p, 1)
        s.bind_budget((1, 1))
        ids.add(s.config_id())
        assert s.describe()["names"] == p["p"]["names"]
    assert len(ids) == 2
