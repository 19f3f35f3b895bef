"""The `edgesynth` command line: parse the options, call the library
(``import edgesynth``, `edgesynth docs api`) and print. Nothing else.

Every command explains itself with --help. Bad input ends with one line on
stderr and exit status 2; set EDGESYNTH_DEBUG=1 to see a traceback for an
unexpected internal error.

The library is reached as ``es.<name>``, which loads each part on first
use: evaluation (scipy.stats) and the demo's plots (matplotlib) cost nothing
to the commands that do not need them, nor to `edgesynth --help`.
"""
import contextlib
import json
import os
import signal
import sys

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

import edgesynth as es
from edgesynth.agent.cdf.build import MAX_BINS
from edgesynth.agent.profile.build import MAX_CAP
from edgesynth.agent.wire import MECHANISMS, RELATIONS
from edgesynth.channels import column_map, parse_columns, spec_names
from edgesynth.data.files import MISSING, read_table
from edgesynth.data.tables import MISSING_RULES
from edgesynth.data.tables import Table as Rows
from edgesynth.errors import ColumnNotFound, EdgesynthError, InputError
from edgesynth.evaluation.table import rows as utility_rows
from edgesynth.fleet.broker import Connection
from edgesynth.fleet.ingest import shown
from edgesynth.fleet.keys import read_device_ids
from edgesynth.manual import docs_dir, docs_title
from edgesynth.mechanisms.marginals.table import read_records
from edgesynth.mechanisms.privhp.plan import DEFAULT_N_MAX
from edgesynth.outputs import write_bytes, write_text
from edgesynth.pipeline import HOST_RAM, fit, runtime
from edgesynth.planning import DEVICE_RUNTIMES, SKETCHES, TRANSPORTS
from edgesynth.ram import parse_size
from edgesynth.runtimes.simulate import RUNTIMES
from edgesynth.simulation import MAX_U32, parse_op
from edgesynth.stdio import STDOUT, check_binary_stdout, is_stdio, label, read_once, refuse
from edgesynth.synthesis import MAX_SAMPLE, SAMPLE_BLOCK
from edgesynth.targets import bundle as mpy_bundle
from edgesynth.targets import deploy as board
from edgesynth.targets import firmware as arm

EPILOG = ("Docs: `edgesynth docs` lists the pages installed with edgesynth (api, cli, config, privacy, "
          "trust, deployment, native, wire-format, transport, the mechanisms); `edgesynth docs TOPIC` prints one.")


class Group(click.Group):
    """Turns every EdgesynthError into one stderr line and exit status 2."""

    def invoke(self, ctx):
        # Here, not in main: click's main catches EPIPE itself and exits 1.
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _reader_gone()

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
        except Exception as e:  # last resort: never a bare traceback for users
            if os.environ.get("EDGESYNTH_DEBUG"):
                raise
            click.echo("internal error: %s: %s (set EDGESYNTH_DEBUG=1 for a traceback)"
                       % (type(e).__name__, e), err=True)
            sys.exit(1)


def _reader_gone():
    """The reader of stdout went away (`| head -1`): end as cat, seq or yes
    do, killed by SIGPIPE (a shell says 141), with nothing on stderr. Python
    ignores SIGPIPE so that a write raises instead; restore the default and
    send it to ourselves: no exit handler then flushes into the closed pipe
    ("Exception ignored ... BrokenPipeError"). Only a real process is
    signalled (not the CLI run in-process, as by tests or a notebook), and
    where there is no SIGPIPE (Windows) or it stays blocked, stdout goes to
    devnull and the status is 141 all the same."""
    real = sys.stdout is sys.__stdout__
    if real and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPIPE})
        os.kill(os.getpid(), signal.SIGPIPE)
    if real:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + 13)


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="edgesynth")
def main():
    """Differentially private synthetic data from sensor streams.

    A device agent keeps noisy-from-birth summaries of its readings and
    releases them as a frame; the host turns frames into a generator that
    samples any amount of synthetic data at no further privacy cost.

    Typical path: plan -> simulate (or a real device) -> assemble -> sample -> evaluate.
    The same steps are a Python library: `import edgesynth as es` (edgesynth docs api).
    """


class _Bar:
    """A transient progress bar on stderr for one task of ``total`` steps
    (None: a spinner, drawn at once; 0: set by the first ``update``). A bar
    with steps is drawn from its first step, so that a command refused before
    any work prints its error alone."""

    def __init__(self, description, total=None):
        console = Console(stderr=True)  # off when stderr is no terminal: rich would leave an empty line there
        self._prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeRemainingColumn(), transient=True, console=console, disable=not console.is_terminal)
        self._task = self._prog.add_task(description, total=total)
        self._started = False
        if total is None:
            self._start()

    def _start(self):
        self._prog.start()
        self._started = True

    def advance(self, n):
        if not self._started:
            self._start()
        self._prog.advance(self._task, n)

    def update(self, done, total):
        """The library's ``progress(done, total)`` form: ``done`` of ``total`` steps."""
        if not self._started:
            self._start()
        self._prog.update(self._task, completed=done, total=total)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._started:
            self._prog.stop()


def _columns(text):
    """--columns of a command that reads columns by name (FILE=CHANNEL is simulate's)."""
    cols = parse_columns(text)
    if isinstance(cols, dict):
        raise InputError("--columns here names columns, comma separated; FILE=CHANNEL maps a file's columns "
                         "onto a config's channels in `simulate`")
    return cols


def _comparing_options(command=None, *, columns_required=True):
    """--real, --synthetic and --columns, for evaluate and report."""
    if command is None:
        return lambda c: _comparing_options(c, columns_required=columns_required)
    file = dict(required=True, type=click.Path(dir_okay=False, allow_dash=True))
    tail = ": CSV, Parquet if it ends in .parquet, '-' for stdin."
    command = click.option("--columns", required=columns_required,
                           help="Columns to compare, comma separated" +
                                ("." if columns_required else " (required without --schema; with it, the "
                                 "files' columns for the schema's columns in order, default its names).")
                           )(command)
    command = click.option("--synthetic", help="The synthetic rows" + tail, **file)(command)
    return click.option("--real", help="The real rows" + tail, **file)(command)


def _reading_options(command):
    """--missing and --delimiter, for the commands that read data files."""
    command = click.option(
        "--delimiter", default=None,
        help="CSV delimiter, one character (tab: '\\t'); default: the one of , ; tab | found most often in "
             "the header line.")(command)
    return click.option(
        "--missing", default="skip", show_default=True, type=click.Choice(MISSING_RULES),
        help="A row with a missing value (empty, NA, N/A, n/a, #N/A, NaN, nan, NULL, null, None, ?; in Parquet "
             "null or NaN) in a column used: skip it and count it, or stop with an error naming its line.")(command)


def _timed_rows(frame, time_column, missing, source):
    """(rows of ``frame`` with a time, how many were left out): a row whose
    ``time_column`` is missing (a MISSING token, null or NaN) is skipped or
    refused as ``missing`` says, as the numeric reader does for a cdf run
    (its schema columns never skip a row: a missing value there is "other")."""
    t = frame[time_column]
    gone = (t.isna() | t.astype(str).str.strip().isin(MISSING)).to_numpy()
    if gone.any() and missing == "error":
        raise InputError("%s: row %d, column %r: missing time" % (source, np.flatnonzero(gone)[0] + 1, time_column))
    return frame[~gone].reset_index(drop=True), int(gone.sum())


def _skipped(table):
    """' (N of M rows skipped: missing value)' when rows were skipped, else ''."""
    if not table.skipped:
        return ""
    return " (%s of %s rows skipped: missing value)" % (format(table.skipped, ","),
                                                         format(table.skipped + len(table.data), ","))


def _real_and_synthetic(real, synthetic, cols, missing, delimiter):
    """The ``cols`` of both files (evaluate, report) as float64 arrays; a
    note on stderr for each file with rows skipped for a missing value."""
    tables = [read_table(f, cols, missing=missing, delimiter=delimiter) for f in (real, synthetic)]
    for t in tables:
        if t.skipped:
            click.echo("note: %s%s" % (t.source, _skipped(t)), err=True)
    return (t.data for t in tables)


def _echo_json(obj, err=False):
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable), err=err)


