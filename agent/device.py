"""The device agent: public config in, noisy state kept, one msgpack frame out.

    a = Agent(cfg)                    # noise drawn here from the platform DRBG
    a = Agent(cfg, seed=b"...")       # reproducible: tests and simulation only
    a.update(reading)                 # one reading: a tuple of d numbers
    frame = a.release()               # one enveloped release frame

After ``release()`` the state is sealed: an update would let two releases
differ by exactly the new readings (privacy rule 5). Releasing again returns
the same bytes, which is free. The frame layout is docs/wire-format.md.

A continual mechanism (PHDStream) is one state over an unbounded stream, one
step per window. Its config holds that mechanism alone; ``release()`` runs
the window's step once and seals, and ``next_window()`` opens the next
window of the same state (seq + 1, the next epoch) instead of a new Agent:

    frame = a.release()       # step, seal, encode
    a.next_window()           # epoch + 1 (or the epoch given), seq + 1

The agent works in three phases (construct, update, release) and on
MicroPython keeps only the current phase's code on the heap
(firmware_shims/memory.py), so a small device holds counters plus one phase.
"""
from .errors import SEALED, ConfigError, SealedError
from .privhp import PrivHP
from .shims import shim
from .wire import FORMAT, MAGIC, MAX_MECHANISMS, MECHANISMS, PAYLOAD_KEYS, RELATIONS, device_id_bytes

# Modules of the construction phase, unloaded after it (firmware_shims/memory.py),
# by their names on a board: unload acts on MicroPython only, where the bundle's
# packages are the top-level agent and firmware_shims (targets/bundle.py). A
# constant tuple of strings interns no names; building them at run time interned
# eight, and MicroPython never frees an interned name (qstr).
CONSTRUCTION = ("agent.privhp.build", "agent.cdf.build", "agent.profile.build", "agent.marginals.build", "agent.spec",
                "agent.dlap",
                "firmware_shims.drbg", "firmware_shims.entropy", "firmware_shims.hmac256")
# The same unload serves a continual mechanism (phdstream), which draws noise
# at every step: its module binds agent.spec's draw and holds the DRBG, and
# those live on through the references when their modules are dropped.


def ratio(v, what):
    """A config fraction [numerator, denominator] of positive integers below 2**64."""
    if not isinstance(v, list) or len(v) != 2:
        raise ConfigError("%s must be [numerator, denominator]" % what)
    for x in v:
        if not isinstance(x, int) or isinstance(x, bool) or x < 1 or x >= 1 << 64:
            raise ConfigError("%s must hold two positive integers, got %r" % (what, v))
    return v[0], v[1]


