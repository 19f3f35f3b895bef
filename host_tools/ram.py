"""Device RAM and host memory: the model every planner charges against.

A device's RAM is its counters (exact bytes, computed by each mechanism's
planner) plus what the runtime needs beyond them: the C core's measured state
and stack, or the MicroPython heap's measured base, shape terms and GC tables
(benchmarks/bench_memory.py; docs/deployment.md). ``heap_need`` is what
``--ram`` is checked against. The host side: ``require_host_memory`` refuses
work (planning, assembly, loading a generator) that would need more than
``host_memory()``.
"""
import os
import re
from fractions import Fraction

from edgesynth.agent import Agent
from edgesynth.config import for_device
from edgesynth.errors import InputError

# The C core beyond the counters, for every mechanism: es_agent_t (208 B), the
# largest mechanism state (es_privhp_t, 56 B), the DRBG of construction (136 B)
# and the worst stack chain (es_agent_init, 1056 B on Cortex-M4), measured by
# `edgesynth firmware build` (docs/native.md; tests/test_firmware.py checks it).
C_CORE_OVERHEAD = 1536
# phdstream on the C core: es_agent_t (208 B), es_phdstream_t with the DRBG it
# keeps (312 B), the DRBG of construction (136 B) and its deepest chain, the
# release's step below its noise draws (1240 B on Cortex-M0+, 1112 B on M4);
# tests/test_phdstream_native.py checks it.
C_PHDSTREAM_OVERHEAD = 2048


# RAM beyond the counters on a 32-bit MCU, per device runtime and mechanism
# (PrivHP: per sketch kind). micropython: the base of heap_need, in GC pool
# bytes: the largest remainder over benchmarks/bench_memory.py's grids after
# the shape terms, rounded up to 1 KiB (measured with the .mpy bundle).
# Part of the base is interned names (qstrs: every module, attribute and file
# name the run loads), which MicroPython never frees. Their table grows in
# doubling pools; on the unix port the fifth (320 entries, about 2 KiB on 32
# bits) opens at the 301st name, and a run that opens it after construction
# needs that block contiguous in a fragmented heap: 5-12 KiB more
# (benchmarks/RESULTS.md). The base assumes the grid's runs stay below it: a
# 32 KiB PrivHP or profile run through runtimes/mp_driver.py interns 298
# (micropython.qstr_info), so agent/device.py loads phdstream by name.
# phdstream: its modules (the step code, the DRBG and noise code it keeps)
# and the step's transients, from benchmarks/bench_phdstream_memory.py's
# continual runs of several windows with deletions and its planned configs
# for 48..256 KiB; its construction's zero buffers are charged apart
# (heap_need's ``transient``). 38 KiB since fold-pruning: pool.py is always
# imported and the fold branches grew the step and release code, so the
# 256 KiB tree:128 plan (fold 8, batch 11,246) called for 37,717 B, past the
# 35 KiB charged before (its 32-bit estimate 263,865 B > 256 KiB).
RUNTIME_OVERHEAD = {
    "micropython": {"cms": 20 * 1024, "cs": 22 * 1024, "cdf": 20 * 1024, "profile": 21 * 1024,
                    "phdstream": 38 * 1024, "marginals": 22 * 1024},
    "c": {"cms": C_CORE_OVERHEAD, "cs": C_CORE_OVERHEAD, "cdf": C_CORE_OVERHEAD, "profile": C_CORE_OVERHEAD,
          "phdstream": C_PHDSTREAM_OVERHEAD, "marginals": C_CORE_OVERHEAD},
}


# The MQTT transport's heap on a 32-bit MicroPython port beyond the resend
# buffer (agent/transport/mqtt.py: umqtt.simple, the transport modules, the
# client, a 16-slot outbox and the Publisher, the largest transient of one
# publish and its receipt), in GC pool bytes, from
# benchmarks/bench_transport_heap.py on the 64-bit unix port: the two module
# rows (5,216 + 17,824 B) as measured, since bytecode and strings do not
# shrink on 32 bits; the object rows (3,040 + 64 + 1,568 B) halved
# (mp_pool_beyond_counters' rule: pointers, headers and GC blocks halve);
# 25,376 B rounded up to 256 B. The buffer (max_frame bytes) is charged on top.
TRANSPORT_POOL = {"mqtt": 25600}
# Outbox slots the charge was measured with (device.mqtt.max_frames).
TRANSPORT_SLOTS = 16


