"""Which store a ``--store`` target names: every command opens its store
through ``connect`` (es.connect_store). Its own module, not fleet.store's:
fleet.pgstore imports fleet.store (the rules and reading code both backends
share), so only a third module may know both without an import cycle."""
from edgesynth.fleet.pgstore import PgStore, is_url
from edgesynth.fleet.store import Store


def connect(target, create=False):
    """The open store at ``target``: a SQLite file path (fleet.store.Store),
    or a postgresql:// or postgres:// URL (fleet.pgstore.PgStore: the same
    rules for several concurrent writers; psycopg is imported only then).
    ``create=True`` (writers) creates the store if missing."""
    if is_url(target):
        return PgStore(target, create=create)
    return Store(target, create=create)