class Agent:
    """Private summaries of one device's stream (see module docstring).

    ``device_id``: name carried in the frame, 1..64 characters of
    ``A-Z a-z 0-9 . _ - :`` (device_id_bytes).
    ``epoch``, ``seq``: release counters chosen by the caller (0..2**32-1).
    ``key``: optional HMAC-SHA256 device key (bytes); frames are tagged with it.
    ``restore``: ``restore(mechs)`` fills the counters of a persisted state
    instead of drawing noise (agent/persist.py; never for a new window).

    ``inputs`` and ``routes`` are the reading's column names and, per
    mechanism, the columns it reads (``routes()``); host runtimes that fill
    the counters in bulk read them.
    """

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None, restore=None):
        if not isinstance(cfg, dict):
            raise ConfigError("config must be a JSON object")
        if cfg.get("format") != FORMAT:
            raise ConfigError("config format must be %d, got %r" % (FORMAT, cfg.get("format")))
        self.eps = ratio(cfg.get("epsilon"), "epsilon")
        relation = cfg.get("relation", "add-remove")
        if relation not in RELATIONS:
            raise ConfigError("relation must be 'add-remove' or 'replace', got %r" % (relation,))
        self.relation = relation
        specs = cfg.get("mechanisms")
        if not isinstance(specs, list) or not 1 <= len(specs) <= MAX_MECHANISMS:
            raise ConfigError("config needs a list of 1..%d mechanisms" % MAX_MECHANISMS)
        self.device_id = device_id_bytes(device_id)
        for name, v in (("epoch", epoch), ("seq", seq)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v >= 1 << 32:
                raise ConfigError("%s must be an integer in [0, 2**32), got %r" % (name, v))
        self.epoch = epoch
        self.seq = seq
        tag_key = None if key is None else bytes(key)  # a local: `key` is rebound by the import below
        try:
            self.mechs = _build(specs, seed, RELATIONS[relation], self.eps, restore)
        finally:
            shim("memory").unload(CONSTRUCTION)
        # release-phase code and buffers, loaded now that construction code is
        # gone: the peak heap is counters plus the larger of the two phases
        from .msgpack_out import Encoder, key
        self._enc = Encoder()
        self._keys = [key(k) for k in PAYLOAD_KEYS]
        self._mac = None
        if tag_key is not None:
            self._mac = shim("hmac256").HMAC256(tag_key)
        for m in self.mechs:
            m.prepare_release()
        self._sink = None
        self.sealed = False
        # each mechanism reads its own columns of the reading (cfg "inputs")
        self.inputs, self.routes = routes(cfg, self.mechs)
        # the single-mechanism case is the hot path: bind its update directly
        one = len(self.mechs) == 1 and self.routes[0][1] is None
        self.update = self.mechs[0].update if one else self._update_all

    def _update_all(self, x):
        for up, cols, buf in self.routes:
            if cols is None:
                up(x)
            else:  # this mechanism's columns, copied into its preallocated list
                for k in range(len(cols)):
                    buf[k] = x[cols[k]]
                up(buf)

    def update_many(self, rows):
        """Count every reading in ``rows`` (any iterable of d-sequences)."""
        up = self.update
        for x in rows:
            up(x)

    def update_block(self, columns):
        """Count n readings held column-wise: ``columns`` is one equal-length
        buffer per channel (e.g. the array('H') an ADC's read_timed fills).
        Same counters as n calls of update; bulk work goes through the
        numeric facade (agent/privhp/block.py). Returns n."""
        for m, (_, cols, _) in zip(self.mechs, self.routes):
            if m.kind != "privhp" or cols is not None:
                raise ConfigError("update_block serves a single-column-set PrivHP state; "
                                  "call update per reading for %s" % m.kind)
        from .privhp.block import update_block
        n = 0
        for m in self.mechs:
            n = update_block(m, columns)
        return n

    def _payload(self, enc, keys):
        enc.map(7)
        enc.raw(keys[0])
        enc.str(self.device_id)
        enc.raw(keys[1])
        enc.uint(self.epoch)
        enc.raw(keys[2])
        enc.array(2)
        enc.uint(self.eps[0])
        enc.uint(self.eps[1])
        enc.raw(keys[3])
        enc.uint(FORMAT)
        enc.raw(keys[4])
        enc.array(len(self.mechs))
        for m in self.mechs:
            m.encode(enc)
        enc.raw(keys[5])
        enc.str(self.relation.encode())
        enc.raw(keys[6])
        enc.uint(self.seq)

    def _tee(self, buf, n):
        if self._mac is not None:
            self._mac.update(buf if n == len(buf) else memoryview(buf)[:n])
        self._sink(buf, n)

    def release(self, sink=None):
        """Seal the state and emit one frame.

        With ``sink(buf, n)`` the frame is streamed through the encoder's small
        preallocated buffers and its length is returned: a device should do
        this. Without a sink the frame is returned as one exactly-sized
        ``bytearray``. Repeated calls give identical bytes.
        """
        m = self.mechs[0]
        if m.kind == "phdstream" and not self.sealed:
            m.step()  # a continual state: the window's one step, its batch becomes this release
        self.sealed = True
        self.update = self._sealed
        for m in self.mechs:
            m.sealed = True
        enc = self._enc
        enc.reset(None)
        self._payload(enc, self._keys)
        size = enc.n
        out = None
        if sink is None:
            # the envelope: fixarray, fixstr magic, device id str, bin32 payload, tag
            n = len(self.device_id)
            out = bytearray(2 + len(MAGIC) + (1 if n < 32 else 2) + n + 5 + size + (1 if self._mac is None else 34))
            view = memoryview(out)
            pos = [0]

            def sink(buf, n):
                view[pos[0]:pos[0] + n] = buf if n == len(buf) else memoryview(buf)[:n]
                pos[0] += n
        self._sink = sink
        if self._mac is not None:
            self._mac.start()
        enc.reset(self._tee)
        enc.array(4)
        enc.str(MAGIC)
        enc.str(self.device_id)
        enc.bin32_head(size)
        self._payload(enc, self._keys)
        total = enc.n
        enc.reset(sink)
        if self._mac is not None:
            enc.bin_head(32)
            enc.raw(self._mac.finish())
        else:
            enc.nil()
        total += enc.n
        self._sink = None
        return out if out is not None else total

    def _sealed(self, x):
        raise SealedError(SEALED)

    def next_window(self, epoch=None):
        """Open the next window of a continual (phdstream) state after its
        release: updates are taken again, ``seq`` counts up by one and the
        epoch becomes ``epoch`` (above the current one, below 2**32), by
        default the current one + 1. The state, its node pool and its noise
        source carry over: a window is a step, not a fresh agent.

        ConfigError for a config of other mechanisms (their next window is a
        new Agent with fresh noise) or before this window's release (its
        events would otherwise join the next window's step)."""
        m = self.mechs[0]
        if m.kind != "phdstream":
            raise ConfigError("next_window serves a phdstream config; another mechanism's next window is a new "
                              "Agent with fresh noise")
        if not self.sealed:
            raise ConfigError("release this window before the next one: each window is one step")
        if epoch is None:
            epoch = self.epoch + 1
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not self.epoch < epoch < 1 << 32:
            raise ConfigError("the next window's epoch must be an integer in (%d, 2**32), got %r" % (self.epoch, epoch))
        if self.seq + 1 >= 1 << 32:
            raise ConfigError("seq must stay below 2**32")
        self.epoch = epoch
        self.seq += 1
        m.sealed = False
        self.sealed = False
        self.update = m.update if self.routes[0][1] is None else self._update_all

    def counter_bytes(self):
        """Bytes of counters and hash tables held by every mechanism."""
        total = 0
        for m in self.mechs:
            total += m.counter_bytes()
        return total


def _build(specs, seed, factor, eps, restore=None):
    """Construction phase: every mechanism's tables (allocated first, while the
    heap is still unfragmented), the budget check, then the noise source and
    their noise; a continual state's noise source comes first, as it lives
    as long as the tables. The checks live in agent/spec.py, unloaded
    afterwards."""
    from .spec import check_budget, spec_kind
    mechs = []
    budgets = []
    # the noise source, built when called (a lambda: its name is not interned, see CONSTRUCTION)
    source = lambda: shim("drbg").seeded_source(seed) if seed is not None else shim("drbg").platform_source()  # noqa: E731
    rng = None
    if restore is None and isinstance(specs[0], dict) and specs[0].get("kind") == "phdstream":
        # a continual state keeps its noise source: build it (and intern its
        # names) before the pool, not in the holes the pool's construction leaves
        rng = source()
    for i in range(len(specs)):
        m = mechanism_class(spec_kind(specs[i], i, MECHANISMS))(specs[i], factor)
        if m.kind == "phdstream" and len(specs) > 1:  # its frames are one stream of steps
            raise ConfigError("a phdstream mechanism runs alone: its config holds no other mechanism")
        mechs.append(m)
        budgets.append(m.budget())
    check_budget(eps, budgets)
    if restore is not None:
        restore(mechs)  # the persisted noisy counters: no second noise draw
        return mechs
    if rng is None:
        rng = source()
    for m in mechs:
        m.draw_noise(rng)
    return mechs


def mechanism_class(kind):
    """The state class of ``kind``; CDF, profile and PHDStream code is
    imported only by configs that use it, so a PrivHP-only device keeps its
    heap."""
    if kind == "phdstream":
        # loaded by name: a board interns a module's identifiers (qstrs, never
        # freed) when it loads it, and one name more than this opens the next
        # qstr pool on every other mechanism's device (host_tools/ram.py)
        return getattr(__import__("phdstream", globals(), None, ("PHDStream",), 1), "PHDStream")
    if kind == "cdf":
        from .cdf import CDF
        return CDF
    if kind == "profile":
        from .profile import Profile
        return Profile
    if kind == "privhp":
        return PrivHP
    # a later kind (marginals): package agent/<kind>/, its class the kind
    # capitalised, both names built here so that no device interns them
    # unless it loads that package
    name = kind[0].upper() + kind[1:]
    return getattr(__import__(kind, globals(), None, (name,), 1), name)


def routes(cfg, mechs):
    """The reading layout and, per mechanism, (update, column indices or None
    when it reads the whole reading in order, preallocated list).

    A reading holds the columns ``cfg["inputs"]`` in that order; without it,
    every mechanism's ``names`` in order of first appearance. A mechanism
    reads the columns its ``names`` list.
    """
    inputs = cfg.get("inputs")
    if inputs is None:
        inputs = []
        for m in mechs:
            for nm in m.names:
                if nm not in inputs:
                    inputs.append(nm)
    if not isinstance(inputs, list) or not inputs or len(inputs) > 64:
        raise ConfigError("inputs must list 1..64 column names")
    for i in range(len(inputs)):
        if not isinstance(inputs[i], str) or inputs[i] in inputs[:i]:
            raise ConfigError("inputs must list distinct column names")
    routes = []
    for m in mechs:
        cols = []
        for nm in m.names:
            if nm not in inputs:
                raise ConfigError("a %s mechanism reads column %r, which is not among the inputs %r"
                                  % (m.kind, nm, inputs))
            # a marginals column is a cell index, not a reading: no other
            # mechanism may read it. Lean on purpose (every device loads this
            # bytecode): no new name, the kind from MECHANISMS (marginals last)
            for x in mechs:
                if x is not m and nm in x.names and MECHANISMS[-1] in (m.kind, x.kind):
                    raise ConfigError("%r: a marginals column, also read by %s" % (nm, x.kind))
            cols.append(inputs.index(nm))
        if cols == list(range(len(cols))):
            routes.append((m.update, None, None))
        else:
            routes.append((m.update, tuple(cols), [0] * len(cols)))
    return inputs, routes
