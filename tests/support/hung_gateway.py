"""A gateway that hangs: it accepts every connection and never answers (what a stuck server looks like to
a hook, a host's HTTP hook or a client)."""

from __future__ import annotations

import socket
import threading

from tests.support.ports import listening_socket, url_of


class HungGateway:
    """A listening socket that accepts every connection and never answers (counts them)."""

    def __init__(self) -> None:
        self.sock = listening_socket()
        self.sock.settimeout(0.1)
        self.url = url_of(self.sock)
        self.accepted = 0
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)  # held open, never read, never answered

    def stop_answering_nothing(self) -> socket.socket:
        """Stop accepting (the socket keeps listening) and cut the held connections."""
        self._stop.set()
        self._thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.settimeout(None)
        return self.sock
