"""The marginals state in the C core (agent/c/es_marginals.{h,c},
es_marginals_f64.c): frames byte-identical to the Python agent's through the
native runtime for many random configs (1..3-way marginals, public
partitions, add-remove and replace, out-of-range, float, NaN and huge
readings, alone and beside another mechanism), the same under AddressSanitizer
and UBSan through the firmware glue, and on an emulated Cortex-M (qemu)."""
import os
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from edgesynth import agent, ccore
from edgesynth.agent.errors import ConfigError
from edgesynth.config import combine
from edgesynth.errors import InputError
from edgesynth.mechanisms.profile.plan import plan_profile
from edgesynth.runtimes import native
from edgesynth.runtimes.cpython import run_cpython

needs_native = pytest.mark.skipif(not native.available(), reason="the native core (cffi) is not built")


def random_schema(rng, d):
    """d columns: categorical (strings or ints) or binned, 2..13 cells each,
    now and then a wide one (up to 300 cells)."""
    cols = []
    for i in range(d):
        k = int(rng.integers(1, 13)) if rng.random() < 0.9 else int(rng.integers(40, 300))
        if rng.random() < 0.4:
            lo = float(rng.integers(-50, 50))
            cols.append({"name": "c%d" % i, "bounds": [lo, lo + float(rng.integers(1, 100))], "bins": k})
        elif rng.random() < 0.5:
            cols.append({"name": "c%d" % i, "values": ["v%d" % j for j in range(k)]})
        else:
            cols.append({"name": "c%d" % i, "values": [int(v) for v in rng.choice(1000, k, replace=False)]})
    return {"columns": cols}


def sizes_of(schema):
    return [len(c["values"]) + 1 if "values" in c else c["bins"] + 1 for c in schema["columns"]]


