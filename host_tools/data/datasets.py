"""The real sensor data the demo runs on, shipped with the package.

Hourly air temperature (degrees Fahrenheit) of 2010 at two weather stations,
Seattle and San Francisco: NOAA public-domain records, as published by the
`vega_datasets` package (0.9.0) and copied unchanged into ``data/noaa/``
(its README gives the source, licence and checksums). Joined on the hour, the
two series form one 2-channel stream, as a gateway with two sensors would see.
"""
import csv
from importlib import resources

import numpy as np

from edgesynth.errors import InputError

NAMES = ["seattle_temp_f", "sf_temp_f"]
BOUNDS = "0:110,0:110"  # public a-priori range of outdoor temperatures in F, not read from data
N_MAX = 24 * 366  # public: at most one joined reading an hour for a year, whatever the files hold
FILES = ("seattle-temps.csv", "sf-temps.csv")  # in data/noaa/, in the order of NAMES


def _series(name):
    """{'YYYY/MM/DD HH:MM': temperature in F} of one station's file."""
    out = {}
    with resources.files(__package__).joinpath("noaa", name).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out[row["date"][:16]] = float(row["temp"])
    return out


def station_temperatures():
    """(n, 2) float array of hourly temperatures in F, in time order, and NAMES."""
    try:
        sea, sf = (_series(name) for name in FILES)
    except (OSError, KeyError, ValueError) as e:
        raise InputError("the demo's temperature files in the edgesynth package are unreadable (%s)" % e)
    hours = sorted(set(sea) & set(sf))
    return np.array([[sea[h], sf[h]] for h in hours]), list(NAMES)
