"""`edgesynth firmware build`: the C core (agent/c) cross-compiled for Cortex-M
with Debian's arm-none-eabi-gcc at -Os, and its flash, RAM and stack.

* flash: ``text`` (code + constants) and ``data`` of every core object, from
  ``arm-none-eabi-size``; totals for the common part (SHA-256, DRBG, sampler,
  msgpack, envelope), for a device of each mechanism kind with integer
  readings, and for the float paths apart (es_privhp_f64.c, es_cdf_f64.c,
  es_marginals_f64.c: only float readings or bounds link them);
* RAM: the core has no static data (``bss`` 0); a device holds the counters
  (``es_<kind>_mem_size``, with --config) plus the state structs, whose sizes
  come from the compiler itself (a probe object read with ``arm-none-eabi-nm``);
* stack: the worst call chain below each API function, from gcc's
  ``-fstack-usage`` frames on the ``-fcallgraph-info`` call graph. The agent
  reaches the mechanisms through their ops tables; gcc records those calls as
  ``__indirect_call``, taken here to be the worst ops function of any kind
  (draw_noise below es_agent_init, encode below the payload, phdstream's step
  below es_agent_seal): conservative. ``stack_by_kind`` is the worst chain of
  a device of one kind (its own ops only). Library calls such as memcpy and libgcc's 64-bit division, and the caller's
  sink (the remaining ``__indirect_call``), count as 0 and are listed.

``config_header(cfg)`` writes the public parameters of a device config as C
constants (``es_config.h``) for firmware that includes es_core.h, and the
device glue: states in static memory, their construction, and the routing of
a reading to the columns each mechanism reads.
"""
import os
import re
import shutil
import subprocess
import tempfile

from edgesynth.agent.errors import ConfigError
from edgesynth.ccore import core_params, includedir
from edgesynth.errors import InputError

CPUS = {
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "cortex-m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
}
CFLAGS = ["-Os", "-std=c99", "-Wall", "-Wextra", "-ffunction-sections", "-fdata-sections"]
# what every device links; per kind what it adds with integer readings; the float paths
COMMON = ["es_sha256.c", "es_drbg.c", "es_dlap.c", "es_msgpack.c", "es_agent.c"]
C_SOURCES = {"privhp": ["es_privhp.c", "es_privhp_i32.c", "es_hashing.c"], "cdf": ["es_cdf.c"],
              "profile": ["es_profile.c", "es_hashing.c"], "phdstream": ["es_phdstream.c"],
              "marginals": ["es_marginals.c"]}
FLOAT = {"privhp": ["es_privhp_f64.c"], "cdf": ["es_cdf_f64.c"], "profile": [], "phdstream": [],
         "marginals": ["es_marginals_f64.c"]}
ENTRY_POINTS = ("es_drbg_platform", "es_agent_init", "es_agent_release", "es_privhp_init",
                "es_privhp_update_i32", "es_privhp_update_f64", "es_cdf_init", "es_cdf_update_i32",
                "es_cdf_update_f64", "es_profile_init", "es_profile_update_i32", "es_phdstream_init",
                "es_phdstream_update_i32", "es_marginals_init", "es_marginals_update_i32",
                "es_marginals_update_f64")
# calls through the mechanisms' ops tables: caller -> the functions they reach
OPS_CALLS = {"es_agent_init": re.compile(r":draw_noise$"), "es_agent.c:payload": re.compile(r":encode$"),
             "es_agent_seal": re.compile(r":step_op$")}
STATE_TYPES = ("es_privhp_t", "es_cdf_t", "es_profile_t", "es_phdstream_t", "es_marginals_t", "es_agent_t",
               "es_drbg_t")
INSTALL_HINT = "apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"


def tool(name):
    exe = shutil.which(name)
    if exe is None:
        raise InputError("`%s` not found: install the ARM toolchain (%s)" % (name, INSTALL_HINT))
    return exe


def _run(cmd, cwd):
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if res.returncode:
        first = (res.stderr.strip().splitlines() or ["exit %d" % res.returncode])[0]
        raise InputError("%s failed: %s" % (os.path.basename(cmd[0]), first))
    return res.stdout


