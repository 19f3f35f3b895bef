"""PHDStream on the host (docs/mechanisms/phdstream.md): post-processing of
the device's per-window releases. ``tree`` holds the consistent extension
Ext_T, the per-step generator and the sampler over an explicit tree;
``metric`` the paper's range-query evaluation.
"""
from . import metric, tree

__all__ = ["KIND", "metric", "tree"]

KIND = "phdstream"
