"""The host's view of the device's noise: the scale cap and the variance.

Every mechanism's noise is discrete Laplace with a rational scale (agent/dlap.py);
the wire modules check the scale a frame states and record the variance of
merged counters from it.
"""
import math

from edgesynth.agent.spec import MAX_SCALE
from edgesynth.errors import SchemaError


def check_scale(what, scale_num, scale_den, *args):
    """SchemaError unless the noise scale num/den is at most MAX_SCALE = 2**22,
    the cap every device enforces (agent/spec.py check_scale): a frame beyond
    it was not made by a device, and its noise radius would size host arrays.
    The error names ``what % args`` (formatted only then: a frame checks
    every level)."""
    if scale_num > scale_den * MAX_SCALE:
        raise SchemaError("%s: noise scale %d/%d exceeds 2**22, the cap devices enforce"
                          % (what % args if args else what, scale_num, scale_den))


def dlap_variance(scale_num, scale_den):
    """Variance of discrete Laplace with scale b = num/den: 2a/(1-a)**2, a = exp(-1/b)."""
    a = math.exp(-scale_den / scale_num)
    return 2 * a / (1 - a) ** 2
