"""How many requests a second can the results store take, on SQLite and on PostgreSQL, from 1 and 4 writers?

Each writer is a process of its own (as separate ``tokometer bench`` processes are): it opens the store,
creates a run and appends ``--records`` finished requests through `ResultStore.append` (the writer thread
batches whatever is queued into one transaction), then flushes. Each request carries 128 event stamps
(2 KiB packed), like a 128-token answer. The figure is all writers' records over the wall time from the
common start to the last flush, best of ``--repeat`` rounds, each round on a fresh store.

    .venv/bin/python bench/store_throughput.py [--records 20000] [--repeat 2] \\
        [--postgres postgresql+psycopg://tokometer:tokometer@127.0.0.1:5432/tokometer_test]

The PostgreSQL user must be allowed to CREATE DATABASE (scripts/test-postgres sets one up); without a
server only SQLite is measured.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_WRITER = """
import sys, time
from tokometer.records import RequestRecord
from tokometer.store import ResultStore
url, records, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
store = ResultStore(url)
run_id = store.create_run(target="t", api="openai-chat", model="m", spec={}, engine=None, host=None)
stamps = list(range(1_000_000, 1_000_000 + 128 * 1000, 1000))
made = [RequestRecord(index=i, due_ns=i, sent_ns=i + 1, first_token_ns=stamps[0], last_token_ns=stamps[-1],
                      end_ns=stamps[-1] + 1, event_ns=stamps, event_tokens=[1.0] * 128, chunk_count=128,
                      output_tokens=128, output_tokens_source="usage", status=200, finish_reason="length")
        for i in range(records)]
time.sleep(max(0.0, start - time.time()))
for record in made:
    store.append(run_id, record)
store.flush()
print(time.time())
store.close()
"""


def _round(url: str, writers: int, records: int) -> float:
    """Records per second of ``writers`` processes appending ``records`` each to the store at ``url``."""
    from tokometer.store import ResultStore

    ResultStore(url).close()  # created and migrated before the clock starts
    start = time.time() + 3.0  # every writer has imported and built its records by then
    processes = [subprocess.Popen([sys.executable, "-c", _WRITER, url, str(records), str(start)],
                                  stdout=subprocess.PIPE, text=True) for _ in range(writers)]
    ends = [float(p.communicate()[0].split()[-1]) for p in processes]
    if any(p.returncode for p in processes):
        raise SystemExit("a writer failed")
    return writers * records / (max(ends) - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="requests each writer appends")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--postgres", default="postgresql+psycopg://tokometer:tokometer@127.0.0.1:5432/tokometer_test")
    args = parser.parse_args()
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect():
            pass
    except SQLAlchemyError as exc:
        print(f"PostgreSQL not measured: {str(exc).splitlines()[0]}")
        admin.dispose()
        admin = None  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as directory:
        for backend in ("sqlite", "postgresql"):
            if backend == "postgresql" and admin is None:
                continue
            for writers in (1, 4):
                best = 0.0
                for _ in range(args.repeat):
                    if backend == "sqlite":
                        url = f"sqlite:///{Path(directory) / uuid.uuid4().hex / 'runs.db'}"
                        best = max(best, _round(url, writers, args.records))
                        continue
                    name = f"tokometer_b_{uuid.uuid4().hex[:12]}"
                    with admin.connect() as conn:
                        conn.execute(text(f'CREATE DATABASE "{name}"'))
                    try:
                        url = make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
                        best = max(best, _round(url, writers, args.records))
                    finally:
                        with admin.connect() as conn:
                            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
                print(f"{backend:10} {writers} writer{'s' if writers > 1 else ' '}: {best:9,.0f} records/s "
                      f"({writers} x {args.records:,} records)", flush=True)
    if admin is not None:
        admin.dispose()


if __name__ == "__main__":
    main()
