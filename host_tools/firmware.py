"""`edgesynth firmware build`: the C core (agent/c) cross-compiled for Cortex-M
with Debian's arm-none-eabi-gcc at -Os, and its flash, RAM and stack.

* flash: ``text`` (code + constants) and ``data`` of the core objects, from
  ``arm-none-eabi-size``; the float quantiser (es_quant_f64.c, only for float
  readings or bounds) is reported apart, as firmware with ADC codes leaves it out;
* RAM: the core has no static data (``bss`` 0); a device holds the counters
  (``es_privhp_mem_size``, with --config) plus the state structs, whose sizes
  come from the compiler itself (a probe object read with ``arm-none-eabi-nm``);
* stack: the worst call chain below each API function, from gcc's
  ``-fstack-usage`` frames on the ``-fcallgraph-info`` call graph (library
  calls such as memcpy and libgcc's 64-bit division count as 0 and are listed).

``config_header(cfg)`` writes the public parameters of a device config as C
constants (``es_config.h``) for firmware that includes es_core.h.
"""
import os
import re
import shutil
import subprocess
import tempfile

from host_tools.errors import InputError

CPUS = {
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "cortex-m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
}
CFLAGS = ["-Os", "-std=c99", "-Wall", "-Wextra", "-ffunction-sections", "-fdata-sections"]
CORE = ["es_sha256.c", "es_drbg.c", "es_dlap.c", "es_msgpack.c", "es_privhp.c", "es_quant_i32.c",
        "es_agent.c"]
FLOAT = ["es_quant_f64.c"]
ENTRY_POINTS = ("es_agent_init", "es_privhp_init", "es_privhp_update_i32", "es_privhp_update_f64",
                "es_agent_release")
STATE_TYPES = ("es_privhp_t", "es_agent_t", "es_drbg_t")
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


def includedir():
    from host_tools.native import includedir as inc
    return inc()


def compile_objects(cpu, sources, out_dir):
    """Compile agent/c ``sources`` for ``cpu`` into ``out_dir``: .o, .su, .ci files."""
    if cpu not in CPUS:
        raise InputError("--cpu must be one of %s" % ", ".join(CPUS))
    gcc = tool("arm-none-eabi-gcc")
    inc = includedir()
    objs = []
    for src in sources:
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


def _total(sizes):
    return {k: sum(s[k] for s in sizes.values()) for k in ("text", "data", "bss")}


def stack_usage(out_dir):
    """Worst-case stack bytes below each entry point, and the external callees
    counted as 0. Parses gcc's .ci call graphs (VCG) with frame sizes."""
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


def build(cpu, cfg=None):
    """Size report of the core for ``cpu`` (and the RAM of ``cfg`` if given)."""
    with tempfile.TemporaryDirectory(prefix="es-fw-") as tmp:
        core = object_sizes(compile_objects(cpu, CORE, tmp))
        stack, external = stack_usage(tmp)
        flt = object_sizes(compile_objects(cpu, FLOAT, tmp))
        stack_f, _ = stack_usage(tmp)
        stack.update({k: v for k, v in stack_f.items() if k not in stack})
        state = state_sizes(cpu, tmp)
    report = {"cpu": cpu, "compiler": gcc_version(), "flags": " ".join(CPUS[cpu] + CFLAGS),
              "objects": core, "core": _total(core), "float_quantiser": _total(flt),
              "stack": stack, "stack_external_calls": external, "state": state,
              "state_bytes": state["es_privhp_t"] + state["es_agent_t"]}
    if cfg is not None:
        from host_tools.native import core_params
        from agent.errors import ConfigError
        try:
            p = core_params(cfg)
        except ConfigError as e:
            raise InputError("invalid device config: %s" % e)
        report["counters_bytes"] = p["mem_bytes"]
        report["ram_bytes"] = p["mem_bytes"] + report["state_bytes"]
    return report


def _c_bytes(b):
    """A C string literal of bytes ``b``: printable ASCII as is, the rest as
    3-digit octal escapes (which, unlike \\x, cannot swallow a next digit)."""
    return '"%s"' % "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\?' else "\\%03o" % c
                            for c in b)


