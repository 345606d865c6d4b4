"""What the deploy suite's tests share: the stack's address, a free port, a program of Debian's,
a wait, and a statement run by the mariadb client."""
import os
import shutil
import socket
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run this suite through tools/test, which starts the stack")
    return value


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name):
    # Debian installs nats-server in /usr/sbin, which a user's PATH may lack.
    for path in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError(f"{name} is not installed (tools/test installs it)")


def until(check, seconds, what):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.2)


def sql(database, statement):
    """`statement` run by the mariadb client in `database` (None: none) of the test stack."""
    argv = ["mariadb", "-h", env("OUTBOX_TEST_MYSQL_HOST"), "-P", env("OUTBOX_TEST_MYSQL_PORT"),
            "-u", env("OUTBOX_TEST_MYSQL_USER"), "-N", "-B", "-e", statement] + ([database] if database else [])
    out = subprocess.run(argv, capture_output=True, text=True,
                         env={**os.environ, "MYSQL_PWD": env("OUTBOX_TEST_MYSQL_PASSWORD")})
    if out.returncode != 0:
        raise RuntimeError(f"{statement[:200]}: {out.stderr}")
    return out.stdout.strip()
