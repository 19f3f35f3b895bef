"""PHDStream on the host (docs/mechanisms/phdstream.md, "Host"):
post-processing of the device's per-window releases. ``wire`` decodes a
payload, ``mirror`` rebuilds the device's union tree from them, ``tree``
holds the consistent extension Ext_T, the per-step generator and the
sampler over an explicit tree, ``metric`` the paper's range-query
evaluation.
"""
from . import metric, mirror, tree, wire

__all__ = ["KIND", "Mirror", "decode", "metric", "mirror", "tree", "wire"]

KIND = "phdstream"
Mirror = mirror.Mirror
decode = wire.decode