def sources(kinds, f64=False):
    """The core files a device with mechanism ``kinds`` links (each once), with
    the float paths when its readings or bounds need them."""
    out = list(COMMON)
    for k in kinds:
        for f in C_SOURCES[k] + (FLOAT[k] if f64 else []):
            if f not in out:
                out.append(f)
    return out


def compile_objects(cpu, files, out_dir):
    """Compile agent/c ``files`` for ``cpu`` into ``out_dir``: .o, .su, .ci files."""
    if cpu not in CPUS:
        raise InputError("--cpu must be one of %s" % ", ".join(CPUS))
    gcc = tool("arm-none-eabi-gcc")
    inc = includedir()
    objs = []
    for src in files:
        obj = os.path.join(out_dir, src[:-2] + ".o")
        _run([gcc] + CPUS[cpu] + CFLAGS + ["-fstack-usage", "-fcallgraph-info=su", "-I", inc, "-c",
                                           os.path.join(inc, src), "-o", obj], out_dir)
        objs.append(obj)
    return objs


def object_sizes(objs):
    """{object name: {"text", "data", "bss"}} from arm-none-eabi-size (Berkeley format)."""
    out = _run([tool("arm-none-eabi-size")] + objs, None)
    sizes = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        sizes[os.path.basename(f[5])] = {"text": int(f[0]), "data": int(f[1]), "bss": int(f[2])}
    return sizes


def _total(sizes, files):
    return {k: sum(sizes[f[:-2] + ".o"][k] for f in files) for k in ("text", "data", "bss")}


def stack_usage(out_dir, kinds=None):
    """Worst-case stack bytes below each entry point, and the external callees
    counted as 0. Parses gcc's .ci call graphs (VCG) with frame sizes. The
    agent's calls through the ops tables reach the ops of every kind, or only
    of ``kinds`` (a device of those kinds: a one-shot kind has no step)."""
    frames, edges = {}, {}
    for f in os.listdir(out_dir):
        if not f.endswith(".ci"):
            continue
        text = open(os.path.join(out_dir, f), encoding="utf-8").read()
        for title, label in re.findall(r'node: \{ title: "([^"]+)" label: "([^"]*)"', text):
            m = re.search(r"\\n(\d+) bytes", label)
            if m:
                frames[title] = int(m.group(1))
        for a, b in re.findall(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
            edges.setdefault(a, set()).add(b)
    files = None if kinds is None else tuple("/es_%s.c:" % k for k in kinds)
    for a, bs in edges.items():
        for caller, target in OPS_CALLS.items():
            if "__indirect_call" in bs and (a == caller or a.endswith("/" + caller)):
                edges[a] = (bs - {"__indirect_call"}) | {fn for fn in frames if target.search(fn) and (
                    files is None or any(f in fn for f in files))}
    external = sorted({b for bs in edges.values() for b in bs if b not in frames})

    def worst(fn, seen):
        if fn in seen:  # the core has no recursion; guard anyway
            raise InputError("recursive call chain through %s" % fn)
        below = [worst(g, seen | {fn}) for g in edges.get(fn, ()) if g in frames]
        return frames[fn] + max(below, default=0)
    return {fn: worst(fn, frozenset()) for fn in ENTRY_POINTS if fn in frames}, external


def state_sizes(cpu, out_dir):
    """sizeof of the state structs on ``cpu``, as the compiler lays them out."""
    probe = os.path.join(out_dir, "probe.c")
    with open(probe, "w") as fh:
        fh.write('#include "es_core.h"\n')
        for t in STATE_TYPES:
            fh.write("char probe_%s[sizeof(%s)];\n" % (t, t))
    obj = os.path.join(out_dir, "probe.o")
    _run([tool("arm-none-eabi-gcc")] + CPUS[cpu] + ["-std=c99", "-fno-common", "-I", includedir(), "-c",
                                                    probe, "-o", obj], out_dir)
    out = _run([tool("arm-none-eabi-nm"), "-S", obj], None)
    sizes = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[3].startswith("probe_"):
            sizes[f[3][len("probe_"):]] = int(f[1], 16)
    return sizes


def gcc_version():
    out = _run([tool("arm-none-eabi-gcc"), "--version"], None)
    return out.splitlines()[0]


def _params(cfg):
    """ccore.core_params of ``cfg``, its ConfigError as the CLI's InputError."""
    try:
        return core_params(cfg)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)


