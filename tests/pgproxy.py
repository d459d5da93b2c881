"""A loopback TCP proxy in front of PostgreSQL that a test can cut and restore.

Cutting closes every open connection and stops accepting new ones (connections are refused),
which is what a restarted database or a broken network looks like to the client.

`cut(counted=True)` closes every open connection too, but then accepts each new one and closes
it at once, before PostgreSQL's greeting (the client's login fails as when it is refused), and
counts it in `turned_away`: a test waits on that count to know that a client has found its
connection lost and is trying again, instead of sleeping "long enough" for it.
"""

from __future__ import annotations

import socket
import threading


class CuttableProxy:
    def __init__(self, target_host: str = "127.0.0.1", target_port: int = 5432) -> None:
        self.target = (target_host, target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        #: Set by `cut(counted=True)`: new connections are closed at once and counted in `turned_away`.
        self._counting = False
        self.turned_away = 0
        self.restore()

    def restore(self) -> None:
        with self._lock:
            self._counting = False
            if self._listener is not None:  # cut(counted=True) kept it listening
                return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self, counted: bool = False) -> None:
        """Close every connection and refuse new ones; `counted`: accept each new one, close it at once and count it."""
        with self._lock:
            self._counting, self.turned_away = counted, 0
            if self._listener is not None and not counted:
                try:
                    self._listener.shutdown(socket.SHUT_RDWR)  # wakes its accept: closing alone left it accepting once more
                except OSError:
                    pass
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._sockets.clear()

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                if self._counting:
                    client.close()
                    self.turned_away += 1
                    continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
