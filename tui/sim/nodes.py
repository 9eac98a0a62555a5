"""Multi-node for the simulated server: SGLang's `--nnodes N --node-rank R --dist-init-addr HOST:PORT`.

Node 0 (the head) listens at the init address the way torch.distributed's TCP store does, and waits until every
other node has joined; each node says when its own bring-up is done, and the head serves only once all have. The
connections stay open for the life of the run, standing in for NCCL's: a node that dies closes its end, and the
other side learns of it as a real cluster does. The head does not fail at once: it hangs in its next collective
until the watchdog fires (`--watchdog-timeout`), which is why a worker's death must be read off the worker's own
journal. A worker whose head is gone dies of an NCCL error. Stdlib only, like the rest of the simulator.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class Head:
    """Node 0: the rendezvous point. `on_lost(rank)` is called once, from a reader thread, when a node leaves."""

    def __init__(self, addr: str, nnodes: int, on_lost: Callable[[int], None]) -> None:
        self.nnodes, self.on_lost = nnodes, on_lost
        self.peers: dict[int, socket.socket] = {}
        self.ready: set[int] = set()
        self.cond = threading.Condition()
        host, port = split_addr(addr)
        self.sock = socket.create_server((host, port), reuse_port=False, backlog=nnodes)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        rank = -1
        buf = b""
        while True:
            try:
                chunk = conn.recv(256)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                word, _, arg = line.decode(errors="replace").partition(" ")
                with self.cond:
                    if word == "hello":
                        rank = int(arg)
                        self.peers[rank] = conn
                    elif word == "ready" and rank >= 0:
                        self.ready.add(rank)
                    self.cond.notify_all()
        if rank >= 0:
            self.on_lost(rank)

    def wait_joined(self) -> None:
        """Init torch distributed: blocks until every node has joined (a node that never comes hangs it)."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.peers) >= self.nnodes - 1)

    def wait_ready(self) -> None:
        with self.cond:
            self.cond.wait_for(lambda: len(self.ready) >= self.nnodes - 1)

    def close(self) -> None:
        self.sock.close()
        for c in list(self.peers.values()):
            c.close()


class Worker:
    """Node R > 0: joins the head (retrying while the head is not up yet) and reports its bring-up done."""

    def __init__(self, addr: str, rank: int, on_lost: Callable[[], None]) -> None:
        self.addr, self.rank, self.on_lost = addr, rank, on_lost
        self.sock: socket.socket | None = None

    def join(self) -> None:
        host, port = split_addr(self.addr)
        while True:  # torch's TCP store client retries until the head's store is up
            try:
                self.sock = socket.create_connection((host, port), timeout=2.0)
                break
            except OSError:
                time.sleep(0.2)
        self.sock.settimeout(None)
        self.sock.sendall(f"hello {self.rank}\n".encode())
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        assert self.sock is not None
        while True:
            try:
                if not self.sock.recv(256):
                    break
            except OSError:
                break
        self.on_lost()

    def ready(self) -> None:
        if self.sock is not None:
            self.sock.sendall(b"ready\n")
