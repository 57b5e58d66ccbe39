"""``DataLayout``'s record of export locations (``exports.json``): writers that finish together lose nothing."""

import multiprocessing
import threading

from pipeline.store.layout import DataLayout

WRITERS = 8
EACH = 25


def _write(root: str, writer: int) -> None:
    layout = DataLayout.at(root)
    for i in range(EACH):
        layout.record_export(f"rollouts-w{writer}-{i}", layout.root / f"export-{writer}-{i}", version=str(i))


def _expected(root) -> dict:
    return {f"rollouts-w{w}-{i}": root / f"export-{w}-{i}" for w in range(WRITERS) for i in range(EACH)}


def test_threads_recording_exports_together_lose_no_record(tmp_path):
    threads = [threading.Thread(target=_write, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert DataLayout.at(tmp_path).recorded_exports() == _expected(tmp_path)


def test_processes_recording_exports_together_lose_no_record(tmp_path):
    context = multiprocessing.get_context("spawn")  # separate interpreters, as two Dagster steps are
    procs = [context.Process(target=_write, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert DataLayout.at(tmp_path).recorded_exports() == _expected(tmp_path)
    assert not list(tmp_path.glob(".exports.json.*[0-9]"))  # no temporary file left behind


def test_a_full_disk_is_one_line_naming_the_path_and_the_bytes(tmp_path):
    """``disk_full``: the OS's ENOSPC, sqlite's "database or disk is full" and DuckDB's own words are one line naming
    the path (the one the error quotes, else the data root), the bytes free and the bytes a run needs; other errors,
    and sqlite's "disk I/O error" on a disk with room, are not (issue 52, item 3)."""
    from pipeline.store.layout import DEFAULT_RUN_BYTES, disk_full

    line = disk_full(f"OSError: [Errno 28] No space left on device: '{tmp_path / 'x.parquet'}'", tmp_path)
    assert line is not None and line.startswith(f"out of space writing {tmp_path / 'x.parquet'}: ")
    assert " bytes free of " in line and f"needs about {DEFAULT_RUN_BYTES:,} bytes" in line and "\n" not in line
    sqlite = disk_full("sqlite3.OperationalError: database or disk is full", tmp_path)
    assert sqlite is not None and sqlite.startswith(f"out of space writing {tmp_path}: ")
    assert disk_full("ValueError: no such column", tmp_path) is None
    assert disk_full("sqlite3.OperationalError: disk I/O error", tmp_path) is None  # this disk has room
