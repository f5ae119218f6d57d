"""On-disk cache of validated LLM answers (SQLite in the user cache directory).

Key: sha256 over kernel hash + GPU + provider + endpoint + model + prompt version + engine version
+ task + the digest of the exact prompt, so re-opening a file, or editing a different kernel in
it, asks the model nothing, while any change to what we would ask asks again.

Only the model's validated answer is stored, with its token usage and a few labels for `stats`;
never a request, a header or a key. Least-recently-used entries are evicted past a size cap.
Calls are synchronous and short; async callers run them with `asyncio.to_thread`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import platformdirs

CACHE_FILE_NAME = "llm-cache.sqlite3"
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
CACHE_DIR_ENV = "PERFLSP_CACHE_DIR"
_SCHEMA_VERSION = 1


def default_cache_path() -> Path:
    """$PERFLSP_CACHE_DIR/llm-cache.sqlite3, else the platform's user cache dir for perflsp."""
    folder = os.environ.get(CACHE_DIR_ENV) or platformdirs.user_cache_dir("perflsp", appauthor=False)
    return Path(folder) / CACHE_FILE_NAME


@dataclass(frozen=True, slots=True)
class CacheKey:
    kernel_hash: str
    gpu: str
    provider: str
    endpoint: str  # display form, without credentials
    model: str
    prompt_version: str
    engine_version: str
    task: str
    prompt_digest: str

    def digest(self) -> str:
        fields = [
            self.kernel_hash,
            self.gpu,
            self.provider,
            self.endpoint,
            self.model,
            self.prompt_version,
            self.engine_version,
            self.task,
            self.prompt_digest,
        ]
        return hashlib.sha256("\x1f".join(fields).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheEntry:
    payload: str  # JSON: the validated answer (or explanation text) and its usage
    created: float
    hits: int


@dataclass(frozen=True, slots=True)
class CacheStats:
    path: str
    entries: int
    payload_bytes: int
    file_bytes: int
    max_bytes: int
    hits: int
    by_model: dict[str, int]
    by_task: dict[str, int]
    oldest: float | None
    newest: float | None

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "entries": self.entries,
            "payload_bytes": self.payload_bytes,
            "file_bytes": self.file_bytes,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "by_model": self.by_model,
            "by_task": self.by_task,
            "oldest": self.oldest,
            "newest": self.newest,
        }


class CacheError(RuntimeError):
    pass


class VerdictCache:
    def __init__(self, path: Path | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = Path(path) if path is not None else default_cache_path()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._ready = False

    # -- connection ---------------------------------------------------------------------------
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                if not self._ready:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=5.0)
            except (OSError, sqlite3.Error) as exc:
                raise CacheError(f"cannot open the LLM cache at {self.path}: {exc}") from None
            try:
                if not self._ready:
                    self._init(conn)
                    self._ready = True
                with conn:
                    yield conn
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"the LLM cache at {self.path} is unusable: {exc}") from None
            finally:
                conn.close()

    @staticmethod
    def _init(conn: sqlite3.Connection) -> None:
        conn.execute(
            """CREATE TABLE IF NOT EXISTS entries (
                   key TEXT PRIMARY KEY,
                   payload TEXT NOT NULL,
                   size_bytes INTEGER NOT NULL,
                   model TEXT NOT NULL,
                   gpu TEXT NOT NULL,
                   task TEXT NOT NULL,
                   created REAL NOT NULL,
                   last_used REAL NOT NULL,
                   hits INTEGER NOT NULL DEFAULT 0
               )"""
        )
        conn.execute("CREATE INDEX IF NOT EXISTS entries_last_used ON entries(last_used)")
        conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        conn.commit()

    # -- operations ---------------------------------------------------------------------------
    def get(self, key: CacheKey) -> CacheEntry | None:
        digest = key.digest()
        with self._db() as conn:
            row = conn.execute(
                "SELECT payload, created, hits FROM entries WHERE key = ?", (digest,)
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE entries SET last_used = ?, hits = hits + 1 WHERE key = ?", (time.time(), digest)
            )
            return CacheEntry(row[0], row[1], row[2] + 1)

    def put(self, key: CacheKey, payload: str) -> None:
        json.loads(payload)  # only JSON documents go in: a cheap guard against storing anything else
        size = len(payload.encode("utf-8"))
        now = time.time()
        with self._db() as conn:
            conn.execute(
                """INSERT OR REPLACE INTO entries
                   (key, payload, size_bytes, model, gpu, task, created, last_used, hits)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)""",
                (key.digest(), payload, size, key.model, key.gpu, key.task, now, now),
            )
            self._evict(conn)

    def _evict(self, conn: sqlite3.Connection) -> None:
        total = conn.execute("SELECT COALESCE(SUM(size_bytes), 0) FROM entries").fetchone()[0]
        if total <= self.max_bytes:
            return
        for key, size in conn.execute(
            "SELECT key, size_bytes FROM entries ORDER BY last_used ASC, created ASC"
        ).fetchall():
            conn.execute("DELETE FROM entries WHERE key = ?", (key,))
            total -= size
            if total <= self.max_bytes:
                break

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        with self._db() as conn:
            count = conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            conn.execute("DELETE FROM entries")
        with self._db() as conn:
            conn.isolation_level = None
            conn.execute("VACUUM")  # give the space back
        return count

    def stats(self) -> CacheStats:
        if not self.path.exists():
            return CacheStats(str(self.path), 0, 0, 0, self.max_bytes, 0, {}, {}, None, None)
        with self._db() as conn:
            entries, payload_bytes, hits, oldest, newest = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size_bytes), 0), COALESCE(SUM(hits), 0), "
                "MIN(created), MAX(created) FROM entries"
            ).fetchone()
            by_model = dict(conn.execute("SELECT model, COUNT(*) FROM entries GROUP BY model"))
            by_task = dict(conn.execute("SELECT task, COUNT(*) FROM entries GROUP BY task"))
        return CacheStats(
            str(self.path),
            entries,
            payload_bytes,
            self.path.stat().st_size,
            self.max_bytes,
            hits,
            by_model,
            by_task,
            oldest,
            newest,
        )