def config_header(cfg, source="device config"):
    """es_config.h: the public parameters of ``cfg`` as C constants (no seed,
    no key: those are the device's own). Defines ``es_cfg_privhp`` and
    ES_CFG_D, ES_CFG_MEM_BYTES, ES_CFG_FACTOR, ES_CFG_EPS_NUM/DEN."""
    from agent.errors import ConfigError
    from host_tools.native import core_params
    try:
        p = core_params(cfg)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)

    def arr(ctype, name, values, fmt):
        return "static const %s %s[] = {%s};" % (ctype, name, ", ".join(fmt % v for v in values))
    lines = [
        "/* Generated by `edgesynth firmware build` from %s: public parameters only. */"
        % source.replace("*/", "* /"),
        "#ifndef ES_CONFIG_H", "#define ES_CONFIG_H", '#include "es_core.h"', "",
        "#define ES_CFG_D %d" % p["d"],
        "#define ES_CFG_MEM_BYTES %d /* counters and hash parameters (es_privhp_mem_size) */"
        % p["mem_bytes"],
        "#define ES_CFG_FACTOR %d /* relation: 1 add-remove, 2 replace */" % p["factor"],
        "#define ES_CFG_EPS_NUM %dULL" % p["eps"][0],
        "#define ES_CFG_EPS_DEN %dULL" % p["eps"][1],
        "#define ES_CFG_INT_PATH %d /* 1: integer readings take es_privhp_update_i32 */" % p["int_path"],
        arr("uint64_t", "es_cfg_sigma", p["sigma"], "%dULL"),
        arr("uint64_t", "es_cfg_lo_bits", p["lo_bits"], "0x%016xULL"),
        arr("uint64_t", "es_cfg_hi_bits", p["hi_bits"], "0x%016xULL"),
        arr("double", "es_cfg_lo_f", p["lo_f"], "%r"),
        arr("double", "es_cfg_hi_f", p["hi_f"], "%r"),
    ]
    if p["int_path"]:
        lines += [arr("int32_t", "es_cfg_lo_i", p["lo"], "%d"), arr("int32_t", "es_cfg_hi_i", p["hi"], "%d")]
    lines += [
        "static const char *const es_cfg_names[] = {%s};" % ", ".join(_c_bytes(b) for b in p["names"]),
        "static const uint8_t es_cfg_hash_seed[] = %s;" % _c_bytes(p["hash_seed"]),
        "static const es_privhp_cfg_t es_cfg_privhp = {",
        "    %d, %d, %d, %d, /* d, r, j, sketch */" % (p["d"], p["r"], p["j"], p["sketch"]),
        "    %du, %du, %dULL, %dULL, es_cfg_sigma, /* k, w, q, clamp_p, sigma */"
        % (p["k"], p["w"], p["q"], p["clamp_p"]),
        "    0x%x, %s, /* int_mask, lo_i, hi_i */"
        % (p["int_mask"], "es_cfg_lo_i, es_cfg_hi_i" if p["int_path"] else "0, 0"),
        "    es_cfg_lo_f, es_cfg_hi_f, es_cfg_lo_bits, es_cfg_hi_bits,",
        "    es_cfg_names, es_cfg_hash_seed, %d};" % len(p["hash_seed"]),
        "#endif", ""]
    return "\n".join(lines)


def format_report(r):
    """Human-readable lines of a build report."""
    c, f = r["core"], r["float_quantiser"]
    out = ["core for %s (%s; %s)" % (r["cpu"], r["compiler"], r["flags"]),
           "  flash: text %d B, data %d B; RAM: bss %d B" % (c["text"], c["data"], c["bss"]),
           "  float quantiser (float readings only): text %d B" % f["text"],
           "  state: %s" % ", ".join("%s %d B" % kv for kv in sorted(r["state"].items())),
           "  stack (worst chain): %s" % ", ".join("%s %d B" % kv for kv in sorted(r["stack"].items()))]
    for name, s in sorted(r["objects"].items()):
        out.append("    %-16s text %5d  data %3d  bss %3d" % (name, s["text"], s["data"], s["bss"]))
    if "ram_bytes" in r:
        out.append("  device RAM: counters %d B + state %d B = %d B"
                   % (r["counters_bytes"], r["state_bytes"], r["ram_bytes"]))
    return out
