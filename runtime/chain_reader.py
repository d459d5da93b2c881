"""Raw reads of stored events and their chain links, on SQLite and PostgreSQL alike.

`verify` and `export` must look at the rows as stored, not at aggregates: a tampered row may not
decode, and a deleted one is exactly what a repository read would silently skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence
from uuid import UUID

from .chain import CHAIN_TABLE, Link

_CHUNK = 500


@dataclass(frozen=True)
class RawEvent:
    position: int
    originator_id: UUID
    version: int
    topic: str
    state: bytes

    @property
    def aggregate(self) -> str:
        return topic_names(self.topic)[0]

    @property
    def event(self) -> str:
        return topic_names(self.topic)[1]


def topic_names(topic: str) -> tuple[str, str]:
    """("Turn", "StepRecorded") from "chronicle.domain.turn:Turn.StepRecorded"."""
    qualname = topic.partition(":")[2] or topic
    head, _, tail = qualname.rpartition(".")
    return (head.rpartition(".")[2] or tail, tail) if head else (qualname, qualname)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class LogReader:
    """SQL written once with `%s` marks; SQLite gets `?`, PostgreSQL gets `= ANY(...)` for lists."""

    def __init__(self, store: Any) -> None:
        self.store = store  # an Application closes its connection pool when it is collected
        self.recorder = store.recorder
        self.sqlite = store.backend == "sqlite"
        table = self.recorder.events_table_name
        if self.sqlite:
            self.events, self.chain, self.pos = table, CHAIN_TABLE, "rowid"
        else:
            schema = _quote(self.recorder.datastore.schema or "public")
            self.events, self.chain, self.pos = f"{schema}.{_quote(table)}", f"{schema}.{CHAIN_TABLE}", "notification_id"

    # -- plumbing ------------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        if self.sqlite:
            with self.recorder.datastore.transaction(commit=False) as cursor:
                cursor.execute(sql.replace("%s", "?"), list(params))
                return [tuple(r) for r in cursor.fetchall()]
        with self.recorder.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(sql, list(params))
            return [tuple(r.values()) for r in cursor.fetchall()]

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if self.sqlite:
            return f"{column} IN ({','.join(['%s'] * len(values))})", list(values)
        return f"{column} = ANY(%s)", [list(values)]

    def _oid(self, value: UUID) -> Any:
        return value.hex if self.sqlite else value

    def _link(self, row: tuple) -> Link:
        return Link(int(row[0]), int(row[1]), UUID(str(row[2])), int(row[3]), bytes(row[4]))

    def _event(self, row: tuple) -> RawEvent:
        return RawEvent(int(row[0]), UUID(str(row[1])), int(row[2]), row[3], bytes(row[4]))

    def _chunks(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        items = list(values)
        for start in range(0, len(items), _CHUNK):
            yield items[start:start + _CHUNK]

    # -- links ---------------------------------------------------------------------------------

    _LINK_COLUMNS = "seq, position, originator_id, originator_version, digest"

    def links_after(self, seq: int, limit: int) -> list[Link]:
        sql = f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE seq > %s ORDER BY seq LIMIT %s"
        return [self._link(r) for r in self._rows(sql, (seq, limit))]

    def links_of(self, originator_ids: Sequence[UUID]) -> list[Link]:
        found: list[Link] = []
        for chunk in self._chunks(self._oid(i) for i in originator_ids):
            where, params = self._in("originator_id", chunk)
            found += [self._link(r) for r in self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE {where}", params)]
        return sorted(found, key=lambda k: k.seq)

    def links_by_seq(self, seqs: Iterable[int]) -> dict[int, Link]:
        found: dict[int, Link] = {}
        for chunk in self._chunks(sorted(set(seqs))):
            where, params = self._in("seq", chunk)
            for row in self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE {where}", params):
                found[int(row[0])] = self._link(row)
        return found

    def links_at(self, positions: Iterable[int]) -> dict[int, Link]:
        found: dict[int, Link] = {}
        for chunk in self._chunks(sorted(set(positions))):
            where, params = self._in("position", chunk)
            for row in self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE {where}", params):
                found[int(row[1])] = self._link(row)
        return found

    def links_around(self, position: int) -> tuple[Link | None, Link | None]:
        """The links of the nearest chained events before and after `position`."""
        before = self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE position < %s ORDER BY position DESC LIMIT 1",
                            (position,))
        after = self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} WHERE position > %s ORDER BY position LIMIT 1",
                           (position,))
        return (self._link(before[0]) if before else None), (self._link(after[0]) if after else None)

    def head(self) -> Link | None:
        rows = self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} ORDER BY seq DESC LIMIT 1")
        return self._link(rows[0]) if rows else None

    def first(self) -> Link | None:
        rows = self._rows(f"SELECT {self._LINK_COLUMNS} FROM {self.chain} ORDER BY seq LIMIT 1")
        return self._link(rows[0]) if rows else None

    def count_links(self) -> int:
        return int(self._rows(f"SELECT COUNT(*) FROM {self.chain}")[0][0])

    # -- events --------------------------------------------------------------------------------

    def _event_columns(self, table: str = "") -> str:
        """`table`: a prefix such as "e." for a join. On SQLite the state is selected as bytes even
        where a hand edit stored it as text (store_rows.SQLITE_STATE), so that row is an edit, not a crash."""
        state = f"CAST({table}state AS BLOB)" if self.sqlite else f"{table}state"
        return f"{table}{self.pos}, {table}originator_id, {table}originator_version, {table}topic, {state}"

    def events_at(self, positions: Iterable[int]) -> dict[int, RawEvent]:
        found: dict[int, RawEvent] = {}
        for chunk in self._chunks(sorted(set(positions))):
            where, params = self._in(self.pos, chunk)
            for row in self._rows(f"SELECT {self._event_columns()} FROM {self.events} WHERE {where}", params):
                found[int(row[0])] = self._event(row)
        return found

    def events_of(self, originator_ids: Sequence[UUID]) -> list[RawEvent]:
        found: list[RawEvent] = []
        for chunk in self._chunks(self._oid(i) for i in originator_ids):
            where, params = self._in("originator_id", chunk)
            found += [self._event(r) for r in self._rows(f"SELECT {self._event_columns()} FROM {self.events} WHERE {where}", params)]
        return sorted(found, key=lambda e: e.position)

    def find_event(self, originator_id: UUID, version: int) -> RawEvent | None:
        sql = f"SELECT {self._event_columns()} FROM {self.events} WHERE originator_id = %s AND originator_version = %s"
        rows = self._rows(sql, (self._oid(originator_id), version))
        return self._event(rows[0]) if rows else None

    def any_topic(self, originator_id: UUID) -> str | None:
        rows = self._rows(f"SELECT topic FROM {self.events} WHERE originator_id = %s LIMIT 1", (self._oid(originator_id),))
        return rows[0][0] if rows else None

    def count_events(self) -> int:
        return int(self._rows(f"SELECT COUNT(*) FROM {self.events}")[0][0])

    def unlinked(self, originator_ids: Sequence[UUID] | None = None) -> list[RawEvent]:
        """Events no link vouches for: written before the chain, or slipped in since."""
        sql = (f"SELECT {self._event_columns('e.')} FROM {self.events} e "
               f"LEFT JOIN {self.chain} c ON c.position = e.{self.pos} WHERE c.seq IS NULL")
        if originator_ids is None:
            return [self._event(r) for r in self._rows(sql + f" ORDER BY e.{self.pos}")]
        found: list[RawEvent] = []
        for chunk in self._chunks(self._oid(i) for i in originator_ids):
            where, params = self._in("e.originator_id", chunk)
            found += [self._event(r) for r in self._rows(f"{sql} AND {where}", params)]
        return sorted(found, key=lambda e: e.position)

    def unlinked_positions(self) -> list[int]:
        """Positions of unlinked events without reading their payloads (a v1 store may be large)."""
        sql = (f"SELECT e.{self.pos} FROM {self.events} e LEFT JOIN {self.chain} c ON c.position = e.{self.pos} "
               f"WHERE c.seq IS NULL ORDER BY e.{self.pos}")
        return [int(r[0]) for r in self._rows(sql)]
