"""es.evaluate's figures as table rows, the same for the `evaluate` command's
table and the report's (HTML and PNG)."""
import re

HEADER = ("utility (lower is better)", "synthetic", "uniform baseline")


def unit(name):
    """The unit written in a column name in brackets at its end: "temp [C]"
    and "temp (C)" give "C"; None when there is none."""
    m = re.search(r"[\[(]\s*([^\[\]()]+?)\s*[\])]\s*$", str(name))
    return m.group(1) if m else None


def rows(report):
    """[(metric, synthetic, baseline)] as text, one row per column's W1 (in
    the column's unit, see ``unit``), then the joint W1 and the range-query error."""
    syn, base = report["synthetic"], report["baseline"]
    out = [("W1 %s (in %s)" % (s["name"], unit(s["name"]) or "data units"), "%.4g" % s["w1"], "%.4g" % b["w1"])
           for s, b in zip(syn["channels"], base["channels"])]
    out.append(("joint W1 (normalised, l-inf; floor %.3g)" % report["w1_joint_floor"],
                "%.4g" % syn["w1_joint"], "%.4g" % base["w1_joint"]))
    out.append(("range-query error", "%.4g" % syn["range_query_error"], "%.4g" % base["range_query_error"]))
    return out