def _shown(output):
    """How a summary line names an output: "stdout" for '-'."""
    return STDOUT if is_stdio(output) else output


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
@click.option("--ram", default=None, help="RAM the agent may use on the device: bytes, or 64K, 64KB, 64KiB, 1.5M, "
                                         "1G (binary units: K = KB = KiB = 1024 bytes). "
                                         "privhp: required, sets the shape. cdf: refuses a --bins that does not "
                                         "fit; without --bins, the largest K that fits. profile: refuses a "
                                         "--domain that does not fit; with --sample-bits and no --domain, the "
                                         "largest sampled range [0, n) that fits.")
@click.option("--mechanism", default="privhp", show_default=True, type=click.Choice(MECHANISMS),
              help="Summary kept on the device (edgesynth docs cdf, edgesynth docs profile).")
@click.option("--bins", default=None, type=click.IntRange(2, MAX_BINS),
              help="cdf: bins K per channel (default with --ram: the largest 2**a 3**b that fits, or the "
                   "integer span of integer bounds when it fits).")
@click.option("--branching", default=None, help="cdf: tree branching n1,n2,... (default: searched).")
@click.option("--domain", default=None, help="profile: dense ids LO:HI (LO <= id < HI); with --sample-bits, the "
                                            "sampled range (default with --ram: the largest [0, n) that fits).")
@click.option("--cap", default=None, type=click.IntRange(1, MAX_CAP), help="profile: public cap on one id's count.")
@click.option("--sample-bits", default=None, type=int,
              help="profile: hashed ids from [0, 2**B); --domain is then the range of their keyed permutation "
                   "kept (a sample; key from --hash-seed).")
@click.option("--names", default=None, help="Channel names, comma separated (default x0,x1,...).")
@click.option("--integer", default=None,
              help="Integer channels, by name (or 0-based position), comma separated: whole-number readings and "
                   "synthetic values, bounds must be whole numbers (privhp, cdf). Others are real-valued, "
                   "however their bounds are written.")
@click.option("--n-max", default=DEFAULT_N_MAX, show_default=True, type=click.IntRange(2, 2 ** 29),
              help="A public estimate of the readings per release (rate x period, or a published count), "
                   "never counted from the data; privhp's planner predicts the error and centres its depth "
                   "search at it.")
@click.option("--sketch", default="cms", show_default=True, type=click.Choice(SKETCHES),
              help="Count-min or count sketch for the deep levels.")
@click.option("--rows", "j", default=None, type=click.IntRange(1, 16), help="Sketch rows j (default: chosen).")
@click.option("--clamp-share", default="1/50", show_default=True,
              help="Part of epsilon spent on the noisy count of out-of-range readings (0 to drop it).")
@click.option("--uniform-split", is_flag=True, help="Split epsilon evenly over levels instead of Eq. (23).")
@click.option("--cdf-share", default=None,
              help="privhp: part of epsilon, in [0, 1), for a cdf over the same channels that `assemble` joins "
                   "to the tree (raked leaf masses, in-leaf sampling by the CDF); it takes the RAM privhp's plan "
                   "leaves. 0: privhp alone. Default: 0.3 for 3 or more channels, none of them integer, when that "
                   "plan fits (measured better there); else 0 (edgesynth docs privhp).")
@click.option("--hash-seed", default=None,
              help="Public hash seed shared by devices that will be merged (default random).")
@click.option("--relation", default=None, type=click.Choice(sorted(RELATIONS)),
              help="Neighbouring streams: add/remove one reading, or replace one (doubles the noise). Default: "
                   "add-remove; with --from-generator the generator's.")
@click.option("--device-runtime", default=None, type=click.Choice(DEVICE_RUNTIMES),
              help="What runs the agent on the device; sets the RAM charged beyond the counters against "
                   "--ram (every mechanism; edgesynth docs deployment). Default: micropython; c for marginals.")
@click.option("--transport", default=None, type=click.Choice(TRANSPORTS),
              help="The device also publishes its frames (mqtt: agent/transport, micropython): the transport's "
                   "measured heap and a buffer of the largest frame come off --ram before the counters are "
                   "chosen; the config gets a device.mqtt block sizing its outbox (edgesynth docs transport).")
@click.option("--depth", default=None, type=click.IntRange(1, 29),
              help="phdstream: depth D of the public binary tree, 1..28 (default min(20, the sum over channels "
                   "of floor(log2(HI - LO))): no cell narrower than one unit). privhp: fix the tree depth, "
                   "d..29 (or the integer channels' one-unit depth), instead of searching "
                   "round(log2(eps n_max) - 2 - log2 d) +- 2 (deeper suits data "
                   "clustered on a coarse grid of values).")
@click.option("--counter", default="simple", show_default=True,
              help="phdstream: leaf counters: simple, block:K or tree[:T] (T a power of 2, default 128).")
@click.option("--max-events", default=None, type=click.IntRange(1, 2 ** 22),
              help="phdstream: public bound on events per window (e.g. a fixed sample rate): the batch holds N "
                   "and the guarantee is the full --epsilon over streams that respect it. Without it a quarter "
                   "of the RAM beyond the runtime overhead goes to the batch and the mechanism runs at "
                   "epsilon/2 (an overflowing window costs twice).")
@click.option("--snap", default=16, show_default=True, type=click.IntRange(1, 2 ** 30),
              help="phdstream: a full snapshot rides with every S-th frame (a host that missed frames resyncs "
                   "there).")
@click.option("--op-name", default="op", show_default=True,
              help="phdstream: name of the op column (+1 insert, -1 delete) in the device's readings.")
@click.option("--fold", default=None, type=click.IntRange(0, 255),
              help="phdstream: fold-pruning: a node visited K times as a leaf (no split between) gives its "
                   "subtree back to the pool (0: off; default 8 when the pool cannot hold the whole tree, else off).")
@click.option("--schema", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="marginals: the public schema, a JSON file {\"columns\": [{\"name\", \"values\": [...]} or "
                   "{\"name\", \"bounds\": [LO, HI], \"bins\": K}, ...]} (edgesynth docs marginals).")
@click.option("--marginals", "marginal_sets", default=None,
              help="marginals: the measured column sets, e.g. \"site,hour;hour,temp\" (default: every 1- and 2-way "
                   "marginal).")
@click.option("--from-generator", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="marginals: plan the next window from an earlier window's generator (`assemble`): its model "
                   "picks the marginals and public partitions; its schema is the config's.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan summary as JSON.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Config file to write (JSON); '-' for stdout (the summary then goes to stderr).")
def plan(bounds, epsilon, ram, mechanism, bins, branching, domain, cap, sample_bits, names, integer, n_max, sketch,
         j, clamp_share, uniform_split, cdf_share, hash_seed, relation, device_runtime, transport, depth, counter,
         max_events, snap, op_name, fold, schema, marginal_sets, from_generator, as_json, output):
    """Choose the device's public parameters for a RAM budget and write the config.

    Counter and hash-table bytes are exact; the runtime overhead of the agent
    itself is measured (edgesynth docs deployment). A plan that cannot fit
    --ram is refused with what it needs and what it has.
    """
    cfg = es.plan(bounds, epsilon=epsilon, ram=ram, mechanism=mechanism, names=names or None,
                  integer=integer or None, bins=bins,
                  branching=branching or None, domain=domain, cap=cap, sample_bits=sample_bits, n_max=n_max,
                  sketch=sketch, rows=j, clamp_share=clamp_share, uniform_split=uniform_split, hash_seed=hash_seed,
                  relation=relation, device_runtime=device_runtime, transport=transport, depth=depth,
                  counter=counter, max_events=max_events, snap=snap, op_name=op_name, fold=fold, schema=schema,
                  marginals=marginal_sets, from_generator=from_generator, cdf_share=cdf_share)
    es.write_config(output, cfg)
    m, p = cfg["mechanisms"][0], cfg["plan"]
    if as_json:
        shown_keys = ("r", "k", "w", "j", "sketch") if mechanism == "privhp" else ("cols",) \
            if mechanism == "marginals" else [k for k in m if k != "sigma"]
        _echo_json({**p, **{k: m[k] for k in shown_keys}, "config": _shown(output)}, err=is_stdio(output))
    else:
        click.echo(_plan_line(m, p, _shown(output)), err=is_stdio(output))


