"""A throwaway PostgreSQL server for the tests and benchmarks of the
PostgreSQL store (Debian's ``postgresql`` package; .ci/run installs it).

    from tests.pg_server import Server
    srv = Server()            # initdb into a temp dir, start postgres on a free loopback port
    url = srv.database("t1")  # a fresh database; its postgresql:// URL (with the password)
    srv.stop()                # stop the server and delete its directory

The cluster is made with ``initdb`` and run with ``postgres -k DIR -p PORT -c
listen_addresses=127.0.0.1``; as root (postgres refuses to run as root) both
run as user ``nobody``. Connections over TCP need the password (SCRAM), so
the tests see the password path; the URLs carry it. ``fsync=False`` trades
durability for speed (the tests kill nothing but backends); benchmarks keep
the default, fsync on.
"""
import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

USER, PASSWORD = "edgesynth", "s3cret-pw"


def binaries():
    """The directory holding initdb and postgres (the newest installed), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[4].split(".")])
    if found:
        return os.path.dirname(found[-1])
    exe = shutil.which("postgres")
    return os.path.dirname(exe) if exe and shutil.which("initdb") else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A postgres process on 127.0.0.1:``port`` with its cluster in a temp dir."""

    def __init__(self, fsync=True):
        bindir = binaries()
        if bindir is None:
            raise FileNotFoundError("PostgreSQL server binaries not found (apt-get install postgresql)")
        self.dir = tempfile.mkdtemp(prefix="edgesynth-pg-")
        try:  # the directory holds the password file: never left behind by a failed initdb
            self.user = {}
            if os.geteuid() == 0:
                pw = pwd.getpwnam("nobody")
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
                self.user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
            data = os.path.join(self.dir, "data")
            pwfile = os.path.join(self.dir, "pw")
            with open(pwfile, "w") as fh:
                fh.write(PASSWORD + "\n")
            if self.user:
                os.chown(pwfile, self.user["user"], self.user["group"])
            subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-U", USER, "--pwfile", pwfile,
                            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                            "--no-sync"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           cwd=self.dir, **self.user)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.port = free_port()
        cmd = [os.path.join(bindir, "postgres"), "-D", data, "-k", self.dir, "-p", str(self.port),
               "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=50"]
        if not fsync:
            cmd += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        self.log = open(os.path.join(self.dir, "postgres.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir, **self.user)
        atexit.register(self.stop)  # a run that dies before stop() leaves no server behind
        self.url = "postgresql://%s:%s@127.0.0.1:%d/postgres" % (USER, PASSWORD, self.port)
        self._wait()
        with self.admin() as db:
            self.version = db.execute("SHOW server_version").fetchone()[0]

    def _wait(self):
        import psycopg
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited: %s" % open(self.log.name, errors="replace").read()[-2000:])
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def admin(self):
        """An autocommit psycopg connection to the ``postgres`` database (a context manager)."""
        import psycopg
        return psycopg.connect(self.url, autocommit=True)

    def database(self, name):
        """Create an empty database ``name``; its URL (with the password)."""
        with self.admin() as db:
            db.execute('CREATE DATABASE "%s"' % name)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def stop(self):
        if self.log.closed:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