def build(cpu, cfg=None):
    """Size report of the core for ``cpu`` (and the flash and RAM of ``cfg`` if given)."""
    with tempfile.TemporaryDirectory(prefix="es-fw-") as tmp:
        sizes = object_sizes(compile_objects(cpu, sources(C_SOURCES, f64=True), tmp))
        stack, external = stack_usage(tmp)
        by_kind = {k: max(stack_usage(tmp, [k])[0].values()) for k in C_SOURCES}
        state = state_sizes(cpu, tmp)
    report = {"cpu": cpu, "compiler": gcc_version(), "flags": " ".join(CPUS[cpu] + CFLAGS),
              "objects": sizes, "common": _total(sizes, COMMON),
              "devices": {k: _total(sizes, sources([k])) for k in C_SOURCES},
              "float": {k: _total(sizes, FLOAT[k]) for k in C_SOURCES if FLOAT[k]},
              "stack": stack, "stack_external_calls": external, "stack_by_kind": by_kind, "state": state}
    if cfg is not None:
        p = _params(cfg)
        kinds = [m["kind"] for m in p["mechs"]]
        f64 = not all(m["int_path"] for m in p["mechs"])
        report["config"] = {"kinds": kinds, "float": f64, "text": _total(sizes, sources(kinds, f64))["text"]}
        report["counters_bytes"] = p["mem_bytes"]
        report["state_bytes"] = sum(state["es_%s_t" % k] for k in kinds) + state["es_agent_t"]
        report["ram_bytes"] = p["mem_bytes"] + report["state_bytes"]
    return report


def _c_bytes(b):
    """A C string literal of bytes ``b``: printable ASCII as is, the rest as
    3-digit octal escapes (which, unlike \\x, cannot swallow a next digit)."""
    return '"%s"' % "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\?' else "\\%03o" % c
                            for c in b)


