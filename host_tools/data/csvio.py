"""CSV output (input: edgesynth.data.files)."""
import numpy as np

from edgesynth.outputs import atomic_output


def write_columns(path, names, data):
    """Replace ``path`` atomically with ``data`` (n, d) under header ``names``;
    10 significant digits."""
    with atomic_output(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(names) + "\n")
        np.savetxt(fh, data, delimiter=",", fmt="%.10g")