def random_spec(rng, d=None, grouped=0.4):
    """A marginals spec: random schema, 1..12 distinct 1- to 3-way marginals
    (under 2**16 cells each), some mapped onto a random public partition."""
    d = d or int(rng.integers(1, 7))
    schema = random_schema(rng, d)
    sizes = sizes_of(schema)
    cols, groups = [], []
    for _ in range(int(rng.integers(1, 13))):
        c = sorted(int(v) for v in rng.choice(d, int(rng.integers(1, min(3, d) + 1)), replace=False))
        cells = int(np.prod([sizes[i] for i in c]))
        if c in cols or cells > 1 << 16:
            continue
        cols.append(c)
        if rng.random() < grouped:
            g = int(rng.integers(1, cells + 1))
            ids = np.concatenate([np.arange(g), rng.integers(0, g, cells - g)])  # every group used
            groups.append([int(v) for v in rng.permutation(ids)])
        else:
            groups.append(None)
    if not cols:
        cols, groups = [[0]], [None]
    q = int(rng.integers(1, 1 << 20))
    spec = {"kind": "marginals", "schema": schema, "cols": cols, "q": q,
            "sigma": [int(v) for v in rng.integers(max(1, q // 64), 4 * q, len(cols))]}
    if any(g is not None for g in groups) or rng.random() < 0.5:
        spec["groups"] = groups
    return spec


def config(spec, relation="add-remove"):
    num, den = sum(spec["sigma"]), spec["q"]
    return {"format": 1, "epsilon": [num, den], "relation": relation, "mechanisms": [spec]}


def random_rows(rng, sizes, n, kind):
    """n records of cell indices, some out of range (-3..size+2); ``kind``
    "int" (int64 array), "float" (fractional, NaN and infinite values) or
    "huge" (integers beyond int32 and 2**53, as Python ints)."""
    sizes = np.array(sizes)
    x = rng.integers(-3, sizes + 3, size=(n, len(sizes)))
    if kind == "int":
        return x
    if kind == "float":
        f = x + rng.random(x.shape) * (rng.random(x.shape) < 0.5)
        f[rng.random(x.shape) < 0.05] = np.nan
        f[rng.random(x.shape) < 0.02] = np.inf
        f[rng.random(x.shape) < 0.02] = -np.inf
        return f
    out = x.astype(object)
    for r, c in zip(*np.nonzero(rng.random(x.shape) < 0.05)):
        out[r, c] = int(rng.choice([1 << 31, -(1 << 31) - 1, 1 << 60, -(1 << 70), 2 ** 53 + 1]))
    return out


def python_frame(cfg, data, **kw):
    rows = [tuple(v.item() if isinstance(v, np.generic) else v for v in r) for r in data]
    return bytes(run_cpython(cfg, rows, **kw))


KW = dict(seed=b"marginals-native", device_id="dev-marg", epoch=7, seq=2)


@needs_native
@pytest.mark.parametrize("seed", range(40))
def test_native_frames_identical_to_python_on_random_configs(seed):
    rng = np.random.default_rng(seed)
    spec = random_spec(rng)
    relation = "replace" if seed % 3 == 2 else "add-remove"
    cfg = config(spec, relation)
    data = random_rows(rng, sizes_of(spec["schema"]), int(rng.integers(0, 400)), ("int", "float", "huge")[seed % 3])
    kw = dict(KW, key=b"k" * 32 if seed % 2 else None)
    want = python_frame(cfg, data, **kw)
    if data.dtype != object:  # a numpy block (batch calls, several of them)
        assert native.run_native(cfg, data, block=97, **kw) == want
    one = native.NativeAgent(cfg, **kw)
    for r in data:
        one.update(list(r))
    assert one.release() == want


@needs_native
def test_beside_another_mechanism_reading_its_own_columns():
    """Marginals and a profile on one device: each reads its named columns
    of the record (the profile's id a column of its own, first in the
    reading: a marginals column holds cell indices, no other mechanism reads it)."""
    rng = np.random.default_rng(11)
    spec = random_spec(rng, d=3, grouped=1.0)
    names = [c["name"] for c in spec["schema"]["columns"]]
    prof = plan_profile(0, 8, 3, Fraction(1, 2), names=["extra"])
    cfg = combine([config(spec), prof])
    cfg["inputs"] = ["extra"] + names
    data = np.column_stack([rng.integers(0, 5, 300), random_rows(rng, sizes_of(spec["schema"]), 300, "int")])
    want = python_frame(cfg, data, **KW)
    assert native.run_native(cfg, data, **KW) == want


@needs_native
def test_device_memory_is_exactly_the_group_totals():
    rng = np.random.default_rng(5)
    for _ in range(10):
        cfg = config(random_spec(rng))
        p = ccore.core_params(cfg)["mechs"][0]
        a = agent.Agent(cfg, seed=b"x")
        assert p["mem_bytes"] == a.mechs[0].counter_bytes() == 4 * sum(len(t) for t in a.mechs[0].tabs)
        native.NativeAgent(cfg, seed=b"x")  # the C core's es_marginals_mem_size agrees (ConfigError if not)


def _c_cfg(ffi, keep, **over):
    """A valid C config (2 columns of 3 and 4 cells; marginals (0), (0, 1)
    grouped onto 2 groups), with fields replaced by ``over``."""
    f = dict(d=2, n=2, sizes=[3, 4], way=[1, 2], cols=[0, 0, 0, 0, 1, 0], ngroups=[0, 2],
             groups=[0, 1] * 6, q=8, sigma=[1, 1], schema=b"\x80")
    f.update(over)
    cfg = ffi.new("es_marginals_cfg_t *")
    for name, ctype in (("sizes", "uint16_t[]"), ("way", "uint8_t[]"), ("cols", "uint8_t[]"),
                        ("ngroups", "uint32_t[]"), ("groups", "uint16_t[]"), ("sigma", "uint64_t[]"),
                        ("schema", "uint8_t[]")):
        if f[name] is not None:
            keep.append(ffi.new(ctype, f[name]))
            setattr(cfg, name, keep[-1])
    cfg.d, cfg.n, cfg.q = f["d"], f["n"], f["q"]
    cfg.schema_len = len(f["schema"] or b"")
    return cfg


@needs_native
def test_c_core_refuses_parameters_that_would_break_memory_or_budget():
    """es_marginals_mem_size is 0 (and init refuses) for what the host never
    sends: a group id beyond G, a column out of order, 4-way marginals,
    oversized tables, a zero sigma, a missing schema."""
    ffi, lib = native.ffi, native.lib
    keep = []
    assert lib.es_marginals_mem_size(_c_cfg(ffi, keep)) == 4 * (3 + 2)
    for over in (dict(groups=[0, 2] * 6), dict(groups=None), dict(ngroups=[0, 13]), dict(cols=[0, 0, 0, 1, 0, 0]),
                 dict(way=[1, 4]), dict(way=[0, 2]), dict(sizes=[1, 4]), dict(sizes=[3, 4097]),
                 dict(d=17), dict(n=0), dict(sigma=[1, 0]), dict(q=0), dict(schema=None),
                 dict(d=3, sizes=[300, 300, 2], way=[1, 3], cols=[0, 0, 0, 0, 1, 2], ngroups=[0, 0])):
        cfg = _c_cfg(ffi, keep, **over)
        assert lib.es_marginals_mem_size(cfg) == 0, over
        st, mem = ffi.new("es_marginals_t *"), ffi.new("uint32_t[]", 64)
        assert lib.es_marginals_init(st, cfg, 1, mem, 256) == native.ES_E_CONFIG


@needs_native
def test_a_full_state_refuses_release():
    """Totals hold |noise| < 2**29 plus one per record: the record beyond
    ES_MAX_ITEMS is refused (ES_E_FULL) and the state is never released."""
    cfg = config(random_spec(np.random.default_rng(2)))
    a = native.NativeAgent(cfg, seed=b"x")
    a.mechs[0].state.items = (1 << 31) - 1 - (1 << 29) - 1  # ES_MAX_ITEMS - 1
    d = len(cfg["mechanisms"][0]["schema"]["columns"])
    a.update([0] * d)
    with pytest.raises(OverflowError):
        a.update([0] * d)
    with pytest.raises(OverflowError, match="cannot be released"):
        a.release()


@needs_native
def test_bad_specs_are_refused_by_the_python_checks():
    spec = random_spec(np.random.default_rng(4), d=3)
    bad = dict(spec, cols=[[1, 0]], sigma=[1])
    with pytest.raises(ConfigError, match="increasing"):
        native.NativeAgent(config(bad), seed=b"x")
    bad = dict(spec, groups=[[0]] * len(spec["cols"]))
    with pytest.raises(ConfigError, match="groups"):
        native.NativeAgent(config(bad), seed=b"x")
    with pytest.raises(ConfigError, match="add up"):
        native.NativeAgent(dict(config(spec), epsilon=[1, 10 ** 9]), seed=b"x")


# ---- under AddressSanitizer and UBSan: the firmware glue on the host gcc ----

MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#define ES_CFG_DEVICE
#include "es_config.h"

static int to_file(void *ctx, const uint8_t *p, size_t n)
{
    return fwrite(p, 1, n, (FILE *)ctx) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    static es_dev_value_t x[64 * ES_CFG_INPUTS];
    es_agent_t a;
    es_drbg_t rng;
    size_t got;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    (void)argc;
    if (!in || !out || es_dev_init() || es_drbg_seeded(&rng, (const uint8_t *)"asan", 4) ||
        es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                      (const uint8_t *)"dev", 3, 1, 0, NULL, 0, &rng))
        return 2;
    while ((got = fread(x, sizeof x[0] * ES_CFG_INPUTS, 64, in)) > 0)
        if (es_dev_update(x, got))
            return 3;
    return es_agent_release(&a, to_file, out) < 0 ? 4 : fclose(out);
}
"""


@pytest.fixture(scope="module")
def asan_core(tmp_path_factory):
    """The core's objects compiled once with -fsanitize=address,undefined."""
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    tmp = tmp_path_factory.mktemp("asan-core")
    inc = ccore.includedir()
    objs = []
    for f in sorted(os.listdir(inc)):
        if f.endswith(".c"):
            objs.append(str(tmp / (f[:-2] + ".o")))
            subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=all", "-I", inc, "-c", os.path.join(inc, f), "-o", objs[-1]],
                           check=True)
    return objs


@pytest.mark.parametrize("seed", range(8))
def test_sanitized_glue_frames_identical_to_python(asan_core, tmp_path, seed):
    """Random configs through es_config.h's device glue (int32 records, or
    double records with ES_CFG_DEVICE_F64): no sanitizer report, and the
    frame is the Python agent's."""
    from edgesynth.targets.firmware import config_header
    rng = np.random.default_rng(1000 + seed)
    spec = random_spec(rng)
    cfg = config(spec, "replace" if seed % 2 else "add-remove")
    f64 = seed % 2 == 1
    data = random_rows(rng, sizes_of(spec["schema"]), 500, "float" if f64 else "int")
    (tmp_path / "es_config.h").write_text(config_header(cfg))
    (tmp_path / "main.c").write_text(MAIN_C)
    exe = str(tmp_path / "prog")
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all"] + (["-DES_CFG_DEVICE_F64"] if f64 else []) +
                   ["-I", str(tmp_path), "-I", ccore.includedir(), str(tmp_path / "main.c")] + asan_core +
                   ["-lm", "-o", exe], check=True)
    (tmp_path / "in.bin").write_bytes(data.astype("<f8" if f64 else "<i4").tobytes())
    res = subprocess.run([exe, str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    want = python_frame(cfg, data, seed=b"asan", device_id="dev", epoch=1)
    assert (tmp_path / "out.bin").read_bytes() == want


COUNT_C = r"""
#include <stdio.h>
#include "es_core.h"

int main(void)
{
    /* 2 columns of 3 and 4 cells; marginals (0) ungrouped, (0, 1) grouped onto 2 groups */
    static const uint16_t sizes[] = {3, 4}, groups[] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    static const uint8_t way[] = {1, 2}, cols[] = {0, 0, 0, 0, 1, 0}, schema[] = {0x80};
    static const uint32_t ngroups[] = {0, 2};
    static const uint64_t sigma[] = {1, 1};
    es_marginals_cfg_t c = {2, 2, sizes, way, cols, ngroups, groups, 8, sigma, schema, 1};
    static int32_t mem[5];
    es_marginals_t m;
    uint16_t cell[2] = {65535, 9}; /* both past their column: the "other" cells 2 and 3 */
    int i;
    if (es_marginals_init(&m, &c, 1, mem, sizeof mem))
        return 2;
    m.base.noised = 1; /* the harness skips the noise (es_agent_init draws it): totals start at 0 */
    if (es_marginals_count(&m, cell))
        return 3;
    for (i = 0; i < 5; i++)
        printf("%d ", (int)mem[i]);
    return 0;
}
"""


def test_count_clamps_indices_past_their_column(asan_core, tmp_path):
    """es_marginals_count is public: indices past their column count in its
    "other" cell, in bounds under AddressSanitizer (they indexed past the
    totals and the group map before)."""
    (tmp_path / "count.c").write_text(COUNT_C)
    exe = str(tmp_path / "count")
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", ccore.includedir(), str(tmp_path / "count.c")] + asan_core +
                   ["-lm", "-o", exe], check=True)
    res = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    # (0): cell 2 of 3; (0, 1): cell 2 * 4 + 3 = 11, group 1 (no noise drawn: totals start at 0)
    assert res.stdout.split() == ["0", "0", "1", "0", "1"]


# ---- on an emulated Cortex-M ------------------------------------------------

@pytest.fixture(scope="module")
def qemu():
    missing = [t for t in ("arm-none-eabi-gcc", "qemu-system-arm") if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not installed (apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi "
                    "qemu-system-arm)" % ", ".join(missing))


@pytest.mark.parametrize("cpu,kind", [("cortex-m4", "int"), ("cortex-m4", "float"), ("cortex-m0plus", "int")])
def test_qemu_frames_identical_to_python(qemu, cpu, kind):
    from edgesynth.runtimes.qemu import run_qemu
    rng = np.random.default_rng(77)
    spec = random_spec(rng, d=4, grouped=0.5)
    cfg = config(spec)
    data = random_rows(rng, sizes_of(spec["schema"]), 300, kind)
    kw = dict(KW, key=b"q" * 16)
    assert run_qemu(cfg, data, cpu=cpu, **kw) == python_frame(cfg, data, **kw)


def test_qemu_refuses_a_state_too_large_for_the_board(qemu):
    """Every 1- and 2-way marginal of six 30-cell columns (13,680 totals,
    about 55 KB) does not fit the micro:bit's 16 KiB: refused with the
    linker's figure."""
    from edgesynth.runtimes.qemu import run_qemu
    schema = {"columns": [{"name": "c%d" % i, "values": list(range(29))} for i in range(6)]}
    cols = [[i] for i in range(6)] + [[i, j] for i in range(6) for j in range(i + 1, 6)]
    cfg = config({"kind": "marginals", "schema": schema, "cols": cols, "q": 1, "sigma": [1] * len(cols)})
    with pytest.raises(InputError, match="does not fit microbit"):
        run_qemu(cfg, np.zeros((1, 6), dtype=np.int64), cpu="cortex-m0plus", seed=b"x")