# MicroPython heap that grows with a state's shape, in 32-bit pool bytes:
# (per channel, per counter array). A channel brings its bounds, name and the
# reading's objects; a counter array its array object and the tuple the update
# unpacks (PrivHP: one per tree level and sketch row, the row's 4 or 8 hash
# parameters in it; CDF: one per channel and level). Linear upper fits, in
# multiples of 32 B, of bench_memory.py's grids.
SHAPE_BYTES = {"cms": (256, 96), "cs": (256, 96), "cdf": (512, 96), "profile": (0, 0), "phdstream": (256, 0),
               "marginals": (512, 256)}


# marginals on MicroPython, beyond SHAPE_BYTES (per column, per marginal), in
# 32-bit pool bytes (benchmarks/bench_marginals_memory.py): the state keeps
# its public schema for the release, so every categorical value stays on the
# heap: its list slot and JSON parse slack (MARGINALS_VALUE_BYTES), and a
# string's object (16 B) with its data in 16-byte GC blocks, a float's boxed
# object (16 B); a partitioned marginal's group ids arrive as a JSON list,
# alive beside their array('H') copy while the state is built (the grid
# measured 8.3 B per cell). A value's slot is 12 B: its list slot with the
# JSON list's growth slack and its entry in the set that checks the values
# distinct (agent/marginals/build.py _check_values, tables grown by about
# 4/3, old and new alive while it grows); one column of n = 1000 -> 4000 values
# measured 11.6 B per int, 27.3 per float and 41.7 per 12-character string.
MARGINALS_VALUE_BYTES = 12
MARGINALS_MAP_CELL_BYTES = 10


def marginals_transient(schema, groups):
    """Pool bytes a marginals spec with this ``schema`` (JSON) and ``groups``
    (null or a list of group ids per marginal) needs beyond its counters and
    shape terms (heap_need's ``transient``)."""
    total = 0
    for c in schema["columns"]:
        for v in c.get("values", ()):
            total += MARGINALS_VALUE_BYTES
            if isinstance(v, str):
                total += 16 + 16 * -(-(len(v.encode()) + 1) // 16)
            elif isinstance(v, float):
                total += 16
    cells = sum(len(g) for g in groups if g is not None)
    return total + MARGINALS_MAP_CELL_BYTES * cells


# MicroPython's GC keeps 2 allocation-table bits and 1 finaliser bit per
# 16-byte block of a 32-bit port's heap (32-byte blocks on the 64-bit unix
# port): the heap is 131/128 of the pool it can hand out.
GC_POOL_NUM, GC_POOL_DEN = 128, 131


SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([KMG])(I?B)?|B)?\s*", re.ASCII | re.IGNORECASE)
UNITS = {None: 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text, what):
    """Bytes (a positive int) of a size written as 65536, 64K, 64KB, 64KiB,
    64k, 1.5M, 1MB, 1MiB or 1G: every unit is binary, so K, KB and KiB all
    mean 1024 bytes, as device datasheets count RAM. Plain ASCII digits only;
    InputError naming ``what`` (an option such as "--ram") otherwise."""
    m = SIZE.fullmatch(str(text))
    if m is None:
        raise InputError("%s must be a size such as 65536, 64K, 64KB, 64KiB, 1.5M or 1G (K = 1024 bytes), got %r"
                         % (what, text))
    v = Fraction(m.group(1)) * UNITS[m.group(2) and m.group(2).upper()]
    if v.denominator != 1:
        raise InputError("%s: %r is not a whole number of bytes" % (what, text))
    if v <= 0:
        raise InputError("%s must be positive" % what)
    return int(v)


# Bytes of host memory that assembling one configuration may take. The need
# comes from public parameters (privhp_host_need, gls_need, inversion_need in
# edgesynth.mechanisms: privhp.growth, cdf.estimate, profile.invert), so it is checked before anything is
# allocated: a tiny epsilon's noise radius, a heavily padded tree or millions
# of PrivHP leaves are refused, not attempted.
# EDGESYNTH_HOST_MEMORY (e.g. 16G) sets it for a bigger or smaller host.
HOST_MEMORY = 2 << 30


def host_memory():
    """Bytes: HOST_MEMORY, or EDGESYNTH_HOST_MEMORY where it is set."""
    env = os.environ.get("EDGESYNTH_HOST_MEMORY")
    return HOST_MEMORY if env is None else parse_size(env, "EDGESYNTH_HOST_MEMORY")


def ram_notes(ram, counters, need, runtime):
    """The plan block's RAM entries (docs/config.md), in bytes: the budget
    (None when not given), the counters, the runtime's charge beyond them
    and the expected peak ``need``."""
    return {"ram_bytes": ram, "counter_bytes": counters, "device_runtime": runtime,
            "runtime_overhead_bytes": need - counters, "expected_peak_bytes": need}


