"""The device's privacy ledger, and a device that persists state and ledger.

    provision(cfg, "state.bin", "gw-17", key)       # once per identity: the genesis record
    d = Device(cfg, "state.bin", "gw-17", key)      # restores the newest record
    d.update(reading)
    d.checkpoint()            # optional: survive a reboot without losing readings
    n = d.release(sink)       # charges the ledger, persists, then emits the frame
    d.next_epoch()            # a fresh agent with fresh noise for the next window

Rules (privacy rule 5, docs/trust.md section 6):

* every release charges the frame's epsilon to the ledger, and a release that
  would take the total above the lifetime budget raises BudgetError before
  anything is sealed or sent;
* the charge, the sealed flag and the counters are written in one atomic
  record (agent/persist.py) *before* the frame is emitted, so a power cut
  during the send cannot spend budget unrecorded, and a reboot finds the state
  sealed and can only resend the same bytes (a resend is free: not charged);
* a new window is a new Agent with fresh noise, persisted at birth, so a
  reboot restores its noise instead of drawing new noise for the same window;
* records are authenticated with a key derived from the device key and
  numbered; every persist writes record c + 1, then advances the platform
  monotonic counter (firmware_shims/counter.py) to c + 1, and only then may a
  frame leave. A record below the platform counter is a restored copy and is
  refused, as is a device with a key but no record: only ``provision`` starts
  an identity, and a device whose state is lost needs a new identity;
* the platform counter's storage binds the identity provisioned last
  (``persist.identity``): ``provision`` refuses it again, and a state of
  another identity than the bound one is refused.

Epsilon is kept as an exact fraction of integers (no floats on the device).
"""
from .device import Agent, ratio
from .errors import BudgetError, ConfigError, SealedError, StateError
from .persist import fingerprint, identity, newest, restore, save, save_genesis, state_key
from .shims import shim
from .wire import device_id_bytes

fs = shim("fs")
platform_counter = shim("counter").platform_counter
HMAC256 = shim("hmac256").HMAC256

KEY_BYTES = 32  # device keys are HMAC-SHA256 keys of 32 bytes (docs/trust.md section 1)


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


class Ledger:
    """Epsilon spent over the device's life, against ``budget`` (num, den)."""

    def __init__(self, budget, spent=(0, 1), releases=0):
        self.budget = budget
        self.spent = spent
        self.releases = releases

    def after(self, eps):
        """The ledger once ``eps`` (num, den) is spent; BudgetError if over budget."""
        n = self.spent[0] * eps[1] + eps[0] * self.spent[1]
        d = self.spent[1] * eps[1]
        g = _gcd(n, d)
        n, d = n // g, d // g
        if n * self.budget[1] > self.budget[0] * d:
            raise BudgetError("releasing epsilon %d/%d would spend %d/%d of the lifetime budget %d/%d"
                              % (eps[0], eps[1], n, d, self.budget[0], self.budget[1]))
        return Ledger(self.budget, (n, d), self.releases + 1)


def _budget(cfg):
    # every ledgered config passes here first; a phdstream pool spans windows
    # and is not persisted, so a reboot would restart its stream with new noise
    for m in cfg.get("mechanisms") or ():
        if isinstance(m, dict) and m.get("kind") == "phdstream":
            raise ConfigError("a phdstream device does not run with a ledger (device.state) yet: its node pool "
                              "spans windows and is not persisted across reboots")
    return ratio(cfg.get("device", {}).get("lifetime_epsilon"), "device.lifetime_epsilon")


def _key(key):
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
        raise ConfigError("a device key is %d bytes" % KEY_BYTES)
    return bytes(key)


def provision(cfg, path, device_id, key, counter=None):
    """Start a new identity on this device: write its genesis record.

    The record fixes ``device_id``, the lifetime budget
    (``cfg["device"]["lifetime_epsilon"]``) and the first window
    (``cfg["device"]["first_epoch"]``, default 0), tagged under ``key``'s state
    key and numbered above the platform counter, then binds the identity to
    the counter's storage. Refuses (StateError) when a state file exists, or
    when ``key``'s identity is the one bound there: that identity's ledger must
    not be reset. Re-provisioning is removing the state files and provisioning
    a new device id with a new key; the board binds only the last identity,
    so an older one comes back unnoticed by the device (docs/trust.md section 6).
    """
    budget = _budget(cfg)
    key = _key(key)
    if not isinstance(device_id, str):
        raise ConfigError("device id must be a string")
    device_id_bytes(device_id)  # the frames' id rule, checked before the id is fixed for good
    first = cfg.get("device", {}).get("first_epoch", 0)
    if not isinstance(first, int) or isinstance(first, bool) or not 0 <= first < 1 << 32:
        raise ConfigError("device.first_epoch must be an integer in [0, 2**32), got %r" % (first,))
    for cand in fs.candidates(path):
        if fs.exists(cand):
            raise StateError("%s exists: this device already holds an identity's ledger; re-provisioning "
                             "needs a new device id and key and the old state files removed" % cand)
    counter = platform_counter(path) if counter is None else counter
    ident = identity(key)
    if counter.identity() == ident:
        raise StateError("already provisioned on this board; re-provision under a new id and key")
    ctr = counter.read() + 1
    save_genesis(path, HMAC256(state_key(key)), ctr, Ledger(budget), device_id, first)
    counter.bind(ident)  # a cut before this: the device refuses the unbound genesis; remove it, provision again
    counter.advance(ctr)