def _plan_line(m, p, output):
    """The line `plan` prints about the config it wrote (and, with a
    transport, a second line: its share of the peak)."""
    t = p.get("transport")
    if t:
        return _plan_line(m, {k: v for k, v in p.items() if k != "transport"}, output) + (
            "\n  of which the %s transport %d B: modules, client, %d-slot outbox, a publish, and a %d B buffer for "
            "the largest frame (the agent had %d B)" % (t["kind"], t["heap_bytes"], t["max_frames"], t["max_frame"],
                                                       t["agent_ram_bytes"]))
    if m["kind"] == "privhp":
        return ("wrote %s: privhp r=%d k=%d w=%d j=%d %s; counters %d B, expected peak %d B of %d B"
                % (output, m["r"], m["k"], m["w"], m["j"], m["sketch"], p["counter_bytes"],
                   p["expected_peak_bytes"], p["ram_bytes"])) + _resolution_text(m, p) + (
            "\n  with a cdf of %d bins at epsilon %s (%d B), joined to the tree by assemble"
            % (p["cdf"]["bins"], p["cdf"]["epsilon"], p["cdf"]["expected_peak_bytes"]) if p.get("cdf") else "")
    if m["kind"] == "phdstream":
        return ("wrote %s: phdstream depth %d, %s counter, pool of %d nodes%s, batch of %d events; arrays %d B, "
                "expected peak %d B of %d B\n  guarantee: %s"
                % (output, m["depth"], p["counter"], m["max_nodes"],
                   " (fold after %d visits as a leaf)" % m["fold"] if m.get("fold") else "", m["batch_max"],
                   p["counter_bytes"], p["expected_peak_bytes"], p["ram_bytes"], p["guarantee"]))
    if m["kind"] == "marginals":
        names = [c["name"] for c in m["schema"]["columns"]]
        shown = "; ".join(",".join(names[i] for i in c) for c in m["cols"])
        return ("wrote %s: marginals over %d columns, %d marginals (%d partitioned), %d group totals, %d B; expected "
                "peak %d B (%s)%s\n  measured: %s"
                % (output, len(names), len(m["cols"]), sum(g is not None for g in m["groups"]), p["group_totals"],
                   p["counter_bytes"], p["expected_peak_bytes"], p["device_runtime"],
                   "" if p["ram_bytes"] is None else " of %d B" % p["ram_bytes"],
                   shown if len(shown) <= 400 else shown[:400] + " ..."))
    if m["kind"] == "cdf":
        line = "wrote %s: cdf K=%d%s tree %s (K-bar %d), %d counters, %d B" % (
            output, m["bins"], "" if p["bins_choice"] == "given" else " (%s)" % p["bins_choice"],
            "x".join(map(str, m["branching"])), p["padded_leaves"], p["counter_bytes"] // 4, p["counter_bytes"])
    else:
        line = "wrote %s: profile over %d ids [%d, %d), cap %d; counters %d B; expected l2 error ~ %.3g" % (
            output, p["ids"], m["lo"], m["hi"], m["cap"], p["counter_bytes"], p["expected_error_scale_l2"])
    ram = p["ram_bytes"]
    line += "; expected peak %d B (%s)%s" % (p["expected_peak_bytes"], p["device_runtime"],
                                             "" if ram is None else " of %d B" % ram)
    return line + _resolution_text(m, p) if m["kind"] == "cdf" else line


def _resolution_text(m, p):
    """'; resolution temp 0.43, humid 0.39 (integer: count 1)': a finest
    cell's width per channel in its units; integer channels (int bounds) apart."""
    res = p["resolution"]
    integer = {n for n, a, b in zip(m["names"], m["lo"], m["hi"]) if isinstance(a, int) and isinstance(b, int)}
    real = ", ".join("%s %.3g" % (n, w) for n, w in res.items() if n not in integer)
    whole = ", ".join("%s %.3g" % (n, w) for n, w in res.items() if n in integer)
    if not whole:
        return "; resolution " + real
    return "; resolution %s(integer: %s)" % (real + " " if real else "", whole)


@main.command()
@click.argument("configs", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Combined config to write; '-' for stdout (the summary then goes to stderr).")
def combine(configs, output):
    """Put the mechanisms of several configs on one device: epsilon adds up,
    one release carries every mechanism's state (each reads its own columns).

    Prints the exact counter bytes of all parts; the runtime overhead of a
    combined device is not measured, so nothing is checked against a RAM budget.
    """
    read_once(configs)  # one of CONFIGS may be '-' (stdin)
    cfg = es.combine(configs)
    es.write_config(output, cfg)
    names = " + ".join("%s(%s)" % (m["kind"], ",".join(spec_names(m))) for m in cfg["mechanisms"])
    click.echo("wrote %s: %s; epsilon %s; counters %d B in all, plus the runtime's overhead (not measured for "
               "combined configs: no RAM check)"
               % (_shown(output), names, cfg["plan"]["epsilon"], cfg["plan"]["counter_bytes"]), err=is_stdio(output))


# ----------------------------------------------------------------- simulate
@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Device config from `plan`; '-' for stdin (then --input is a file).")
@click.option("--input", "input_path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="CSV with a header row, Parquet if it ends in .parquet, '-' for stdin.")
@click.option("--columns", default=None,
              help="The file's columns that feed the config's channels: by position (temp,humid: temp feeds the "
                   "first channel) or FILE=CHANNEL (temp=a,humid=b, every channel once). Default: the columns "
                   "named like the channels. The channels keep the config's names (and its config id).")
@click.option("--runtime", default="cpython", show_default=True,
              type=click.Choice(RUNTIMES),
              help="Where the agent runs: cpython (its own code, per reading), numpy (vectorised, same "
                   "bytes), micropython (the MicroPython unix port with a capped heap), native (the "
                   "C core agent/c through cffi, batch calls) or qemu (the C core bare metal on an "
                   "emulated Cortex-M, see --cpu).")
@click.option("--cpu", default="cortex-m4", show_default=True, type=click.Choice(list(arm.CPUS)),
              help="Emulated CPU of the qemu runtime: cortex-m4 (mps2-an386) or cortex-m0plus (microbit).")
@click.option("--heap", default="256K", show_default=True,
              help="MicroPython heap as a 32-bit-equivalent size (e.g. 32K, 64KiB; K = 1024 bytes); micropython "
                   "runtime only.")
@click.option("--seed", default=None, help="Hex seed for reproducible noise. Tests and simulation only: NOT private.")
@click.option("--device-id", default="device", show_default=True, help="Device name carried in the frame.")
@click.option("--epoch", default=0, show_default=True, type=click.IntRange(0, MAX_U32),
              help="Epoch number of the single release (with --window the epoch is the window index).")
@click.option("--seq", default=0, show_default=True, type=click.IntRange(0, MAX_U32),
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
@click.option("--op-column", default=None,
              help="phdstream: column of each event's op, +1/-1 or insert/delete (any case); without it every "
                   "reading is an insertion. One agent runs every window, one step each.")
@click.option("--key", "key_hex", default=None, help="Hex HMAC key: tag the frame with HMAC-SHA256.")
@click.option("--keyring", default=None, type=click.Path(dir_okay=False),
              help="Keyring from `keys new`: tag frames with the key of --device-id.")
@click.option("--publish", "publish_url", default=None,
              help="Also publish the frames to this broker (mqtt://HOST:PORT) and wait for the gateway's receipts "
                   "as `publish` does (30 s): with --runtime micropython the device publishes each frame itself as "
                   "it is released (its own MQTT code, umqtt.simple fetched once from PyPI and cached); other "
                   "runtimes publish from the host, in window order after the run. Receipt lines go to stdout, "
                   "or to stderr with -o -.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Frame file to write; '-' for stdout, not a terminal (the summary then goes to stderr).")
@_reading_options
def simulate(config_path, input_path, columns, runtime, cpu, heap, seed, device_id, epoch, seq, time_column, window,
             start, end, op_column, key_hex, keyring, publish_url, output, missing, delimiter):
    """Run the device agent over a CSV on this machine and write its release frame(s).

    Without --window every row goes into one release. With --time-column,
    --window, --start and --end the device releases on a public clock: one
    fresh agent (fresh noise) and one frame per window of the schedule, written
    back to back, so one reading changes one frame only (edgesynth docs trust, §3).
    Without --seed every window draws fresh entropy; with it, window e is
    seeded from (seed, e) and the frames are reproducible and NOT private.
    A phdstream config is one continual agent instead: one step and one frame
    per window (--op-column: each event's insert or delete), seeded with
    --seed itself.
    """
    timed = (time_column, window, start, end)
    if any(v is not None for v in timed) and not all(v is not None for v in timed):
        raise InputError("--time-column, --window, --start and --end go together")
    read_once([config_path, input_path], ["--config", "--input"])
    conn = _connection(publish_url, None, None, None, None) if publish_url else None  # a bad URL before the run
    if is_stdio(output):
        check_binary_stdout("frames")  # before the agent runs, not after
    cfg = es.load_config(config_path)
    mapping = dict(column_map(cfg, columns))  # file column -> channel; the channels keep the config's names
    cols = list(mapping)
    if time_column in cols:
        raise InputError("--time-column %r is also in --columns" % time_column)
    if op_column is not None and op_column in cols + [time_column]:
        raise InputError("--op-column %r is also in --columns or --time-column" % op_column)
    extra = [op_column] if op_column is not None else []  # read after the channels, parsed to +1/-1
    parse = {op_column: parse_op} if extra else {}
    if any(m.get("kind") == "marginals" for m in cfg["mechanisms"]):
        if extra or len(cfg["mechanisms"]) > 1:
            raise InputError("a marginals config runs alone here: --op-column and combined configs go through "
                             "the library (es.simulate)")
        # its columns as raw values (text or numbers): the schema maps each to a cell, never skipping a row
        frame = read_records(input_path, cols + ([time_column] if window is not None else []), delimiter)
        skipped = 0
        if window is not None:
            if epoch:
                raise InputError("--epoch is the window index with --window; leave it out")
            frame, skipped = _timed_rows(frame, time_column, missing, label(input_path))
            times = frame[time_column].to_numpy()  # Unix seconds or ISO 8601, checked against the schedule
        table = Rows(frame, cols, skipped, label(input_path))
        data = frame[cols]
    elif window is not None:
        if epoch:
            raise InputError("--epoch is the window index with --window; leave it out")
        schedule = es.window_schedule(window, start, end)
        parse[time_column] = lambda cell: schedule.check(es.parse_time(cell))
        # a device that saw nothing in the schedule still releases every window
        table = read_table(input_path, cols + extra + [time_column], missing=missing, delimiter=delimiter,
                           parsers=parse, allow_empty=True)
        data, times = table.data[:, :len(cols)], table.data[:, -1]
    else:
        try:
            table = read_table(input_path, cols + extra, missing=missing, delimiter=delimiter, parsers=parse)
        except ColumnNotFound as e:
            if columns is not None:
                raise
            raise InputError("%s; without --columns the columns named like the config's channels are read: map "
                             "others onto them with --columns FILE=CHANNEL,... or by position" % e)
        data = table.data[:, :len(cols)]
    ops = table.data[:, len(cols)] if extra else None
    outside = es.outside_fraction(cfg, data, mapping)
    run = dict(runtime=runtime, columns=mapping, device_id=device_id, seq=seq, key=key_hex or None, keyring=keyring,
               heap=heap, cpu=cpu, op=ops)
    published = None
    with _Bar("agent (%s)" % runtime, total=len(data)) as bar:
        if conn and runtime == "micropython":  # the device publishes each frame itself, as it is released
            timed = dict(window=window, start=start, end=end, times=times) if window is not None else {}
            published = es.simulate_publish(cfg, data, conn, seed or None, timeout=PUBLISH_TIMEOUT,
                                            on_receipt=_receipt_printer(is_stdio(output)), name=output, epoch=epoch,
                                            progress=bar.advance, **timed, **run)
            frames = [(f.epoch, f.raw) for f in published.frames]
        elif window is None:
            frames = [(epoch, es.simulate(cfg, data, seed or None, epoch=epoch, progress=bar.advance, **run))]
        else:
            frames = es.simulate_windows(cfg, data, times, window, start, end, seed or None, progress=bar.advance,
                                         **run)
    write_bytes(output, b"".join(f for _, f in frames), what="frames")
    if outside:
        click.echo("note: %.2f%% of readings were outside the bounds and were clamped into the edge cells"
                   % (100 * outside), err=True)
    if seed:
        click.echo("note: --seed makes the noise reproducible: these frames are NOT private", err=True)
    size = "%d-byte frame" % len(frames[0][1]) if window is None else \
        "%d frames (windows %d..%d of %d s), %d bytes" % (len(frames), frames[0][0], frames[-1][0], window,
                                                          sum(len(f) for _, f in frames))
    click.echo("wrote %s: %d readings%s, %s%s" % (_shown(output), len(data), _skipped(table), size,
                                                 ", tagged" if key_hex or keyring else ""), err=is_stdio(output))
    if published is not None:
        return _published_status(published, PUBLISH_TIMEOUT)
    if conn:
        return _publish_and_wait([f for _, f in frames], conn, PUBLISH_TIMEOUT, err=is_stdio(output))


# ----------------------------------------------------------------- firmware
@main.group()
def firmware():
    """The C core (agent/c) for microcontrollers: cross-builds and their sizes."""


@firmware.command("build")
@click.option("--cpu", default="cortex-m4", show_default=True, type=click.Choice(list(arm.CPUS)),
              help="Target core; compiled with Debian's arm-none-eabi-gcc at -Os.")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="Device config: also report its RAM (counters + state).")
@click.option("--header", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the config's public parameters as a C header (es_config.h) here ('-': stdout, the "
                   "report then goes to stderr); needs --config.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def firmware_build(cpu, config_path, header, as_json):
    """Build the C core for a Cortex-M and report flash (text, data), RAM (bss,
    state, counters) and worst-case stack per API call."""
    if header and not config_path:
        raise InputError("--header needs --config")
    cfg = es.load_config(config_path) if config_path else None
    report = arm.build(cpu, cfg)
    err = is_stdio(header)
    if header:
        source = label(config_path) if is_stdio(config_path) else os.path.basename(config_path)
        write_text(header, arm.config_header(cfg, source))
        report["header"] = _shown(header)
    if as_json:
        _echo_json(report, err=err)
    else:
        for line in arm.format_report(report):
            click.echo(line, err=err)
        if header:
            click.echo("wrote %s" % _shown(header), err=err)


# ----------------------------------------------------------------- assemble
@main.command()
@click.argument("releases", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Generator file to write; '-' for stdout, not a terminal (the summary then goes to stderr).")
@click.option("--key", "key_hex", default=None, help="Hex HMAC key that every frame must be tagged with.")
@click.option("--keyring", default=None, type=click.Path(dir_okay=False),
              help="Keyring: every frame must carry a valid tag under its device's key. With --store: the "
                   "stored frames of devices revoked in it are left out (and counted).")
@click.option("--store", "store_path", default=None,
              help="Assemble the frames of an ingest store (SQLite path or postgresql://URL) instead of frame files.")
@click.option("--device", "devices", multiple=True, help="With --store: only this device (repeatable).")
@click.option("--config-hash", default=None, help="With --store: only frames of this configuration id.")
@click.option("--mechanism", default=None, type=click.Choice(MECHANISMS),
              help="Which mechanism's states to assemble (default: the only one present).")
@click.option("--force-sum", is_flag=True,
              help="profile: sum sketches of the same ids anyway (error grows as kappa**k).")
@click.option("--workers", type=click.IntRange(1, 1024), default=None,
              help="With --store: merge on a local Dask cluster of N worker processes (needs edgesynth[cluster]).")
@click.option("--cluster", default=None, metavar="tcp://HOST:PORT",
              help="With --store: merge on the running Dask scheduler at this address; its workers open the "
                   "store themselves (needs edgesynth[cluster]).")
@click.option("--json", "as_json", is_flag=True, help="Print the generator summary as JSON.")
def assemble(releases, output, key_hex, keyring, store_path, devices, config_hash, mechanism, force_sum, workers,
             cluster, as_json):
    """Verify release frames, merge those of one configuration, and build a generator.

    Frames come from files (RELEASES) or from an ingest store (--store), whose
    frames were verified when they were stored; '-' among RELEASES reads
    frames from stdin. Channels planned with `plan --integer` give whole
    numbers: the frames say which they are. A store's frames are streamed
    (memory does not grow with their number), merged here or on Dask
    (--workers, --cluster) with the same result.
    """
    if is_stdio(output):
        check_binary_stdout("a generator")
    with _Bar("assembling (a marginals model's fit takes seconds)"):  # a spinner: the fit reports no steps
        gen = es.assemble(list(releases) or None, key=key_hex or None, keyring=keyring, store=store_path,
                          devices=list(devices) or None, config_id=config_hash, mechanism=mechanism,
                          force_sum=force_sum, workers=workers, cluster=cluster)
    if output:
        gen.save(output)
    summary = gen.summary()
    if as_json:
        _echo_json(summary, err=is_stdio(output))
    else:
        click.echo(_assemble_line(summary, output and _shown(output)), err=is_stdio(output))
        if gen.kind == "marginals" and gen.model.drifting:
            click.echo("warning: the windows disagree beyond their noise: the stream drifts, and a plan from an "
                       "earlier window may fit later ones badly%s (drift statistic per plan: %s)"
                       % ("; the model is the mixture of each plan's own fit"
                          if summary.get("fit", "").startswith("mixture") else "",
                          ", ".join("%.0f > %.0f" % (st, lim) if st > lim else "%.0f" % st
                                    for st, _, lim in gen.model.drift)), err=True)
        if "revoked_frames_left_out" in summary:
            click.echo("(%d stored frame(s) of devices revoked in the keyring left out)"
                       % summary["revoked_frames_left_out"], err=True)
    if not output and not as_json:
        click.echo("(nothing written: pass -o FILE to save the generator)", err=True)


def _assemble_line(summary, output):
    """The line `assemble` prints about the generator it built."""
    tail = "; wrote %s" % output if output else ""
    if summary.get("mechanism") == "cdf":
        return "cdf generator from %d frame(s): K=%d, median %s, epsilon %s per reading%s" % (
            summary["frames"], summary["bins"], summary["quantiles"]["0.5"], summary["epsilon"], tail)
    if summary.get("mechanism") == "phdstream":
        skipped = summary["skipped_windows"]
        bound = {True: "a public rate bound", None: "replace neighbours"}.get(
            summary["rate_bound"], "noise at %s: a window past its batch costs twice" % summary["noise_epsilon"])
        return "phdstream generator from %d frame(s) of %d device(s): steps %s..%s, last population %d%s, " \
            "epsilon %s per event (%s)%s" % (
                summary["frames"], len(summary["devices"]), summary["first_step"], summary["last_step"],
                summary["population"][-1][1] if summary["population"] else 0,
                "; %d window(s) skipped after gaps" % skipped if skipped else "", summary["mechanism_epsilon"],
                bound, tail)
    if summary.get("mechanism") == "marginals":
        plans = len(summary.get("plans", ())) or 1
        return "marginals model from %d frame(s)%s: %d columns, %d marginals (%d partitioned), about %d records, " \
            "epsilon %s per record%s" % (summary["frames"], " of %d plans" % plans if plans > 1 else "",
                                         len(summary["columns"]), len(summary["marginals"]),
                                         summary["partitioned"], round(summary["estimated_records"]),
                                         summary["epsilon"], tail)
    if summary.get("mechanism") == "profile":
        return "profile of %d ids from %d frame(s): distinct ~ %.1f, never seen %.3f, epsilon %s%s" % (
            summary["ids"], summary["frames"], summary["distinct"], summary["never_seen"], summary["epsilon"], tail)
    devices = summary["devices"]  # a fleet's ids would fill the screen: count them instead
    return "generator from %d frame(s) of %s: %d leaves, depth %d..%d, epsilon %s per reading%s" % (
        summary["frames"], ", ".join(devices) if len(devices) <= 8 else "%d devices" % len(devices),
        summary["leaves"], summary["depth_min"],
        summary["depth_max"], summary["epsilon"], tail)


# ------------------------------------------------------------------- sample
@main.command()
@click.argument("generator", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-n", "count", default=None, type=click.IntRange(1, MAX_SAMPLE),
              help="Number of synthetic rows (required, except with --step: default the step's released population; "
                   "a marginals generator: default its estimate of the number of records).")
@click.option("--seed", default=None, type=click.IntRange(0, 2 ** 63 - 1), help="Seed for reproducible samples.")
@click.option("--step", default=None, type=click.IntRange(1, None),
              help="phdstream: sample the snapshot of step K (one window).")
@click.option("--all-steps", is_flag=True,
              help="phdstream: write every step's snapshot (its released population each) with a 'step' column.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write: Parquet if it ends in .parquet, else CSV; '-' for CSV on stdout.")
def sample(generator, count, seed, step, all_steps, output):
    """Draw synthetic rows from GENERATOR ('-': stdin) (free: no further privacy cost).

    A phdstream generator holds one snapshot per step: --step K samples one
    (-n defaults to its released population), --all-steps every one.
    Memory stays flat in -n. A file appears only once complete: an error or
    Ctrl-C leaves no partial file and any previous one unchanged.
    """
    if all_steps and (count is not None or step is not None):
        raise InputError("--all-steps writes every step's released population: it takes neither -n nor --step")
    gen = es.load(generator)
    if all_steps:
        if gen.steps is None:
            raise InputError("--all-steps applies to a stream generator (phdstream), not to a %s one" % gen.kind)
        total = sum(gen.populations().values())
        with _Bar("sampling", total=total) as bar:
            rows = gen.write_steps(output, seed, progress=bar.advance)
        click.echo("wrote %s: %d rows of step,%s over %d steps" % (_shown(output), rows, ",".join(gen.names),
                                                                 len(gen.steps)), err=is_stdio(output))
        return
    if count is None and step is None and not gen.tabular:
        raise InputError("give -n N (the number of rows)" + (" or --step K" if gen.steps is not None else ""))
    if step is not None and gen.steps is None:
        raise InputError("--step applies to a stream generator (phdstream), not to a %s one" % gen.kind)
    total = count if count is not None else gen.population(step) if step is not None else gen.model.default_rows()
    with _Bar("sampling", total=total) as bar:
        rows = gen.write(output, count, seed, progress=bar.advance, step=step)
    click.echo("wrote %s: %d rows of %s%s" % (_shown(output), rows, ",".join(gen.names),
                                              "" if step is None else " (step %d)" % step), err=is_stdio(output))


# ----------------------------------------------------------------- evaluate
@main.command()
@_comparing_options(columns_required=False)
@click.option("--bounds", default=None, help="Box LO:HI[,...] for normalising (default: the range of both files).")
@click.option("--schema", default=None, type=click.Path(dir_okay=False),
              help="Tables over a public schema (a marginals generator's samples): the schema or the marginals "
                   "config (JSON). Prints the average and max total variation over every 2- and 3-way marginal.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for subsampling and random queries.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@_reading_options
def evaluate(real, synthetic, columns, bounds, schema, seed, as_json, missing, delimiter):
    """Compare synthetic rows with real ones (W1 per channel, joint W1, range queries)
    beside a uniform baseline; with --schema, tables of records: total
    variation of every 2- and 3-way marginal."""
    read_once([real, synthetic], ["--real", "--synthetic"])
    if schema is not None:
        return _evaluate_table(real, synthetic, columns, schema, bounds, as_json, delimiter)
    if columns is None:
        raise InputError("evaluate needs --columns (or --schema for tables of records)")
    cols = _columns(columns)
    x, y = _real_and_synthetic(real, synthetic, cols, missing, delimiter)
    with _Bar("evaluate", total=0) as bar:
        report = es.evaluate(x, y, cols, bounds=bounds or None, seed=seed, progress=bar.update)
    if as_json:
        _echo_json(report)
    else:
        _print_report(report)


def _evaluate_table(real, synthetic, columns, schema, bounds, as_json, delimiter):
    """evaluate --schema: both files' records (every row kept, values mapped
    to cells by the schema) compared on every 2- and 3-way marginal."""
    if bounds is not None:
        raise InputError("--bounds applies to readings; tables over a --schema have its domains")
    s = es.load_schema(schema)
    cols = _columns(columns) if columns is not None else s.names
    frames = [read_records(f, cols, delimiter) for f in (real, synthetic)]
    report = es.evaluate(frames[0], frames[1], cols, schema=s)
    if as_json:
        _echo_json(report)
        return
    t = Table(title="table metrics: total variation (lower is better)")
    for name in ("marginals", "count", "average TV", "max TV"):
        t.add_column(name, justify="right" if name != "marginals" else "left")
    for k in (2, 3):
        r = report.get("tv_%dway" % k)
        if r:
            t.add_row("%d-way" % k, str(r["marginals"]), "%.4f" % r["average"], "%.4f" % r["max"])
    Console().print(t)
    click.echo("%d real and %d synthetic records over %s" % (report["rows"]["real"], report["rows"]["synthetic"],
                                                             ", ".join(report["columns"])))


def _print_report(report, err=False):
    """A rich table of es.evaluate's figures: synthetic beside the uniform baseline (on stderr with ``err``)."""
    t = Table(title="utility (lower is better)")
    t.add_column("metric")
    t.add_column("synthetic", justify="right")
    t.add_column("uniform baseline", justify="right")
    for row in utility_rows(report):  # the report's rows (edgesynth.evaluation.table)
        t.add_row(*row)
    Console(stderr=err).print(t)


# --------------------------------------------------------------- synthesize
@main.command()
@click.argument("data", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--columns", required=True, help="Columns to use, comma separated; they name the output's columns.")
@click.option("--bounds", required=True, help="Public range LO:HI[,LO:HI...] per column, in --columns order; never "
                                             "read it off the data. Values outside are clamped onto the edge.")
@click.option("--epsilon", required=True, help="Privacy budget per row, e.g. 1, 0.5 or 1/3.")
@click.option("-n", "count", required=True, type=click.IntRange(1, MAX_SAMPLE),
              help="Number of synthetic rows (required: the real row count is private and never used).")
@click.option("--integer", default=None, help="Integer columns, comma separated: their synthetic values are integers.")
@click.option("--ram", default=HOST_RAM, show_default=True,
              help="Memory for the summary (the planner uses what its error model says improves accuracy, "
                   "often a complete tree of about 2M of counters at 16M: slower, e.g. 1.6 s vs 0.2 s at 170K "
                   "for 10**5 rows on the C core).")
@click.option("--n-max", default=DEFAULT_N_MAX, show_default=True, type=click.IntRange(2, 2 ** 29),
              help="A public estimate of the rows (rate x period, or a published count), never counted "
                   "from the data; sets the tree depth (more rows are still all read).")
@click.option("--seed", default=None, type=click.IntRange(0, 2 ** 63 - 1),
              help="Reproducible noise and sampling. Tests only: the output is then NOT private.")
@click.option("--evaluate", "show_utility", is_flag=True,
              help="Also print utility against the real data beside a uniform baseline, on the first 2**20 rows "
                   "written (NOT private: for your eyes only).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Synthetic rows to write: CSV, Parquet if it ends in .parquet, '-' for CSV on stdout.")
@_reading_options
def synthesize(data, columns, bounds, epsilon, count, integer, ram, n_max, seed, show_utility, output, missing,
               delimiter):
    """Private synthetic rows from DATA (CSV, Parquet if it ends in .parquet,
    '-' for stdin) in one step, with no device.

    Plans a summary for a host-sized memory budget, runs the device agent's C
    core over the rows (numpy where the core is not built), assembles its
    release and samples -n rows. Epsilon is per row; --bounds and -n are public
    and nothing is read off the data to choose them.
    """
    cols = _columns(columns)
    read = read_table(data, cols, missing=missing, delimiter=delimiter)
    table = read.data
    with _Bar("agent (%s)" % runtime(), total=0) as bar:
        gen, cfg = fit(table, bounds=bounds, epsilon=epsilon, columns=cols, integer=integer or None,
                       seed=seed, ram=ram, n_max=n_max, progress=bar.update)
    # sampling is post-processing: a fresh sampling seed is not a privacy matter, and keeps --evaluate's rows
    # the written ones
    sample_seed = seed if seed is not None else int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    with _Bar("sampling", total=count) as bar:
        gen.write(output, count, sample_seed, progress=bar.advance)
    err = output == "-"
    outside = es.outside_fraction(cfg, table, cols)
    if outside:
        click.echo("note: %.2f%% of rows were outside --bounds and were clamped onto the edge" % (100 * outside),
                   err=True)
    if seed is not None:
        click.echo("note: --seed makes the noise reproducible: these rows are NOT private", err=True)
    m, p = cfg["mechanisms"][0], cfg["plan"]
    click.echo("wrote %s: %d synthetic rows of %s from %d rows%s; privhp r=%d k=%d w=%d j=%d, %d counter bytes, "
               "epsilon %s per row" % ("stdout" if err else output, count, ",".join(gen.names), len(table),
                                       _skipped(read), m["r"], m["k"], m["w"], m["j"], p["counter_bytes"],
                                       p["epsilon"]), err=err)
    if show_utility:
        with _Bar("evaluate", total=0) as bar:
            # the first rows written (blocks are drawn in order), at most one block: memory stays flat in -n
            report = es.evaluate(table, gen.sample_array(min(count, SAMPLE_BLOCK), sample_seed), cols, bounds=cfg,
                                 progress=bar.update)
        _print_report(report, err=err)
        click.echo("note: these figures compare with the real rows: they are NOT private; keep them to yourself, "
                   "do not publish them", err=True)


# ------------------------------------------------------------------- report
@main.command()
@_comparing_options
@click.option("--bounds", default=None, help="Public bounds LO:HI[,...], marked on the axes (default: those of "
                                            "--config or --generator, else the range of both files, unmarked).")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="Device config from `plan`: bounds, epsilon and device size for the title ('-': stdin).")
@click.option("--generator", "generator_path", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="Generator file from `assemble`: bounds and epsilon for the title ('-': stdin).")
@click.option("--epsilon", default=None, help="Epsilon for the title (default: from --config or --generator).")
@click.option("--ram", default=None, help="Device size for the title, e.g. 64K (default: from --config).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for evaluate's subsampling and queries.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="report.html (a self-contained page) or report.png (one image).")
@_reading_options
def report(real, synthetic, columns, bounds, config_path, generator_path, epsilon, ram, seed, output, missing,
           delimiter):
    """Pictures and figures of synthetic rows against real ones.

    Per column: histograms and CDFs of both with a difference panel, zoomed to
    where the data are, bounds marked. Per pair of the first six columns: 2-D
    histograms, real | synthetic. And the figures of `evaluate`. The report reads the real
    rows: it is NOT private.
    """
    if config_path and generator_path:
        raise InputError("pass --config or --generator, not both")
    read_once([real, synthetic, config_path or generator_path],
              ["--real", "--synthetic", "--config" if config_path else "--generator"])
    cols = _columns(columns)
    known = {}
    if config_path:
        cfg = es.load_config(config_path)
        m = cfg["mechanisms"][0]
        known = {"epsilon": cfg["plan"].get("epsilon"), "ram": cfg["plan"].get("ram_bytes"),
                 "lo": m.get("lo"), "hi": m.get("hi")}
    elif generator_path:
        s = es.load(generator_path).summary()
        known = {"epsilon": s.get("epsilon"), "lo": s.get("lo"), "hi": s.get("hi")}
    if bounds is None and known.get("lo") is not None:
        if len(known["lo"]) != len(cols):
            raise InputError("%s has %d channels, --columns %d" % (config_path or generator_path, len(known["lo"]),
                                                                   len(cols)))
        bounds = list(zip(known["lo"], known["hi"]))
    x, y = _real_and_synthetic(real, synthetic, cols, missing, delimiter)
    eps = epsilon or known.get("epsilon")
    size = parse_size(ram, "--ram") if ram else known.get("ram")
    extra = ", ".join(([] if eps is None else ["epsilon %s" % eps]) + ([] if not size else [_size(size) + " device"]))
    with _Bar("report", total=0) as bar:
        es.report(x, y, cols, bounds=bounds, path=output, seed=seed, progress=bar.update,
                  title="edgesynth report: real vs synthetic" + (" (%s)" % extra if extra else ""))
    click.echo("wrote %s: %d column(s), %d pair(s), %d real and %d synthetic rows"
               % (output, len(cols), len(cols) * (len(cols) - 1) // 2, len(x), len(y)))
    click.echo("note: the report reads the real rows: it is NOT private; keep it to yourself, do not publish it",
               err=True)


def _size(nbytes):
    """'64 KiB', '16 MiB' or '1000 B'."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return "%d %s" % (nbytes // scale, unit)
    return "%d B" % nbytes


# ------------------------------------------------------------------ inspect
@main.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--key", "key_hex", default=None, help="Hex HMAC key to verify tagged frames.")
def inspect(file, key_hex):
    """Describe a frame file, generator or device config (as JSON); FILE '-' reads stdin."""
    _echo_json(es.inspect(file, key_hex or None))


# --------------------------------------------------------------------- keys
@main.group()
def keys():
    """Device HMAC keys in a keyring file: explicit, or derived from a fleet master (edgesynth docs trust)."""


@keys.command("new")
@click.argument("device_id")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring file (JSON, created with mode 0600).")
@click.option("--force", is_flag=True, help="Replace the device's existing key (its old frames stop verifying).")
def keys_new(device_id, keyring, force):
    """Create a random 32-byte key for DEVICE_ID in the keyring. The key is never printed."""
    ring = es.new_key(keyring, device_id, force=force)
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
    run provision() once (edgesynth docs deployment). The key is never printed.
    """
    es.write_credentials(es.load_keyring(keyring), device_id, output)
    click.echo("wrote %s: credentials of %r (mode 0600; keep it off the host once copied)" % (output, device_id))


@keys.command("list")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"master": bool, "devices", "revoked"}.')
def keys_list(keyring, as_json):
    """Print the device ids with an explicit key, one per line (never the keys),
    and on stderr whether a fleet master derives the others' keys and how
    many devices are revoked."""
    ring = es.load_keyring(keyring)
    if as_json:
        _echo_json({"master": ring.has_master, "devices": ring.devices(), "revoked": ring.revoked()})
        return
    for dev in ring.devices():
        click.echo(dev)
    click.echo("%s: %d explicit key(s); fleet master %s; %d revoked device(s)"
               % (keyring, len(ring.devices()), "present (the keys of unlisted devices are derived)"
                  if ring.has_master else "absent", len(ring.revoked())), err=True)


@keys.command("fleet")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring file (created with mode 0600 if missing).")
@click.option("--force", is_flag=True,
              help="Replace an existing master: EVERY derived device key changes (re-export, re-flash).")
def keys_fleet(keyring, force):
    """Create a fleet master key (32 random bytes, never printed).

    Every device without an explicit key then has the key HKDF-SHA256(master,
    info "edgesynth device key v1\\0" + device id): the keyring stays one key
    for any fleet size. Write the devices' keys with `keys export`.
    """
    had = force and os.path.exists(keyring) and es.load_keyring(keyring).has_master
    es.new_fleet_key(keyring, force=force)
    if had:
        click.echo("warning: the fleet master was replaced: every derived device key changed; devices flashed "
                   "with the old keys are refused until re-flashed (`keys export --force`)", err=True)
    click.echo("%s: fleet master %s (device keys are derived from it; explicit keys still win)"
               % (keyring, "replaced" if had else "created"))


def _device_ids(devices, from_file):
    """DEV arguments followed by the ids of --from (one per line; '-': stdin)."""
    if not devices and from_file is None:
        raise InputError("give device ids (DEV...) or --from FILE (one per line; '-' reads stdin)")
    yield from devices
    if from_file is not None:
        yield from read_device_ids(from_file)


_FROM = click.option("--from", "from_file", default=None, type=click.Path(dir_okay=False, allow_dash=True),
                     help="Also the device ids of FILE, one per line ('-': stdin): more than a command line holds.")


@keys.command("export")
@click.argument("devices", nargs=-1)
@_FROM
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
@click.option("-o", "--output", "directory", required=True, type=click.Path(file_okay=False),
              help="Directory for DEV.key files (created with mode 0700 if missing).")
@click.option("--force", is_flag=True, help="Replace existing key files (each by an atomic rename).")
def keys_export(devices, from_file, keyring, directory, force):
    """Write each device's key for flashing as DIR/DEVICE.key: the 32 raw key
    bytes, mode 0600 (explicit key, else derived from the fleet master).

    Nothing is written if an id is invalid, revoked or has no key, or (without
    --force) if one of the files exists. The directory is fsynced once at the
    end, the files are not: after a crash, run the export again with --force
    (the same keys are derived). The keys are never printed.
    """
    ring = es.load_keyring(keyring)
    with _Bar("exporting keys", total=0) as bar:
        n = es.export_keys(ring, _device_ids(devices, from_file), directory, force=force, progress=bar.update)
    click.echo("wrote %d key file(s) to %s (mode 0600; keep them off the host once flashed)" % (n, directory))


@keys.command("revoke")
@click.argument("devices", nargs=-1)
@_FROM
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
def keys_revoke(devices, from_file, keyring):
    """Revoke devices: their new frames are refused ("revoked") by ingest,
    assemble --keyring and a running gateway (which re-reads the keyring).
    Frames already stored stay in the store; assemble --store ... --keyring
    KEYRING leaves them out (and counts them), and store migrate, which
    verifies again under the keyring, does not carry them over."""
    ring = es.revoke_keys(keyring, _device_ids(devices, from_file))
    click.echo("%s: %d device(s) revoked in all" % (keyring, len(ring.revoked())))


@keys.command("unrevoke")
@click.argument("devices", nargs=-1)
@_FROM
@click.option("--keyring", required=True, type=click.Path(dir_okay=False), help="Keyring file.")
def keys_unrevoke(devices, from_file, keyring):
    """Take devices off the revocation list (their keys are unchanged)."""
    ring = es.unrevoke_keys(keyring, _device_ids(devices, from_file))
    click.echo("%s: %d device(s) revoked in all" % (keyring, len(ring.revoked())))


# ------------------------------------------------------------ ingest, store
@main.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--store", "store_path", required=True,
              help="SQLite path or postgresql://URL; created if missing (an existing file or database must "
                   "hold a store).")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring: each frame must verify under the key of its envelope's device.")
@click.option("--files-from", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="Text file ('-': stdin) listing more FILES, one per line, read line by line after FILES.")
@click.option("-r", "--recursive", is_flag=True,
              help="A directory in FILES also gives the files of its subdirectories; '**' in a pattern spans "
                   "directories.")
@click.option("-j", "--jobs", default=None, type=click.IntRange(1, 1024),
              help="Processes that verify frames (1: in this process).  [default: the CPUs this process may use]")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per frame on stdout: file, frame, device, epoch, seq, result, reason.")
def ingest(files, store_path, keyring, files_from, recursive, jobs, as_json):
    """Verify frames (FILES; '-': stdin) and append them durably to the store, in any order.

    FILES are frame files, directories (their files, sorted; hidden ones
    left out) or quoted glob patterns ('spool/*.bin', expanded here, so any
    number of files). Frames are committed in batches (one fsync per up to
    256 frames). Prints "ack FILE frame I DEVICE EPOCH SEQ stored|duplicate"
    after the commit of the frame's batch, in input order (FILE and DEVICE
    %-escaped, so one frame is one line), and
    one stderr line "FILE: frame I: reason" per frame not stored: bad tag or
    bytes, or a conflict (another frame of a stored device and epoch, kept
    aside in the store). Exit 0 iff every frame was stored or was a
    duplicate, else 2.
    """
    if not files and files_from is None:
        raise click.UsageError("give FILES, --files-from or both")
    return _finish(es.ingest(files, store_path, keyring, on_frame=_frame_printer(as_json), jobs=jobs,
                             recursive=recursive, files_from=files_from))


def _frame_printer(as_json):
    """Prints one ingest Report: stdout for acks (or every report with
    --json), stderr for refusals; flushed, since a line is an acknowledgement."""
    def report(r):
        if as_json or r.acked:
            sys.stdout.write((r.json() if as_json else r.text()) + "\n")
            sys.stdout.flush()
        else:
            click.echo(r.text(), err=True)
    return report


def _finish(outcome):
    click.echo(outcome.summary(), err=True)
    return 0 if outcome.ok else 2


# ------------------------------------------------------------ MQTT: gateway, publish
def _broker_options(command):
    """--broker and the TLS / user options of a command that talks MQTT."""
    for opt in reversed([
        click.option("--broker", required=True, help="mqtt://HOST[:PORT] (1883) or mqtts://HOST[:PORT] (TLS, 8883)."),
        click.option("--cafile", default=None, type=click.Path(dir_okay=False),
                     help="mqtts: CA certificate(s) the broker's certificate must chain to (default: the system's)."),
        click.option("--cert", default=None, type=click.Path(dir_okay=False), help="mqtts: client certificate."),
        click.option("--key", "key_file", default=None, type=click.Path(dir_okay=False),
                     help="mqtts: the client certificate's private key."),
        click.option("--username", default=None,
                     help="User name; the password is read from $EDGESYNTH_MQTT_PASSWORD (never an option)."),
    ]):
        command = opt(command)
    return command


def _connection(broker, cafile, cert, key_file, username):
    return Connection(broker, cafile=cafile, cert=cert, key=key_file, username=username)


@main.command()
@_broker_options
@click.option("--store", "store_path", required=True,
              help="SQLite path or postgresql://URL; created if missing (an existing file or database must "
                   "hold a store).")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring: each frame must verify under the key of its envelope's device.")
@click.option("--client-id", default="edgesynth-gateway", show_default=True,
              help="The persistent session's client id (one running gateway per id).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame on stdout, as ingest --json.")
def gateway(broker, cafile, cert, key_file, username, store_path, keyring, client_id, as_json):
    """Receive frames from an MQTT broker and store them, until SIGTERM or Ctrl-C.

    Subscribes to edgesynth/+/frames/+ (QoS 1, persistent session); each frame
    is verified and committed to the store (frames that arrive together in one
    transaction), then answered with a receipt on edgesynth/DEVICE/receipts, then
    acknowledged (PUBACK). Prints one line per frame as ingest does (TOPIC in
    place of FILE). On SIGTERM or SIGINT it finishes the frames in hand,
    disconnects and exits 0 with a summary on stderr.
    """
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    outcome = es.gateway(_connection(broker, cafile, cert, key_file, username), store_path, keyring,
                         on_frame=_frame_printer(as_json), stop=lambda: bool(stopping), client_id=client_id,
                         on_status=lambda line: click.echo("gateway: " + line, err=True))
    click.echo("gateway stopped: %s" % outcome.summary(), err=True)
    return 0


PUBLISH_TIMEOUT = 30.0  # s: simulate --publish waits this long for the receipts


def _receipt_printer(err=False):
    """on_receipt for es.publish: one line per receipt (a publish.Sent), as
    it arrives, on stdout, or on stderr (``err``) when stdout carries frames."""
    stream = sys.stderr if err else sys.stdout

    def show(f):
        stream.write(f.text() + "\n")
        stream.flush()
    return show


def _publish_and_wait(frames, conn, timeout, err=False):
    """Publish ``frames`` (paths or bytes), print one line per receipt (on
    stderr with ``err``); exit status."""
    return _published_status(es.publish(frames, conn, timeout, on_receipt=_receipt_printer(err)), timeout)


def _published_status(res, timeout):
    """Name the frames without a receipt, print the summary; exit status."""
    for f in res.missing:
        click.echo("%s: no receipt within %g s (device %s epoch %d)" % (f.label, timeout, shown(f.device), f.epoch),
                   err=True)
    click.echo(res.summary(), err=True)
    return 0 if res.ok else 2


@main.command()
@click.argument("frames", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@_broker_options
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0, min_open=True),
              help="Seconds to wait for every receipt.")
def publish(frames, broker, cafile, cert, key_file, username, timeout):
    """Publish recorded frames (FRAMES, files of frames back to back) to a gateway and wait for its receipts.

    Each frame goes with QoS 1 to edgesynth/DEVICE/frames/EPOCH; prints
    "receipt FILE frame I DEVICE EPOCH RESULT[: reason]" per receipt. Exit 0
    iff every frame was stored or a duplicate; 2 if one was refused or got no
    receipt within --timeout (those are named on stderr).
    """
    read_once(list(frames))
    return _publish_and_wait(list(frames), _connection(broker, cafile, cert, key_file, username), timeout)


@main.group()
def store():
    """Inspect an ingest store (read-only), or migrate an old one."""


@store.command("stats")
@click.option("--store", "store_path", required=True, help="SQLite path or postgresql://URL.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def store_stats(store_path, as_json):
    """Frames, devices and configurations held by a store, and the conflicts kept aside."""
    with es.connect_store(store_path) as st:
        s = st.stats()
        conflicts = st.conflicts()
    if as_json:
        _echo_json(dict(s, conflict_frames=[dict(zip(("device", "epoch", "seq", "digest"), c))
                                        for c in conflicts]))
        return
    click.echo("%s: %d frame(s) from %d device(s), %d configuration(s), %d bytes, %d conflict(s)"
               % (st.path, s["frames"], s["devices"], len(s["configs"]), s["bytes"], s["conflicts"]))
    for dev, epoch, seq, digest in conflicts:
        click.echo("conflict: device %s epoch %d seq %d payload sha256 %s (kept aside, not merged)"
                   % (shown(dev), epoch, seq, digest))


@store.command("migrate")
@click.argument("old", type=click.Path(dir_okay=False))
@click.option("--to", "store_path", required=True,
              help="Store to fill, SQLite path or postgresql://URL (created if missing, as by ingest).")
@click.option("--keyring", required=True, type=click.Path(dir_okay=False),
              help="Keyring: each frame is verified again under its device's key.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame, as ingest --json.")
def store_migrate(old, store_path, keyring, as_json):
    """Copy the frames of a store written by an earlier edgesynth (schema 1)
    into a new store, verified and stored as by ingest. OLD is only read."""
    return _finish(es.migrate(old, store_path, keyring, on_frame=_frame_printer(as_json)))


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
    if config_path:
        refuse(config_path, "bundle --config", "the bundle copies the config file; give its path")
        es.load_config(config_path)  # refuse a broken config before compiling anything
    with _Bar("mpy-cross"):
        sizes = mpy_bundle.build(output, config_path, arch, emit=emit)
    if as_json:
        _echo_json({"bundle": output, "files": sizes, "total_bytes": sum(sizes.values())})
    else:
        click.echo("wrote %s: %d files, %d bytes" % (output, len(sizes), sum(sizes.values())))


@main.command()
@click.argument("bundle_dir", type=click.Path(file_okay=False))
@click.option("--port", required=True, help="Serial port of the board, e.g. /dev/ttyACM0 (mpremote's `connect`).")
def deploy(bundle_dir, port):
    """Copy a bundle onto a board with mpremote and reset it (edgesynth docs deployment)."""
    with _Bar("deploy", total=len(board.commands(bundle_dir, port))) as bar:
        n = board.deploy(bundle_dir, port, progress=bar.advance)
    click.echo("deployed %s to %s (%d mpremote steps)" % (bundle_dir, port, n))


# --------------------------------------------------------------------- demo
@main.command()
@click.option("--out", "out_dir", default="edgesynth-demo", show_default=True, type=click.Path(file_okay=False),
              help="Directory for the demo's files.")
@click.option("--epsilon", default="1", show_default=True, help="Privacy budget per reading.")
@click.option("--ram", default="64K", show_default=True,
              help="Device RAM budget (MicroPython needs about 30K of it beyond the counters).")
@click.option("--seed", default=None, type=click.IntRange(0, 2 ** 63 - 1),
              help="Make the run reproducible (device noise and sampling). Without it the device draws "
                   "fresh entropy; with it the release is NOT private.")
def demo(out_dir, epsilon, ram, seed):
    """Run the whole path on real hourly temperatures of two weather stations.

    Plans a device, runs the agent over the readings, assembles a generator,
    samples as many synthetic rows, prints a utility table against a uniform
    baseline and writes a PNG comparing real and synthetic distributions.
    """
    r = es.run_demo(out_dir, epsilon, parse_size(ram, "--ram"), seed)
    m, p = r.config["mechanisms"][0], r.config["plan"]
    click.echo("data: %d hourly readings of %s (NOAA, 2010; shipped with edgesynth)" % (r.n, ", ".join(r.names)))
    click.echo("plan: privhp r=%d k=%d w=%d j=%d, %d counter bytes in a %d-byte budget "
               "(MicroPython needs %d bytes beyond them), epsilon %s"
               % (m["r"], m["k"], m["w"], m["j"], p["counter_bytes"], r.ram, p["runtime_overhead_bytes"],
                  p["epsilon"]))
    click.echo("device: released one %d-byte frame (raw readings never leave it)%s"
               % (r.frame_bytes, "" if seed is None else "; --seed %d: reproducible noise, NOT private" % seed))
    click.echo("host: generator with %d leaves; sampled %d synthetic rows" % (r.leaves, r.n_synthetic))
    _print_report(r.report)
    click.echo("wrote %s (plot), report.json, real.csv, synthetic.csv, device.json, release.msgpack, "
               "generator.msgpack in %s" % (r.files["plot"], out_dir))


# --------------------------------------------------------------------- docs
@main.command()
@click.argument("topic", required=False)
@click.option("--path", "show_path", is_flag=True, help="Print the page's file path instead of its text.")
def docs(topic, show_path):
    """List the documentation pages installed with edgesynth, or print the
    page of TOPIC (e.g. `edgesynth docs privacy`, `edgesynth docs api`)."""
    if topic is None:
        for t in es.docs_topics():
            click.echo("%-20s %s" % (t, docs_title(t)))
        click.echo("(pages in %s; `edgesynth docs TOPIC` prints one)" % docs_dir(), err=True)
        return
    path = es.docs_path(topic)
    if show_path:
        click.echo(path)
        return
    with open(path, encoding="utf-8") as fh:
        click.echo(fh.read(), nl=False)


if __name__ == "__main__":
    main()
