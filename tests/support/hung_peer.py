"""A TCP peer that accepts connections and never answers: a hung dependency (a SIGSTOPped
server looks the same to its clients: the kernel completes the handshake, nothing replies)."""

from __future__ import annotations

import socket
import threading


class HungPeer:
    def __init__(self, port: int = 0) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)  # kept open, never read from or written to

    @property
    def accepted(self) -> int:
        """Connections taken so far (each one a client now waiting for an answer)."""
        return len(self._held)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for conn in self._held:
            conn.close()
        self._sock.close()