class Device:
    """An agent whose state and ledger persist in ``path`` (see module docstring).

    ``device_id`` and ``key`` (32 bytes) are the identity ``provision`` wrote;
    ``counter`` is the platform monotonic counter (default
    ``firmware_shims.counter.platform_counter(path)``). ``seed`` makes every
    window's noise reproducible (window e uses seed + b"-" + e): tests and
    simulation only. Raises StateError, before any window starts, when there is
    no record (not provisioned, or the state was deleted), no valid one, the
    key's identity is not the one bound to the counter, the newest valid
    record is below the platform counter (a restored copy), or it belongs to
    another device id or lifetime budget.
    """

    def __init__(self, cfg, path, device_id, key, counter=None, seed=None):
        budget = _budget(cfg)
        self.key = _key(key)
        self.cfg, self.path, self.seed, self.device_id = cfg, path, seed, device_id
        self.counter = platform_counter(path) if counter is None else counter
        self._mac = HMAC256(state_key(self.key))
        self.fp = fingerprint(cfg)
        self._unsafe = False
        found = newest(path, self._mac)
        if found is None:
            raise StateError("%s: no state record; a provisioned device without its ledger refuses to run "
                             "until it is provisioned under a new identity" % path)
        cand, hdr = found
        if self.counter.identity() != identity(self.key):
            raise StateError("%s: this board is bound to another identity or none; refusing to start" % path)
        floor = self.counter.read()
        if hdr["ctr"] < floor:
            raise StateError("%s: the newest record (number %d) is older than the platform counter (%d): "
                             "a restored copy; refusing to start" % (path, hdr["ctr"], floor))
        if hdr["device"] != device_id:
            raise StateError("%s: the record belongs to device %r, not %r" % (path, hdr["device"], device_id))
        if hdr["budget"] != [budget[0], budget[1]]:
            raise StateError("%s: device.lifetime_epsilon is %d/%d but was %d/%d at provisioning; a new budget "
                             "needs a new identity" % (path, budget[0], budget[1], hdr["budget"][0],
                                                       hdr["budget"][1]))
        fs.promote(path, cand)  # found in .tmp: the next persist would empty its only copy
        cand = path
        if hdr["ctr"] > floor:  # a persist cut before its counter step: nothing of it was sent
            self.counter.advance(hdr["ctr"])
        self.ctr = hdr["ctr"]
        self.ledger = Ledger(budget, (hdr["spent"][0], hdr["spent"][1]), hdr["releases"])
        a = restore(cand, hdr, cfg, self.fp, self._mac, self.key)
        if hdr["fp"] is None:  # genesis: the identity's first window
            self._start(hdr["epoch"], hdr["seq"])
        elif a is None:  # the config changed: the old window is dropped, never released
            self._start(hdr["epoch"] + 1, hdr["seq"] + 1)
        else:
            self.agent = a

    @property
    def sealed(self):
        """True once the current window was released (only a resend is possible)."""
        return self.agent.sealed

    def _persist(self, a, ledger):
        # record ctr + 1 first, then the platform counter: a cut between the two
        # leaves a record one ahead, which the next start accepts and catches up
        if self._unsafe:
            raise StateError("a persist failed; restart the device")
        self._unsafe = True
        if self.counter.read() != self.ctr:
            raise StateError("the platform counter moved under this device (another instance persisted)")
        ctr = self.ctr + 1
        save(self.path, self._mac, ctr, ledger, a, self.fp)
        self.counter.advance(ctr)
        self.ctr = ctr
        self._unsafe = False

    def _start(self, epoch, seq):
        self.agent = None  # the old counters go before the new ones are allocated
        seed = None if self.seed is None else bytes(self.seed) + b"-" + str(epoch).encode()
        self.agent = Agent(self.cfg, seed=seed, device_id=self.device_id, epoch=epoch, seq=seq, key=self.key)
        self._persist(self.agent, self.ledger)  # noise persisted at birth

    def update(self, x):
        self.agent.update(x)

    def checkpoint(self):
        """Persist the counters so far (a reboot then keeps these readings)."""
        if self.agent.sealed:
            raise SealedError("the window was released; call next_epoch()")
        self._persist(self.agent, self.ledger)

    def release(self, sink=None):
        """Emit the window's frame (``Agent.release`` semantics for ``sink``).

        First call: charge the ledger, seal, persist, then emit. Later calls
        (also after a reboot): the identical bytes, not charged again. After a
        failed persist every call raises StateError until the device restarts.
        """
        if self._unsafe:
            raise StateError("the sealed state was not persisted; restart the device")
        a = self.agent
        if not a.sealed:
            ledger = self.ledger.after(a.eps)
            a.release(_discard)        # seal: no update may follow
            self._persist(a, ledger)
            self.ledger = ledger
        return a.release(sink)

    def next_epoch(self):
        """Start the next window with fresh noise (after its release)."""
        if not self.agent.sealed:
            raise SealedError("release the current window before starting the next")
        self._start(self.agent.epoch + 1, self.agent.seq + 1)


def _discard(buf, n):
    pass
