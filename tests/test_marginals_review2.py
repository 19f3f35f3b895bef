"""Fixes of the second host review of marginals (issue 18): the planner
refuses a joint domain the host model cannot hold, evaluate's TV is bounded
by the table sizes, value matching, input edge cases and messages."""
from fractions import Fraction

import pytest

from edgesynth.errors import InputError
from edgesynth.mechanisms.marginals.model import MAX_CELLS
from edgesynth.mechanisms.marginals.plan import plan_marginals
from edgesynth.mechanisms.marginals.schema import Schema


def test_plan_refuses_a_joint_domain_the_host_model_cannot_fit():
    # 4 columns of 64 bins: every pair is 65**2 cells (a device holds it), the joint 65**4 > 2**22
    wide = Schema.from_json({"columns": [{"name": "c%d" % i, "bounds": [0.0, 1.0], "bins": 64} for i in range(4)]})
    assert 65 ** 4 > MAX_CELLS
    with pytest.raises(InputError, match="joint domain has %d cells, the host model holds %d" % (65 ** 4, MAX_CELLS)):
        plan_marginals(wide, Fraction(1), marginals=[(0,), (1,), (2,), (3,)])
    ok = Schema.from_json({"columns": [{"name": "c%d" % i, "bounds": [0.0, 1.0], "bins": 44} for i in range(4)]})
    assert 45 ** 4 <= MAX_CELLS
    assert plan_marginals(ok, Fraction(1), marginals=[(0,), (1,), (2,), (3,)])["plan"]["schema"] == ok.to_json()