def _comment(text):
    """``text`` safe inside a C comment: names and paths are the user's, and a
    backslash (line splice), a trigraph or a comment end would let them out."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in " ._,:+-=()[]@#/") else "_" for ch in text)


# how a value of each C field type is written in the header
C_FORMATS = {"uint8_t": "%d", "uint16_t": "%d", "uint32_t": "%du", "uint64_t": "%dULL", "int32_t": "%d",
             "double": "%r", "f64bits": "0x%016xULL"}


def _mechanism_lines(i, m):
    """Constants of mechanism ``i``: its C config ``es_cfg_m<i>`` (designated
    initializer) and the const arrays it points at, all in flash."""
    pre = "es_cfg_m%d" % i
    out = ["", "/* mechanism %d: %s, reading input column(s) %s */"
           % (i, m["kind"], ", ".join(str(c) for c in m["cols"])),
           "#define ES_CFG_M%d_D %d" % (i, m["d"]),
           "#define ES_CFG_M%d_MEM_BYTES %d /* es_%s_mem_size: its counters */" % (i, m["mem_bytes"], m["kind"])]
    inits = []
    for name, ctype, value in m["fields"]:
        if value is None:
            continue  # a NULL pointer
        if ctype in C_FORMATS:
            inits.append("    .%s = %s," % (name, C_FORMATS[ctype] % value))
            continue
        if ctype == "names":
            out.append("static const char *const %s_%s[] = {%s};"
                       % (pre, name, ", ".join(_c_bytes(b) for b in value)))
        elif ctype == "bytes":
            out.append("static const uint8_t %s_%s[] = %s;" % (pre, name, _c_bytes(value)))
        else:  # an array of C_FORMATS values
            elem = ctype[:-2]
            out.append("static const %s %s_%s[] = {%s};" % ("uint64_t" if elem == "f64bits" else elem, pre, name,
                                                            ", ".join(C_FORMATS[elem] % v for v in value)))
        inits.append("    .%s = %s_%s," % (name, pre, name))
    return out + ["static const es_%s_cfg_t %s = {" % (m["kind"], pre)] + inits + ["};"]


ID_HELPER = [
    "/* an id given as a double: an integer (agent/profile/__init__.py takes ints only), else ES_E_INPUT;",
    " * beyond int32 it is outside every domain (hi <= 2**29) and is clamped, so ignored as in Python */",
    "static int es_dev_id(double v, int32_t *id)", "{",
    "    if (!(v > -4503599627370496.0 && v < 4503599627370496.0)) { /* |v| >= 2**52, inf or NaN */",
    "        if (v != v || v - v != 0.0)",
    "            return ES_E_INPUT;",
    "        *id = v < 0 ? INT32_MIN : INT32_MAX;",
    "        return ES_OK;",
    "    }",
    "    if (v != (double)(int64_t)v)",
    "        return ES_E_INPUT;",
    "    *id = v < -2147483648.0 ? INT32_MIN : v > 2147483647.0 ? INT32_MAX : (int32_t)v;",
    "    return ES_OK;", "}"]


def _update_lines(mechs, inputs, f64):
    """``es_dev_update(x, n)``: n readings of ``inputs`` values each, every
    mechanism given its columns. ``f64``: the readings are doubles (profile
    ids then pass es_dev_id); else int32."""
    t = "f64" if f64 else "i32"
    out = ["/* count n readings of ES_CFG_INPUTS values each; every mechanism reads its columns */",
           "static int es_dev_update(const es_dev_value_t *x, size_t n)", "{"]
    m = mechs[0]
    if len(mechs) == 1 and m["cols"] == list(range(inputs)) and not (f64 and m["kind"] == "profile"):
        return out + ["    return es_%s_update_%s(&es_dev_m0, x, n);" % (m["kind"], t), "}"]
    out += ["    size_t k;", "    int st;", "    for (k = 0; k < n; k++, x += ES_CFG_INPUTS) {"]
    if f64:  # ids converted before any mechanism counts the reading: a bad one counts nowhere
        for i, m in enumerate(mechs):
            if m["kind"] == "profile":
                out += ["        int32_t id%d;" % i, "        if ((st = es_dev_id(x[%d], &id%d)) != ES_OK)"
                        % (m["cols"][0], i), "            return st;"]
    for i, m in enumerate(mechs):
        cols, kind = m["cols"], m["kind"]
        call = "es_%s_update_%s(&es_dev_m%d, %%s, 1)" % (kind, "i32" if kind == "profile" else t, i)
        if kind == "profile" and f64:
            out += ["        if ((st = %s) != ES_OK)" % (call % ("&id%d" % i)), "            return st;"]
        elif cols == list(range(cols[0], cols[0] + len(cols))):  # adjacent columns: read in place
            out += ["        if ((st = %s) != ES_OK)" % (call % ("x + %d" % cols[0])), "            return st;"]
        else:
            out += ["        {", "            const es_dev_value_t v[] = {%s};"
                    % ", ".join("x[%d]" % c for c in cols),
                    "            if ((st = %s) != ES_OK)" % (call % "v"), "                return st;", "        }"]
    return out + ["    }", "    return ES_OK;", "}"]


def _glue_lines(p):
    """The device glue, compiled where ES_CFG_DEVICE is defined: every state
    and its counters in static memory, ``es_dev_init``, ``es_dev_mechs`` for
    es_agent_init and ``es_dev_update``."""
    mechs = p["mechs"]
    out = ["", "#ifdef ES_CFG_DEVICE",
           "/* The device: states in static memory, their construction and the update of",
           " * readings in input order. Define ES_CFG_DEVICE (and ES_CFG_DEVICE_F64 for double",
           " * readings) in exactly one .c file before including this header. */"]
    for i, m in enumerate(mechs):
        out += ["static uint32_t es_dev_mem%d[(ES_CFG_M%d_MEM_BYTES + 3) / 4];" % (i, i),
                "static es_%s_t es_dev_m%d;" % (m["kind"], i)]
    out += ["static es_mech_t *const es_dev_mechs[ES_CFG_N_MECHS] = {%s};"
            % ", ".join("&es_dev_m%d.base" % i for i in range(len(mechs))), "",
            "/* lay out every state in its memory; es_agent_init(..., es_dev_mechs, ..., &rng) then draws",
            " * the noise from a DRBG seeded by es_drbg_platform(&rng): the board's es_entropy_fill */",
            "static int es_dev_init(void)", "{", "    int st;"]
    for i, m in enumerate(mechs):
        out += ["    if ((st = es_%s_init(&es_dev_m%d, &es_cfg_m%d, ES_CFG_FACTOR, es_dev_mem%d, sizeof es_dev_mem%d))"
                " != ES_OK)" % (m["kind"], i, i, i, i), "        return st;"]
    out += ["    return ES_OK;", "}", ""]
    f64 = ["typedef double es_dev_value_t;"]
    if any(m["kind"] == "profile" for m in mechs):
        f64 += ID_HELPER
    f64 += _update_lines(mechs, len(p["inputs"]), True)
    if mechs[0]["kind"] == "phdstream":  # integer events only (es_phdstream_update_i32)
        out += ["typedef int32_t es_dev_value_t; /* readings, then the op: +1 insert, -1 delete */"]
        out += _update_lines(mechs, len(p["inputs"]), False)
    elif all(m["int_path"] for m in mechs):
        out += ["#ifndef ES_CFG_DEVICE_F64", "typedef int32_t es_dev_value_t; /* ADC codes: no floating point */"]
        out += _update_lines(mechs, len(p["inputs"]), False) + ["#else"] + f64 + ["#endif"]
    else:
        out += f64
    return out + ["#endif /* ES_CFG_DEVICE */"]


def config_header(cfg, source="device config"):
    """es_config.h: the public parameters of ``cfg`` as C constants (no noise
    seed, no key: those are the device's own) and the device glue.

    Defines ES_CFG_INPUTS (values per reading), ES_CFG_N_MECHS, ES_CFG_FACTOR,
    ES_CFG_EPS_NUM/DEN, ES_CFG_INT_PATH, ES_CFG_MEM_BYTES (all counters); per
    mechanism i: ``es_cfg_m<i>`` (its es_<kind>_cfg_t), ES_CFG_M<i>_D and
    ES_CFG_M<i>_MEM_BYTES; where ES_CFG_DEVICE is defined, the glue.
    """
    p = _params(cfg)
    lines = [
        "/* Generated by `edgesynth firmware build` from %s: public parameters only. */" % _comment(source),
        "#ifndef ES_CONFIG_H", "#define ES_CONFIG_H", '#include "es_core.h"', "",
        "#define ES_CFG_INPUTS %d /* values per reading: %s */" % (len(p["inputs"]), _comment(", ".join(p["inputs"]))),
        "#define ES_CFG_N_MECHS %d" % len(p["mechs"]),
        "#define ES_CFG_FACTOR %d /* relation: 1 add-remove, 2 replace */" % p["factor"],
        "#define ES_CFG_EPS_NUM %dULL" % p["eps"][0],
        "#define ES_CFG_EPS_DEN %dULL" % p["eps"][1],
        "#define ES_CFG_INT_PATH %d /* 1: integer readings take the int32 updates */"
        % all(m["int_path"] for m in p["mechs"]),
        "#define ES_CFG_MEM_BYTES %d /* the counters of every mechanism */" % p["mem_bytes"]]
    for i, m in enumerate(p["mechs"]):
        lines += _mechanism_lines(i, m)
    return "\n".join(lines + _glue_lines(p) + ["#endif", ""])


def format_report(r):
    """Human-readable lines of a build report."""
    c = r["common"]
    out = ["core for %s (%s; %s)" % (r["cpu"], r["compiler"], r["flags"]),
           "  flash, common part: text %d B, data %d B; RAM: bss %d B" % (c["text"], c["data"], c["bss"]),
           "  flash of a one-mechanism device, integer readings: %s"
           % ", ".join("%s %d B" % (k, v["text"]) for k, v in sorted(r["devices"].items())),
           "  float paths (float readings or bounds only): %s"
           % ", ".join("%s +%d B" % (k, v["text"]) for k, v in sorted(r["float"].items())),
           "  state: %s" % ", ".join("%s %d B" % kv for kv in sorted(r["state"].items())),
           "  stack (worst chain): %s" % ", ".join("%s %d B" % kv for kv in sorted(r["stack"].items()))]
    for name, s in sorted(r["objects"].items()):
        out.append("    %-16s text %5d  data %3d  bss %3d" % (name, s["text"], s["data"], s["bss"]))
    if "ram_bytes" in r:
        cf = r["config"]
        out.append("  this device (%s%s): flash text %d B; RAM: counters %d B + state %d B = %d B"
                   % (" + ".join(cf["kinds"]), ", float path" if cf["float"] else "", cf["text"],
                      r["counters_bytes"], r["state_bytes"], r["ram_bytes"]))
    return out
