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
