"""The `edgesynth` command line (DESIGN.md, "The command line").

Every command explains itself with --help. Bad input ends with one line on
stderr and exit status 2; set EDGESYNTH_DEBUG=1 to see a traceback for an
unexpected internal error.
"""
import json
import os
import sys

import click
import numpy as np

from edgesynth.errors import EdgesynthError, InputError
from edgesynth.config import write_config
from edgesynth.outputs import atomic_output, write_bytes, write_text

EPILOG = ("Docs: README.md; docs/ has config, privacy, wire-format, deployment, native, trust, "
          "cdf and profile pages.")


class Group(click.Group):
    """Turns every EdgesynthError into one stderr line and exit status 2."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
            sys.exit(rv if isinstance(rv, int) else 0)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except EdgesynthError as e:
            click.echo("error: %s" % e, err=True)
            sys.exit(2)
        except BrokenPipeError:
            sys.exit(0)
        except Exception as e:  # last resort: never a bare traceback for users
            if os.environ.get("EDGESYNTH_DEBUG"):
                raise
            click.echo("internal error: %s: %s (set EDGESYNTH_DEBUG=1 for a traceback)"
                       % (type(e).__name__, e), err=True)
            sys.exit(1)


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="edgesynth")
def main():
    """Differentially private synthetic data from sensor streams.

    A device agent keeps noisy-from-birth summaries of its readings and
    releases them as a frame; the host turns frames into a generator that
    samples any amount of synthetic data at no further privacy cost.

    Typical path: plan -> simulate (or a real device) -> assemble -> sample -> evaluate.
    """


def _progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), transient=True, console=_stderr_console())


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


def _hex_bytes(text, what):
    try:
        b = bytes.fromhex(text)
    except ValueError:
        raise InputError("%s must be hexadecimal" % what)
    if not b:
        raise InputError("%s is empty" % what)
    return b


def _device_key(key_hex, keyring, device_id):
    """The HMAC key of --key or of --device-id in --keyring (at most one), or None."""
    if key_hex and keyring:
        raise InputError("pass --key or --keyring, not both")
    if keyring:
        from edgesynth.fleet.keys import load
        return load(keyring).require(device_id)
    return _hex_bytes(key_hex, "--key") if key_hex else None


def _frame_keys(key_hex, keyring):
    """(key_for, require_tag) for reading frames: one --key for every frame, or
    each frame's key looked up in --keyring by its envelope's device id."""
    if key_hex and keyring:
        raise InputError("pass --key or --keyring, not both")
    if keyring:
        from edgesynth.fleet.keys import load
        return load(keyring).key_for, True
    if key_hex:
        key = _hex_bytes(key_hex, "--key")
        return (lambda device: key), True
    return None, False


def _columns(text):
    cols = [c.strip() for c in text.split(",") if c.strip()]
    if not cols:
        raise InputError("--columns needs at least one column name")
    if len(set(cols)) != len(cols):
        raise InputError("--columns names a column twice")
    return cols


def _echo_json(obj):
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable))


def _jsonable(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


# --------------------------------------------------------------------- plan
@main.command()
@click.option("--bounds", default=None, help="Public per-channel range LO:HI[,LO:HI...]; never read it off the data "
                                            "(privhp, cdf).")
@click.option("--epsilon", required=True, help="Privacy budget per reading, e.g. 1, 0.5 or 1/3.")
@click.option("--ram", default=None, help="RAM the agent may use on the device, in bytes (suffix K or M allowed). "
                                         "privhp: required, sets the shape. cdf: refuses a --bins that does not "
                                         "fit; without --bins, the largest K that fits. profile: refuses a "
                                         "--domain that does not fit; with --sample-bits and no --domain, the "
                                         "largest sampled range [0, n) that fits.")
@click.option("--mechanism", default="privhp", show_default=True, type=click.Choice(["privhp", "cdf", "profile"]),
              help="Summary kept on the device (cdf: docs/cdf.md, profile: docs/profile.md).")
@click.option("--bins", default=None, type=click.IntRange(2, 1 << 24),
              help="cdf: bins K per channel (default with --ram: the largest 2**a 3**b that fits, or the "
                   "integer span of integer bounds when it fits).")
@click.option("--branching", default=None, help="cdf: tree branching n1,n2,... (default: searched).")
@click.option("--domain", default=None, help="profile: dense ids LO:HI (LO <= id < HI); with --sample-bits, the "
                                            "sampled range (default with --ram: the largest [0, n) that fits).")
@click.option("--cap", default=None, type=click.IntRange(1, 1 << 24), help="profile: public cap on one id's count.")
@click.option("--sample-bits", default=None, type=int,
              help="profile: hashed ids from [0, 2**B); --domain is then the range of their keyed permutation "
                   "kept (a sample; key from --hash-seed).")
@click.option("--names", default=None, help="Channel names, comma separated (default x0,x1,...).")
@click.option("--n-max", default=10 ** 6, show_default=True, type=click.IntRange(2, 2 ** 29),
              help="Public upper bound on readings per release; sets the tree depth.")
@click.option("--sketch", default="cms", show_default=True, type=click.Choice(["cms", "cs"]),
              help="Count-min or count sketch for the deep levels.")
@click.option("--rows", "j", default=None, type=click.IntRange(1, 16), help="Sketch rows j (default: chosen).")
@click.option("--clamp-share", default="1/50", show_default=True,
              help="Part of epsilon spent on the noisy count of out-of-range readings (0 to drop it).")
@click.option("--uniform-split", is_flag=True, help="Split epsilon evenly over levels instead of Eq. (23).")
@click.option("--hash-seed", default=None, help="Public hash seed shared by devices that will be merged (default random).")
@click.option("--relation", default="add-remove", show_default=True, type=click.Choice(["add-remove", "replace"]),
              help="Neighbouring streams: add/remove one reading, or replace one (doubles the noise).")
@click.option("--device-runtime", default="micropython", show_default=True, type=click.Choice(["micropython", "c"]),
              help="What runs the agent on the device; sets the RAM charged beyond the counters against "
                   "--ram (every mechanism; docs/deployment.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan summary as JSON.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Config file to write (JSON).")
def plan(bounds, epsilon, ram, mechanism, bins, branching, domain, cap, sample_bits, names, n_max, sketch, j,
         clamp_share, uniform_split, hash_seed, relation, device_runtime, as_json, output):
    """Choose the device's public parameters for a RAM budget and write the config.

    Counter and hash-table bytes are exact; the runtime overhead of the agent
    itself is measured (docs/deployment.md). A plan that cannot fit --ram is
    refused with what it needs and what it has.
    """
    from edgesynth.budget import parse_epsilon
    from edgesynth.config import parse_bounds
    from edgesynth.ram import parse_size
    from edgesynth.mechanisms.privhp.plan import plan_privhp
    eps = parse_epsilon(epsilon)
    ram_bytes = parse_size(ram, "--ram") if ram is not None else None
    if mechanism != "privhp":
        from edgesynth.cli import plan_command
        plan_command(mechanism, eps, bounds=bounds, bins=bins, branching=branching, domain=domain, cap=cap,
                     names=_columns(names) if names else None, relation=relation, output=output,
                     as_json=as_json, echo=click.echo, echo_json=_echo_json, sample_bits=sample_bits,
                     sample_seed=hash_seed, ram=ram_bytes, runtime=device_runtime)
        return
    if bounds is None or ram_bytes is None:
        raise InputError("--mechanism privhp needs --bounds and --ram")
    lo, hi = parse_bounds(bounds)
    name_list = _columns(names) if names else None
    try:
        share = parse_share(clamp_share)
    except ValueError:
        raise InputError("--clamp-share must be a fraction in [0, 1), got %r" % clamp_share)
    cfg = plan_privhp(lo, hi, eps, ram_bytes, names=name_list, n_max=n_max, sketch=sketch, j=j,
                      clamp_share=share, uniform_split=uniform_split, hash_seed=hash_seed, relation=relation,
                      runtime=device_runtime)
    write_text(output, json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    m, p = cfg["mechanisms"][0], cfg["plan"]
    if as_json:
        _echo_json({**p, **{k: m[k] for k in ("r", "k", "w", "j", "sketch")}, "config": output})
    else:
        click.echo("wrote %s: privhp r=%d k=%d w=%d j=%d %s; counters %d B, expected peak %d B of %d B"
                   % (output, m["r"], m["k"], m["w"], m["j"], m["sketch"], p["counter_bytes"],
                      p["expected_peak_bytes"], ram_bytes))


@main.command()
@click.argument("configs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Combined config to write.")
def combine(configs, output):
    """Put the mechanisms of several configs on one device: epsilon adds up,
    one release carries every mechanism's state (each reads its own columns).

    Prints the exact counter bytes of all parts; the runtime overhead of a
    combined device is not measured, so nothing is checked against a RAM budget.
    """
    from edgesynth.config import combine_files
    click.echo(combine_files(configs, output))


def parse_share(text):
    from fractions import Fraction
    share = Fraction(str(text))
    if not 0 <= share < 1:
        raise ValueError(text)
    return share


# ----------------------------------------------------------------- simulate
@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="Device config from `plan`.")
@click.option("--input", "input_path", required=True, type=click.Path(dir_okay=False), help="CSV with a header row.")
@click.option("--columns", required=True, help="Columns to feed, in channel order, comma separated.")
@click.option("--runtime", default="cpython", show_default=True,
              type=click.Choice(["cpython", "numpy", "micropython", "native", "qemu"]),
              help="Where the agent runs: cpython (its own code, per reading), numpy (vectorised, same "
                   "bytes), micropython (the MicroPython unix port with a capped heap), native (the "
                   "C core agent/c through cffi, batch calls) or qemu (the C core bare metal on an "
                   "emulated Cortex-M, see --cpu).")
@click.option("--cpu", default="cortex-m4", show_default=True, type=click.Choice(["cortex-m4", "cortex-m0plus"]),
              help="Emulated CPU of the qemu runtime: cortex-m4 (mps2-an386) or cortex-m0plus (microbit).")
@click.option("--heap", default="256K", show_default=True,
              help="MicroPython heap as a 32-bit-equivalent size (e.g. 32K); micropython runtime only.")
@click.option("--seed", default=None, help="Hex seed for reproducible noise. Tests and simulation only: NOT private.")
@click.option("--device-id", default="device", show_default=True, help="Device name carried in the frame.")
@click.option("--epoch", default=0, show_default=True, type=click.IntRange(0, 2 ** 32 - 1),
              help="Epoch number of the single release (with --window the epoch is the window index).")
@click.option("--seq", default=0, show_default=True, type=click.IntRange(0, 2 ** 32 - 1),
              help="Sequence number of the (first) release; it counts up from here.")
@click.option("--time-column", default=None,
              help="Column of reading timestamps: Unix seconds or ISO 8601 (no offset means UTC). "
                   "Needs --window, --start and --end.")
@click.option("--window", default=None, type=click.IntRange(1, 2 ** 31),
              help="Release one frame per window of this many seconds: a reading at time t belongs to "
                   "window floor(t / SECONDS) on a grid anchored at the Unix epoch; the frame's epoch is "
                   "that index.")
@click.option("--start", default=None, help="Public start of the schedule (Unix seconds or ISO 8601), "
                                            "fixed before any data; every window from here to --end "
                                            "releases a frame, empty or not.")
@click.option("--end", default=None, help="Public end of the schedule (exclusive). A reading outside "
                                          "[--start, --end) is refused.")
@click.option("--key", "key_hex", default=None, help="Hex HMAC key: tag the frame with HMAC-SHA256.")
@click.option("--keyring", default=None, type=click.Path(dir_okay=False),
              help="Keyring from `keys new`: tag frames with the key of --device-id.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Frame file to write.")
def simulate(config_path, input_path, columns, runtime, cpu, heap, seed, device_id, epoch, seq, time_column, window,
             start, end, key_hex, keyring, output):
    """Run the device agent over a CSV on this machine and write its release frame(s).

    Without --window every row goes into one release. With --time-column,
    --window, --start and --end the device releases on a public clock: one
    fresh agent (fresh noise) and one frame per window of the schedule, written
    back to back, so one reading changes one frame only (docs/trust.md §3).
    Without --seed every window draws fresh entropy; with it, window e is
    seeded from (seed, e) and the frames are reproducible and NOT private.
    """
    from edgesynth.data.csvio import read_columns
    from edgesynth.ram import parse_size
    from edgesynth.runtimes.simulate import clamped_fraction, simulate as run_one
    from edgesynth.config import load_config
    from edgesynth.runtimes.windows import Schedule, parse_time, simulate_windows
    timed = (time_column, window, start, end)
    if any(v is not None for v in timed) and not all(v is not None for v in timed):
        raise InputError("--time-column, --window, --start and --end go together")
    cfg = load_config(config_path)
    cols = _columns(columns)
    if time_column in cols:
        raise InputError("--time-column %r is also in --columns" % time_column)
    schedule = None
    if window is not None:
        if epoch:
            raise InputError("--epoch is the window index with --window; leave it out")
        schedule = Schedule(window, _time_option(start, "--start"), _time_option(end, "--end"))
        parse = {time_column: lambda cell: schedule.check(parse_time(cell))}
        # a device that saw nothing in the schedule still releases every window
        table = read_columns(input_path, cols + [time_column], parsers=parse, allow_empty=True)
        data, times = table[:, :-1], table[:, -1]
    else:
        data = read_columns(input_path, cols)
    seed_b = _hex_bytes(seed, "--seed") if seed else None
    key = _device_key(key_hex, keyring, device_id)
    outside = clamped_fraction(data, cfg) if cfg["mechanisms"] and "lo" in cfg["mechanisms"][0] else 0.0
    run = dict(runtime=runtime, device_id=device_id, key=key, heap=parse_size(heap, "--heap"), cpu=cpu)
    with _progress() as prog:
        task = prog.add_task("agent (%s)" % runtime, total=len(data))
        step = lambda n: prog.advance(task, n)  # noqa: E731
        if schedule is None:
            frames = [(epoch, run_one(cfg, data, cols, seed=seed_b, epoch=epoch, seq=seq, progress=step, **run))]
        else:
            frames = simulate_windows(cfg, data, times, cols, schedule, seed=seed_b, first_seq=seq,
                                      progress=step, **run)
    write_bytes(output, b"".join(f for _, f in frames))
    if outside:
        click.echo("note: %.2f%% of readings were outside the bounds and were clamped into the edge cells"
                   % (100 * outside), err=True)
    if seed_b is not None:
        click.echo("note: --seed makes the noise reproducible: these frames are NOT private", err=True)
    size = "%d-byte frame" % len(frames[0][1]) if schedule is None else \
        "%d frames (windows %d..%d of %d s), %d bytes" % (len(frames), frames[0][0], frames[-1][0], window,
                                                          sum(len(f) for _, f in frames))
    click.echo("wrote %s: %d readings, %s%s" % (output, len(data), size, ", tagged" if key else ""))


def _time_option(text, what):
    from edgesynth.runtimes.windows import parse_time
    try:
        return parse_time(text)
    except ValueError as e:
        raise InputError("%s: %s" % (what, e))


# ----------------------------------------------------------------- firmware
@main.group()
def firmware():
    """The C core (agent/c) for microcontrollers: cross-builds and their sizes."""


@firmware.command("build")
@click.option("--cpu", default="cortex-m4", show_default=True, type=click.Choice(["cortex-m4", "cortex-m0plus"]),
              help="Target core; compiled with Debian's arm-none-eabi-gcc at -Os.")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="Device config: also report its RAM (counters + state).")
@click.option("--header", default=None, type=click.Path(dir_okay=False),
              help="Write the config's public parameters as a C header (es_config.h) here; needs --config.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def firmware_build(cpu, config_path, header, as_json):
    """Build the C core for a Cortex-M and report flash (text, data), RAM (bss,
    state, counters) and worst-case stack per API call."""
    from edgesynth.targets.firmware import build, config_header, format_report
    from edgesynth.config import load_config
    if header and not config_path:
        raise InputError("--header needs --config")
    cfg = load_config(config_path) if config_path else None
    report = build(cpu, cfg)
    if header:
        write_text(header, config_header(cfg, os.path.basename(config_path)))
        report["header"] = header
    if as_json:
        _echo_json(report)
    else:
        for line in format_report(report):
            click.echo(line)
        if header:
            click.echo("wrote %s" % header)


# ----------------------------------------------------------------- assemble
@main.command()
@click.argument("releases", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Generator file to write.")
@click.option("--key", "key_hex", default=None, help="Hex HMAC key that every frame must be tagged with.")
@click.option("--keyring", default=None, type=click.Path(dir_okay=False),
              help="Keyring: every frame must carry a valid tag under its device's key.")
@click.option("--store", "store_path", default=None, type=click.Path(dir_okay=False),
              help="Assemble the frames of an ingest store instead of frame files.")
@click.option("--device", "devices", multiple=True, help="With --store: only this device (repeatable).")
@click.option("--config-hash", default=None, help="With --store: only frames of this configuration id.")
@click.option("--mechanism", default=None, type=click.Choice(["privhp", "cdf", "profile"]),
              help="Which mechanism's states to assemble (default: the only one present).")
@click.option("--force-sum", is_flag=True,
              help="profile: sum sketches of the same ids anyway (error grows as kappa**k).")
@click.option("--json", "as_json", is_flag=True, help="Print the generator summary as JSON.")
def assemble(releases, output, key_hex, keyring, store_path, devices, config_hash, mechanism, force_sum, as_json):
    """Verify release frames, merge those of one configuration, and build a generator.

    Frames come from files (RELEASES) or from an ingest store (--store), whose
    frames were verified when they were stored.
    """
    from edgesynth.frames import read_frames
    if bool(releases) == bool(store_path):
        raise InputError("give frame files or --store, not both and not neither")
    if (devices or config_hash) and not store_path:
        raise InputError("--device and --config-hash select frames of a --store")
    if store_path:
        from edgesynth.fleet.store import Store
        with Store(store_path, create=False) as st:
            rels = st.releases(devices=devices or None, config_id=config_hash)
    else:
        key_for, require_tag = _frame_keys(key_hex, keyring)
        rels = []
        for path in releases:
            rels.extend(read_frames(path, key_for=key_for, require_tag=require_tag))
    from edgesynth.mechanisms import assemble as assemble_any
    gen = assemble_any(rels, mechanism, force_sum)
    if output:
        write_bytes(output, gen.to_bytes())
    summary = gen.summary()
    if as_json:
        _echo_json(summary)
    elif summary.get("mechanism") in ("cdf", "profile"):
        from edgesynth.cli import assemble_line
        click.echo(assemble_line(summary, output))
    else:
        click.echo("generator from %d frame(s) of %s: %d leaves, depth %d..%d, epsilon %s per reading%s"
                   % (summary["frames"], ", ".join(summary["devices"]), summary["leaves"],
                      summary["depth_min"], summary["depth_max"], summary["epsilon"],
                      "; wrote %s" % output if output else ""))
    if not output and not as_json:
        click.echo("(nothing written: pass -o FILE to save the generator)", err=True)


def _load_generator(path):
    from edgesynth.mechanisms import load_generator
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (path, e.strerror or e))
    return load_generator(data, path)


# ------------------------------------------------------------------- sample
@main.command()
@click.argument("generator", type=click.Path(dir_okay=False))
@click.option("-n", "count", required=True, type=click.IntRange(1, 10 ** 9), help="Number of synthetic rows.")
@click.option("--seed", default=None, type=click.IntRange(0, 2 ** 63 - 1), help="Seed for reproducible samples.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="CSV to write.")
def sample(generator, count, seed, output):
    """Draw synthetic rows from a generator (free: no further privacy cost)."""
    gen = _load_generator(generator)
    rng = np.random.default_rng(seed)
    block = 1 << 20
    with atomic_output(output, "w", encoding="utf-8", newline="") as fh, _progress() as prog:
        task = prog.add_task("sampling", total=count)
        fh.write(",".join(gen.names) + "\n")
        for start in range(0, count, block):
            m = min(block, count - start)
            np.savetxt(fh, gen.sample(m, rng), delimiter=",", fmt="%.10g")
            prog.advance(task, m)
    click.echo("wrote %s: %d rows of %s" % (output, count, ",".join(gen.names)))


# ----------------------------------------------------------------- evaluate
@main.command()
@click.option("--real", required=True, type=click.Path(dir_okay=False), help="CSV of the real readings.")
@click.option("--synthetic", required=True, type=click.Path(dir_okay=False), help="CSV of synthetic rows.")
@click.option("--columns", required=True, help="Columns to compare, comma separated.")
@click.option("--bounds", default=None, help="Box LO:HI[,...] for normalising (default: the range of both files).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for subsampling and random queries.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def evaluate(real, synthetic, columns, bounds, seed, as_json):
    """Compare synthetic rows with real ones (W1 per channel, joint W1, range queries)
    beside a uniform baseline."""
    from edgesynth.data.csvio import read_columns
    from edgesynth.evaluation.metrics import utility_report
    from edgesynth.config import parse_bounds
    cols = _columns(columns)
    x = read_columns(real, cols)
    y = read_columns(synthetic, cols)
    if bounds:
        lo, hi = (np.array(b, float) for b in parse_bounds(bounds))
        if len(lo) != len(cols):
            raise InputError("--bounds has %d channels, --columns %d" % (len(lo), len(cols)))
    else:
        both = np.vstack([x, y])
        lo, hi = both.min(axis=0), both.max(axis=0)
        hi = np.where(hi > lo, hi, lo + 1.0)
    report = utility_report(x, y, lo, hi, cols, np.random.default_rng(seed))
    if as_json:
        _echo_json(report)
    else:
        print_report(report)


def print_report(report):
    """A rich table of a utility_report: synthetic beside the uniform baseline."""
    from rich.table import Table
    from rich.console import Console
    t = Table(title="utility (lower is better)")
    t.add_column("metric")
    t.add_column("synthetic", justify="right")
    t.add_column("uniform baseline", justify="right")
    for row in report_rows(report):
        t.add_row(*row)
    Console().print(t)


def report_rows(report):
    """(metric, synthetic, baseline) strings of a utility_report."""
    rows = []
    syn, base = report["synthetic"], report["baseline"]
    for s, b in zip(syn["channels"], base["channels"]):
        rows.append(("W1 %s (data units)" % s["name"], "%.4g" % s["w1"], "%.4g" % b["w1"]))
    rows.append(("joint W1 (normalised, l-inf; floor %.3g)" % report["w1_joint_floor"],
                 "%.4g" % syn["w1_joint"], "%.4g" % base["w1_joint"]))
    rows.append(("range-query error", "%.4g" % syn["range_query_error"], "%.4g" % base["range_query_error"]))
    return rows


# ------------------------------------------------------------------ inspect
@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", "key_hex", default=None, help="Hex HMAC key to verify tagged frames.")
def inspect(file, key_hex):
    """Describe a frame file, generator or device config (as JSON)."""
    from edgesynth.describe import describe
    key = _hex_bytes(key_hex, "--key") if key_hex else None
    _echo_json(describe(file, key))


# --------------------------------------------------------------------- keys
@main.group()
def keys():
    """Per-device HMAC keys in a keyring file (docs/trust.md)."""


@keys.command("new")
@click.argument("device_id")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring file (JSON, created with mode 0600).")
@click.option("--force", is_flag=True, help="Replace the device's existing key (its old frames stop verifying).")
def keys_new(device_id, keyring, force):
    """Create a random 32-byte key for DEVICE_ID in the keyring. The key is never printed."""
    from edgesynth.fleet.keys import new_key
    ring = new_key(keyring, device_id, force=force)
    click.echo("%s: key for %r %s (%d device(s) in the keyring)"
               % (keyring, device_id, "replaced" if force else "created", len(ring.devices())))


@keys.command("credentials")
@click.argument("device_id")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Credentials file to write (mode 0600), to copy onto the board as device.credentials.")
def keys_credentials(device_id, keyring, output):
    """Write DEVICE_ID's credentials file ({"id", "key"}) for its board.

    The device's main loop tags its frames with the key and authenticates its
    state record with a key derived from it; copy the file to the board and
    run provision() once (docs/deployment.md). The key is never printed.
    """
    from edgesynth.fleet.keys import load, write_credentials
    write_credentials(load(keyring), device_id, output)
    click.echo("wrote %s: credentials of %r (mode 0600; keep it off the host once copied)" % (output, device_id))


@keys.command("list")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
def keys_list(keyring):
    """Print the device ids of a keyring, one per line (never the keys)."""
    from edgesynth.fleet.keys import load
    for dev in load(keyring).devices():
        click.echo(dev)


# ------------------------------------------------------------ ingest, store
@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--store", "store_path", required=True, type=click.Path(dir_okay=False),
              help="SQLite store; created only where no file exists (an existing file must be a store).")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring: each frame must verify under the key of its envelope's device.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per frame on stdout: file, frame, device, epoch, seq, result, reason.")
def ingest(files, store_path, keyring, as_json):
    """Verify frames and append them durably to the store, in any order.

    Prints "ack FILE frame I DEVICE EPOCH SEQ stored|duplicate" after each
    frame's commit (FILE and DEVICE %-escaped, so one frame is one line), and
    one stderr line "FILE: frame I: reason" per frame not stored: bad tag or
    bytes, or a conflict (another frame of a stored device and epoch, kept
    aside in the store). Exit 0 iff every frame was stored or was a
    duplicate, else 2.
    """
    from edgesynth.fleet.ingest import ingest as run_ingest
    return _into_store(store_path, keyring, as_json, lambda st, key_for, report: run_ingest(st, files, key_for, report))


def _into_store(store_path, keyring, as_json, run):
    """Open (or create) the store, ``run(store, key_for, report)``, print one
    line per frame (stdout: acks or --json; stderr: refusals) and the summary."""
    from edgesynth.fleet.keys import load
    from edgesynth.fleet.store import Store
    ring = load(keyring)

    def report(r):
        if as_json or r.acked:
            sys.stdout.write((r.json() if as_json else r.text()) + "\n")
            sys.stdout.flush()
        else:
            click.echo(r.text(), err=True)

    with Store(store_path, create=True) as st:
        out = run(st, ring.key_for, report)
    click.echo(out.summary(), err=True)
    return 0 if out.ok else 2


@main.group()
def store():
    """Inspect an ingest store (read-only), or migrate an old one."""


@store.command("stats")
@click.option("--store", "store_path", required=True, type=click.Path(dir_okay=False), help="SQLite store.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def store_stats(store_path, as_json):
    """Frames, devices and configurations held by a store, and the conflicts kept aside."""
    from edgesynth.fleet.ingest import shown
    from edgesynth.fleet.store import Store
    with Store(store_path) as st:
        s = st.stats()
        conflicts = st.conflicts()
    if as_json:
        _echo_json(dict(s, conflict_frames=[dict(zip(("device", "epoch", "seq", "digest"), c))
                                        for c in conflicts]))
        return
    click.echo("%s: %d frame(s) from %d device(s), %d configuration(s), %d bytes, %d conflict(s)"
               % (store_path, s["frames"], s["devices"], len(s["configs"]), s["bytes"], s["conflicts"]))
    for dev, epoch, seq, digest in conflicts:
        click.echo("conflict: device %s epoch %d seq %d payload sha256 %s (kept aside, not merged)"
                   % (shown(dev), epoch, seq, digest))


@store.command("migrate")
@click.argument("old", type=click.Path(dir_okay=False))
@click.option("--to", "store_path", required=True, type=click.Path(dir_okay=False),
              help="New store to fill (created if missing, as by ingest).")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring: each frame is verified again under its device's key.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame, as ingest --json.")
def store_migrate(old, store_path, keyring, as_json):
    """Copy the frames of a store written by an earlier edgesynth (schema 1)
    into a new store, verified and stored as by ingest. OLD is only read."""
    from edgesynth.fleet.ingest import migrate
    from edgesynth.fleet.store import require_schema_1
    require_schema_1(old)  # before a new store is made
    return _into_store(store_path, keyring, as_json, lambda st, key_for, report: migrate(old, st, key_for, report))


# ------------------------------------------------------------ bundle, deploy
@main.command()
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="Device config from `plan` to ship with the bundle (adds main.py).")
@click.option("--arch", default=None, help="mpy-cross -march target, e.g. armv7emsp (ESP32-S3: xtensawin, "
                                           "RP2040: armv6m); bytecode runs on any port without it.")
@click.option("--emit", default="bytecode", show_default=True, type=click.Choice(["bytecode", "native"]),
              help="native: compile the per-reading update to machine code for --arch (about 2x faster).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Bundle directory to write.")
@click.option("--json", "as_json", is_flag=True, help="Print file sizes as JSON.")
def bundle(config_path, arch, emit, output, as_json):
    """Compile the agent and shims to .mpy (with mpy-cross) into a directory for a board."""
    from edgesynth.targets.bundle import build
    from edgesynth.config import load_config
    if config_path:
        load_config(config_path)  # refuse a broken config before compiling anything
    with _progress() as prog:
        prog.add_task("mpy-cross", total=None)
        sizes = build(output, config_path, arch, emit=emit)
    if as_json:
        _echo_json({"bundle": output, "files": sizes, "total_bytes": sum(sizes.values())})
    else:
        click.echo("wrote %s: %d files, %d bytes" % (output, len(sizes), sum(sizes.values())))


@main.command()
@click.argument("bundle_dir", type=click.Path(file_okay=False))
@click.option("--port", required=True, help="Serial port of the board, e.g. /dev/ttyACM0 (mpremote's `connect`).")
def deploy(bundle_dir, port):
    """Copy a bundle onto a board with mpremote and reset it (see docs/deployment.md)."""
    from edgesynth.targets.deploy import commands, deploy as run_deploy
    with _progress() as prog:
        task = prog.add_task("deploy", total=len(commands(bundle_dir, port)))
        n = run_deploy(bundle_dir, port, progress=lambda k: prog.advance(task, k))
    click.echo("deployed %s to %s (%d mpremote steps)" % (bundle_dir, port, n))


# --------------------------------------------------------------------- demo
@main.command()
@click.option("--out", "out_dir", default="edgesynth-demo", show_default=True, type=click.Path(file_okay=False),
              help="Directory for the demo's files.")
@click.option("--epsilon", default="1", show_default=True, help="Privacy budget per reading.")
@click.option("--ram", default="64K", show_default=True, help="Device RAM budget (MicroPython needs about 30K of it beyond the counters).")
@click.option("--seed", default=None, type=click.IntRange(0, 2 ** 63 - 1),
              help="Make the run reproducible (device noise and sampling). Without it the device draws "
                   "fresh entropy; with it the release is NOT private.")
def demo(out_dir, epsilon, ram, seed):
    """Run the whole path on real hourly temperatures of two weather stations.

    Plans a device, runs the agent over the readings, assembles a generator,
    samples as many synthetic rows, prints a utility table against a uniform
    baseline and writes a PNG comparing real and synthetic distributions.
    """
    from edgesynth.demo import run_demo
    from edgesynth.ram import parse_size
    run_demo(out_dir, epsilon, parse_size(ram, "--ram"), seed, echo=click.echo, table=print_report)


if __name__ == "__main__":
    main()


def plan_command(mechanism, eps, bounds=None, bins=None, branching=None, domain=None, cap=None, names=None,
                 relation="add-remove", output=None, as_json=False, echo=print, echo_json=print,
                 sample_bits=None, sample_seed=None, ram=None, runtime="micropython"):
    """`edgesynth plan --mechanism cdf|profile`: build, write and describe the
    config. ``ram`` (bytes or None) is the device budget for ``runtime``."""
    if mechanism == "cdf":
        cfg = _plan_cdf(eps, bounds, bins, branching, names, relation, ram, runtime)
        m, p = cfg["mechanisms"][0], cfg["plan"]
        line = "wrote %s: cdf K=%d%s tree %s (K-bar %d), %d counters, %d B" % (
            output, m["bins"], "" if p["bins_choice"] == "given" else " (%s)" % p["bins_choice"],
            "x".join(map(str, m["branching"])), p["padded_leaves"], p["counter_bytes"] // 4, p["counter_bytes"])
    else:
        from edgesynth.mechanisms.profile.plan import parse_domain, plan_profile
        if cap is None:
            raise InputError("--mechanism profile needs --cap")
        lo, hi = parse_domain(domain) if domain is not None else (None, None)
        cfg = plan_profile(lo, hi, cap, eps, names=names, relation=relation, sample_bits=sample_bits,
                           sample_seed=sample_seed, ram=ram, runtime=runtime)
        m, p = cfg["mechanisms"][0], cfg["plan"]
        line = "wrote %s: profile over %d ids [%d, %d), cap %d; counters %d B; expected l2 error ~ %.3g" % (
            output, p["ids"], m["lo"], m["hi"], cap, p["counter_bytes"], p["expected_error_scale_l2"])
    line += "; expected peak %d B (%s)%s" % (p["expected_peak_bytes"], runtime,
                                             "" if ram is None else " of %d B" % ram)
    write_config(output, cfg)
    if as_json:
        echo_json({**cfg["plan"], **{k: v for k, v in cfg["mechanisms"][0].items() if k != "sigma"},
                   "config": output})
    else:
        echo(line)
    return cfg


def _plan_cdf(eps, bounds, bins, branching, names, relation, ram, runtime):
    """The CDF config of the command's flags (parsing only; cdf_plan plans)."""
    from edgesynth.mechanisms.cdf.plan import plan_cdf
    from edgesynth.config import parse_bounds
    if bounds is None:
        raise InputError("--mechanism cdf needs --bounds and --bins (or --ram to choose the bins)")
    lo, hi = parse_bounds(bounds)
    br = None
    if branching:
        try:
            br = [int(x) for x in branching.split(",")]
        except ValueError:
            raise InputError("--branching must list integers like 16,16, got %r" % branching)
    return plan_cdf(lo, hi, eps, bins, names=names, branching=br, relation=relation, ram=ram, runtime=runtime)


def assemble_line(summary, output):
    """One line describing an assembled CDF generator or profile."""
    tail = "; wrote %s" % output if output else ""
    if summary["mechanism"] == "cdf":
        med = summary["quantiles"]["0.5"]
        return "cdf generator from %d frame(s): K=%d, median %s, epsilon %s per reading%s" % (
            summary["frames"], summary["bins"], med, summary["epsilon"], tail)
    return "profile of %d ids from %d frame(s): distinct ~ %.1f, never seen %.3f, epsilon %s%s" % (
        summary["ids"], summary["frames"], summary["distinct"], summary["never_seen"], summary["epsilon"], tail)
