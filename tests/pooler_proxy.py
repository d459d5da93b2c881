"""A loopback proxy in front of PostgreSQL that treats libpq's `options` startup parameter as
PgBouncer does: refused at login (PgBouncer's default: "unsupported startup parameter: options")
or dropped before the login reaches the server (`ignore_startup_parameters = options`).

Only the start of a connection is read: an SSL or GSS encryption request is declined as a server
without TLS declines it, then the startup message is checked or rewritten; everything after it
is relayed as it comes. Like PgBouncer in session mode, the server sees one login per client.
"""

from __future__ import annotations

import socket
import struct
import threading

from tests.pgproxy import CuttableProxy

SSL_REQUEST, GSS_REQUEST = 80877103, 80877104


class OptionsPooler:
    def __init__(self, mode: str, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        assert mode in ("refuse", "ignore")
        self.mode, self.target = mode, target
        self.logins_with_options = 0
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, direct: str) -> str:
        """`direct` (a postgresql:// URL to `target`) through this proxy."""
        return direct.replace(f":{self.target[1]}/", f":{self.port}/", 1)

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            message = self._startup(client)
            if message is None:
                client.close()
                return
            params = _parameters(message[8:])
            if "options" in params:
                self.logins_with_options += 1
                if self.mode == "refuse":
                    client.sendall(_error("unsupported startup parameter: options"))
                    client.close()
                    return
                del params["options"]
                message = _startup_message(struct.unpack("!I", message[4:8])[0], params)
            upstream = socket.create_connection(self.target)
            self._sockets.append(upstream)
            upstream.sendall(message)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=CuttableProxy._pipe, args=(a, b), daemon=True).start()
        except OSError:
            client.close()

    @staticmethod
    def _startup(client: socket.socket) -> bytes | None:
        """The startup message, after declining any encryption request before it."""
        while True:
            head = _read(client, 8)
            if head is None:
                return None
            length, code = struct.unpack("!II", head)
            if code in (SSL_REQUEST, GSS_REQUEST) and length == 8:
                client.sendall(b"N")
                continue
            rest = _read(client, length - 8)
            return None if rest is None else head + rest


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _parameters(body: bytes) -> dict[str, str]:
    parts = body.split(b"\x00")
    pairs = [p.decode() for p in parts[:-2]] if len(parts) > 2 else []
    return dict(zip(pairs[0::2], pairs[1::2], strict=True))


def _startup_message(protocol: int, params: dict[str, str]) -> bytes:
    body = struct.pack("!I", protocol) + b"".join(k.encode() + b"\x00" + v.encode() + b"\x00" for k, v in params.items()) + b"\x00"
    return struct.pack("!I", len(body) + 4) + body


def _error(message: str) -> bytes:
    fields = b"SFATAL\x00VFATAL\x00C08P01\x00M" + message.encode() + b"\x00\x00"
    return b"E" + struct.pack("!I", len(fields) + 4) + fields
