"""PHDStream fold-pruning on the C core (agent/c/es_phdstream.c): with
``fold`` set, every window's payload entry equals agent/phdstream's byte for
byte (each counter kind, pools small enough that folds free and reuse
pairs), and the C memory is the Python state's counter_bytes."""
import sys
from pathlib import Path

import pytest

from edgesynth.agent.phdstream import PHDStream
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.runtimes import native

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_phdstream_native import COUNTERS, CState, check_payload, lockstep, spec  # noqa: E402

pytestmark = pytest.mark.skipif(not native.available(),
                                reason="native core not built (no C compiler at install?)")


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("max_nodes,fold", [(25, 1), (41, 2), (200, 3)])
def test_c_payload_with_folds_equals_python(counter, max_nodes, fold):
    s = spec(counter=counter, max_nodes=max_nodes, fold=fold, snap=2, **COUNTERS[counter])
    m = PHDStream(s)
    m.draw_noise(seeded_source(b"phd-fold-native"))
    c = CState(s, b"phd-fold-native")
    assert c.mem_bytes == (m.counter_bytes() + 3) // 4 * 4
    freed = 0
    for _, _, frame in lockstep(m, c, 14, per=60):
        check_payload(frame, m)
        st = c.state
        assert (st.used, st.free_pair, st.refused_splits, st.t) == (m.used, m.free, m.refused_splits, m.t)
        freed += m.free != 0
    assert freed  # folds happened and left pairs free at some window