def require_fit(ram, need, counters, runtime, what):
    """Refuse, in one line, a state ``what`` of ``need`` bytes (``counters`` of
    them counters) that exceeds the ``ram`` budget; ``ram`` None: no budget."""
    if ram is not None and need > ram:
        raise InputError("%s needs %d bytes (%d of counters + %d for the %s runtime); --ram gives %d"
                         % (what, need, counters, need - counters, runtime, ram))


def require_host_memory(need, what):
    """Refuse, in one line, the host work ``what`` ("assembling a profile of
    ...") when it needs ``need`` bytes above host_memory(): `plan` refuses such
    a config, `assemble` such frames, `sample` and `inspect` such a generator."""
    limit = host_memory()
    if need > limit:
        raise InputError("%s needs about %s of host memory, above the host limit of %s "
                         "(EDGESYNTH_HOST_MEMORY sets it)" % (what, _human(need), _human(limit)))


def _human(nbytes):
    return "%.3g GiB" % (nbytes / (1 << 30)) if nbytes >= 1 << 30 else "%.3g MiB" % (nbytes / (1 << 20))


def mcu_heap(pool):
    """Bytes of a 32-bit MicroPython heap whose GC pool holds ``pool`` bytes
    (the GC's own tables take the rest, GC_POOL_DEN / GC_POOL_NUM)."""
    return -(-pool * GC_POOL_DEN // GC_POOL_NUM)


def mp_pool_beyond_counters(raw, counters):
    """Pool bytes beyond the counters on a 32-bit port, estimated from ``raw``,
    the smallest heap (bytes) the agent ran in on the 64-bit unix port.

    That port's GC has 32-byte blocks, so its pool is 256/259 of the heap;
    pointers, object headers and blocks halve on 32 bits, counters do not.
    """
    return (raw * 256 // 259 - counters + 1) // 2


def transport_heap(kind, max_frame):
    """Bytes of 32-bit MicroPython heap the device transport ``kind`` ("mqtt")
    takes beside the agent: TRANSPORT_POOL plus its ``max_frame``-byte resend
    buffer, with the GC's tables (mcu_heap)."""
    return mcu_heap(TRANSPORT_POOL[kind] + max_frame)


FRAME_SLACK = 64  # bytes above the largest frame built at plan time (a frame's size barely varies: epoch, seq)
MAX_U32 = (1 << 32) - 1


def frame_bound(cfg):
    """Bytes of the largest frame a device of ``cfg`` releases: one built
    here with the longest device id, a tag and the largest epoch and seq,
    plus FRAME_SLACK (the state's size is fixed by the config). The device
    transport's resend buffer holds this many bytes.

    The agent is built without its noise (``restore`` leaves the counters at
    zero): every mechanism writes its counters packed at a fixed width, so
    their values do not change the length (privhp's clamp is a msgpack int,
    1 to 5 bytes: within FRAME_SLACK), and drawing the noise of a large state
    takes seconds."""
    a = Agent(for_device(cfg), device_id="d" * 64, epoch=MAX_U32, seq=MAX_U32, key=bytes(32), restore=_no_noise)
    return len(a.release()) + FRAME_SLACK


def _no_noise(mechs):
    """Agent's ``restore``: keep the freshly allocated counters (zeros; a
    marginals state's start as range(G) per marginal, the same width on the
    wire), drawing no noise."""


def heap_need(counters, runtime, kind, channels=0, arrays=0, transient=0):
    """Device RAM in bytes for one state of mechanism ``kind`` ("cms", "cs"
    for PrivHP, "cdf", "profile", "phdstream", "marginals") of ``counters`` bytes: what
    --ram is checked against.

    c: counters + C_CORE_OVERHEAD. micropython: the GC pool holds the
    counters, the measured base RUNTIME_OVERHEAD["micropython"][kind], the
    shape terms (SHAPE_BYTES per channel and per counter array) and
    ``transient`` bytes live beside them at the peak (phdstream: the zero
    buffers its largest arrays are built from, which do not halve on 32
    bits; marginals: marginals_transient); the heap adds the GC's tables (2.3% of the heap, so of the
    counters too: a constant charge alone would fall short for large states).
    """
    base = RUNTIME_OVERHEAD[runtime][kind]
    if runtime == "c":
        return counters + base
    per_channel, per_array = SHAPE_BYTES[kind]
    return mcu_heap(counters + base + per_channel * channels + per_array * arrays + transient)
