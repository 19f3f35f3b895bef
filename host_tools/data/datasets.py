"""The real sensor data the demo runs on, read from a registry data package.

Hourly air temperature (degrees Fahrenheit) of 2010 at two weather stations,
Seattle and San Francisco, as shipped by the `vega_datasets` package (MIT
licence; the readings are NOAA public-domain records). Joined on the hour, the
two series form one 2-channel stream, as a gateway with two sensors would see.
"""
import csv
import os

import numpy as np

from edgesynth.errors import InputError

NAMES = ["seattle_temp_f", "sf_temp_f"]
BOUNDS = "0:110,0:110"  # public a-priori range of outdoor temperatures in F, not read from data
N_MAX = 24 * 366  # public: at most one joined reading an hour for a year, whatever the files hold


def _series(path):
    out = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out[row["date"][:16]] = float(row["temp"])
    return out


def station_temperatures():
    """(n, 2) float array of hourly temperatures in F, in time order, and NAMES."""
    try:
        import vega_datasets
    except ImportError:
        raise InputError("the demo needs the vega_datasets package (pip install vega_datasets)")
    base = os.path.join(os.path.dirname(vega_datasets.__file__), "_data")
    try:
        sea = _series(os.path.join(base, "seattle-temps.csv"))
        sf = _series(os.path.join(base, "sf-temps.csv"))
    except (OSError, KeyError, ValueError) as e:
        raise InputError("vega_datasets temperature files are unreadable (%s)" % e)
    hours = sorted(set(sea) & set(sf))
    return np.array([[sea[h], sf[h]] for h in hours]), list(NAMES)
