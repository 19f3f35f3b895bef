"""CLI glue for the CDF and profile mechanisms: plan, combine, assemble lines."""
import json
from fractions import Fraction

from host_tools.errors import InputError
from host_tools.outputs import write_text


def _write_json(path, obj):
    write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


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
        from host_tools.profile_plan import parse_domain, plan_profile
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
    _write_json(output, cfg)
    if as_json:
        echo_json({**cfg["plan"], **{k: v for k, v in cfg["mechanisms"][0].items() if k != "sigma"},
                   "config": output})
    else:
        echo(line)
    return cfg


def _plan_cdf(eps, bounds, bins, branching, names, relation, ram, runtime):
    """The CDF config of the command's flags (parsing only; cdf_plan plans)."""
    from host_tools.cdf_plan import plan_cdf
    from host_tools.plan import parse_bounds
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


def combine(cfgs):
    """One device config holding every mechanism of ``cfgs`` (a list of dicts).

    Budgets stay each mechanism's own exact fractions; the device epsilon is
    their sum (sequential composition: every reading reaches every mechanism).
    """
    if len(cfgs) < 2:
        raise InputError("combine needs at least two configs")
    relations = {c.get("relation", "add-remove") for c in cfgs}
    if len(relations) != 1:
        raise InputError("configs use different neighbouring relations %s" % sorted(relations))
    mechs, eps, plans = [], Fraction(0), []
    for c in cfgs:
        if c.get("format") != 1 or not isinstance(c.get("mechanisms"), list):
            raise InputError("not an edgesynth device config")
        e = c.get("epsilon")
        eps += Fraction(e[0], e[1])
        mechs.extend(c["mechanisms"])
        plans.append(c.get("plan", {}))
    if len(mechs) > 8:
        raise InputError("a device holds at most 8 mechanisms")
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relations.pop(),
            "mechanisms": mechs, "plan": {"combined": plans, "epsilon": str(eps)}}


def combine_files(paths, output):
    from host_tools.simulate import load_config
    cfg = combine([load_config(p) for p in paths])
    from agent.device import MECHANISMS, RELATIONS, _routes, mechanism_class
    from agent.errors import ConfigError
    for m in cfg["mechanisms"]:
        if not isinstance(m, dict) or m.get("kind") not in MECHANISMS:
            raise InputError("combined config is invalid: unknown mechanism %r" % (m,))
    try:  # what the device would refuse (tables only: no noise is drawn here)
        mechs = [mechanism_class(m["kind"])(m, RELATIONS[cfg["relation"]]) for m in cfg["mechanisms"]]
        _routes(cfg, mechs)
    except (ConfigError, KeyError) as e:
        raise InputError("combined config is invalid: %s" % e)
    # exact, from the tables just built; the runtime overhead of a combined
    # device is not measured, so there is no --ram check here
    cfg["plan"]["counter_bytes"] = sum(m.counter_bytes() for m in mechs)
    _write_json(output, cfg)
    names = []
    for m in cfg["mechanisms"]:
        names.append("%s(%s)" % (m["kind"], ",".join(m.get("names") or [])))
    return ("wrote %s: %s; epsilon %s; counters %d B in all, plus the runtime's overhead (not measured for "
            "combined configs: no RAM check)" % (output, " + ".join(names), cfg["plan"]["epsilon"],
                                                  cfg["plan"]["counter_bytes"]))


def assemble_line(summary, output):
    """One line describing an assembled CDF generator or profile."""
    tail = "; wrote %s" % output if output else ""
    if summary["mechanism"] == "cdf":
        med = summary["quantiles"]["0.5"]
        return "cdf generator from %d frame(s): K=%d, median %s, epsilon %s per reading%s" % (
            summary["frames"], summary["bins"], med, summary["epsilon"], tail)
    return "profile of %d ids from %d frame(s): distinct ~ %.1f, never seen %.3f, epsilon %s%s" % (
        summary["ids"], summary["frames"], summary["distinct"], summary["never_seen"], summary["epsilon"], tail)
