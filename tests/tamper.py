"""Raw SQL on a store's tables, as someone with database access would tamper with them."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import parse_qs, urlparse
from uuid import UUID


class Tamper:
    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:")
        if self.sqlite:
            self.events, self.chain, self.pos = "stored_events", "chronicle_chain", "rowid"
            self.prefix = ""
        else:
            schema = parse_qs(urlparse(url).query)["schema"][0]
            self.events, self.chain, self.pos = f'"{schema}".chronicle_events', f'"{schema}".chronicle_chain', "notification_id"
            self.prefix = f'"{schema}".'

    def table(self, name: str) -> str:
        """Another of the store's tables (a read model's), named as a query on this backend must name it."""
        return self.prefix + name

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        if self.sqlite:
            conn = sqlite3.connect(self.url[len("sqlite://"):])
            try:
                rows = conn.execute(sql.replace("%s", "?"), params).fetchall()
                conn.commit()
                return rows
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.url.split("?")[0], autocommit=True) as conn:
            cur = conn.execute(sql, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def positions(self) -> list[int]:
        return [r[0] for r in self.run(f"SELECT {self.pos} FROM {self.events} ORDER BY {self.pos}")]

    def event(self, position: int) -> tuple[UUID, int, str, bytes]:
        oid, version, topic, state = self.run(
            f"SELECT originator_id, originator_version, topic, state FROM {self.events} WHERE {self.pos} = %s", (position,))[0]
        return UUID(str(oid)), version, topic, bytes(state)

    def set_state(self, position: int, state: bytes) -> None:
        self.run(f"UPDATE {self.events} SET state = %s WHERE {self.pos} = %s", (state, position))

    def delete(self, position: int) -> None:
        self.run(f"DELETE FROM {self.events} WHERE {self.pos} = %s", (position,))

    def swap(self, a: int, b: int) -> None:
        self.run(f"UPDATE {self.events} SET {self.pos} = -1 WHERE {self.pos} = %s", (a,))
        self.run(f"UPDATE {self.events} SET {self.pos} = %s WHERE {self.pos} = %s", (a, b))
        self.run(f"UPDATE {self.events} SET {self.pos} = %s WHERE {self.pos} = -1", (b,))

    def insert(self, oid: UUID, version: int, topic: str, state: bytes) -> int:
        key = oid.hex if self.sqlite else oid
        self.run(f"INSERT INTO {self.events} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)",
                 (key, version, topic, state))
        return self.positions()[-1]

    def link(self, seq: int) -> tuple[int, bytes]:
        position, digest = self.run(f"SELECT position, digest FROM {self.chain} WHERE seq = %s", (seq,))[0]
        return position, bytes(digest)

    def links(self) -> list[tuple[int, int, bytes]]:
        return [(r[0], r[1], bytes(r[2])) for r in self.run(f"SELECT seq, position, digest FROM {self.chain} ORDER BY seq")]

    def set_digest(self, seq: int, digest: bytes) -> None:
        self.run(f"UPDATE {self.chain} SET digest = %s WHERE seq = %s", (digest, seq))
