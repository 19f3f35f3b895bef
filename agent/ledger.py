"""The device's privacy ledger, and a device that persists state and ledger.

    d = Device(cfg, "state.bin", device_id="gw-17")  # restores, or starts epoch 0
    d.update(reading)
    d.checkpoint()            # optional: survive a reboot without losing readings
    n = d.release(sink)       # charges the ledger, persists, then emits the frame
    d.next_epoch()            # a fresh agent with fresh noise for the next window

Rules (privacy rule 5, docs/trust.md):

* every release charges the frame's epsilon to the ledger, and a release that
  would take the total above ``device.lifetime_epsilon`` raises BudgetError
  before anything is sealed or sent;
* the charge, the sealed flag and the counters are written in one atomic
  record (agent/persist.py) *before* the frame is emitted, so a power cut
  during the send cannot spend budget unrecorded, and a reboot finds the state
  sealed and can only resend the same bytes (a resend is free: not charged);
* a new window is a new Agent with fresh noise, persisted at birth, so a
  reboot restores its noise instead of drawing new noise for the same window.

Epsilon is kept as an exact fraction of integers (no floats on the device).
"""
from agent.device import ratio
from agent.errors import BudgetError, SealedError
from agent.persist import StateError, fingerprint, load, save


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


class Device:
    """An agent whose state and ledger persist in ``path`` (see module docstring).

    ``cfg["device"]["lifetime_epsilon"]`` = [num, den] is required. ``seed``
    makes every window's noise reproducible (window e uses seed + b"-" + e):
    tests and simulation only. Raises StateError when a state file exists but
    no copy is valid: the ledger is unknown, so the device must not release.
    """

    def __init__(self, cfg, path, device_id="device", key=None, seed=None):
        dev = cfg.get("device", {})
        budget = ratio(dev.get("lifetime_epsilon"), "device.lifetime_epsilon")
        self.cfg, self.path, self.key, self.seed = cfg, path, key, seed
        self.device_id = device_id
        self.fp = fingerprint(cfg)
        self._unsafe = False
        rec = load(path, cfg, self.fp, key)
        if rec is None:
            self.ledger = Ledger(budget)
            self._start(dev.get("first_epoch", 0), 0)
            return
        hdr, a = rec
        self.ledger = Ledger(budget, (hdr["spent"][0], hdr["spent"][1]), hdr["releases"])
        if a is None:  # the config changed: the old window is dropped, never released
            self._start(hdr["epoch"] + 1, hdr["seq"] + 1)
        else:
            self.agent = a

    @property
    def sealed(self):
        """True once the current window was released (only a resend is possible)."""
        return self.agent.sealed

    def _start(self, epoch, seq):
        import agent
        self.agent = None  # the old counters go before the new ones are allocated
        seed = None if self.seed is None else bytes(self.seed) + b"-" + str(epoch).encode()
        self.agent = agent.Agent(self.cfg, seed=seed, device_id=self.device_id, epoch=epoch, seq=seq, key=self.key)
        save(self.path, self.agent, self.ledger, self.fp)  # noise persisted at birth

    def update(self, x):
        self.agent.update(x)

    def checkpoint(self):
        """Persist the counters so far (a reboot then keeps these readings)."""
        if self.agent.sealed:
            raise SealedError("the window was released; call next_epoch()")
        save(self.path, self.agent, self.ledger, self.fp)

    def release(self, sink=None):
        """Emit the window's frame (``Agent.release`` semantics for ``sink``).

        First call: charge the ledger, seal, persist, then emit. Later calls
        (also after a reboot): the identical bytes, not charged again.
        """
        if self._unsafe:
            raise StateError("the sealed state was not persisted; restart the device")
        a = self.agent
        if not a.sealed:
            ledger = self.ledger.after(a.eps)
            a.release(_discard)        # seal: no update may follow
            self._unsafe = True        # sealed in RAM but not yet on flash
            save(self.path, a, ledger, self.fp)
            self.ledger = ledger
            self._unsafe = False
        return a.release(sink)

    def next_epoch(self):
        """Start the next window with fresh noise (after its release)."""
        if not self.agent.sealed:
            raise SealedError("release the current window before starting the next")
        self._start(self.agent.epoch + 1, self.agent.seq + 1)


def _discard(buf, n):
    pass

