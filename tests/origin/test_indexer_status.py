"""SEM-7: what `/ready` says of the indexer child before and after its first report, in the
worker that runs it and in the other workers of `serve --workers N` (the published file)."""

from __future__ import annotations

from pathlib import Path

from origin.semantic_task import IndexerTask, shared_status

MODEL = {"provider": "test", "model": "m", "revision": "r", "dimensions": 4}


def test_sem7_index_lag_is_null_until_the_indexer_child_reported(tmp_path: Path) -> None:
    published = tmp_path / "indexer.json"
    other_worker = shared_status(published, MODEL)
    task = IndexerTask("unused", "off", MODEL, shared=published)  # never started
    assert task.status()["index_lag"] is None  # nothing reported: unknown, not caught up
    assert other_worker()["index_lag"] is None  # nothing published yet
    task._report(b'{"index_lag": 3, "facts_indexed": 1, "errors": 0, "last_error": null}\n')
    assert task.status()["index_lag"] == 3 and task.status()["semantic_model"] == MODEL
    assert other_worker() == task.status()
    task._report(b"not json\n")  # a line that is not a status changes nothing
    assert other_worker()["index_lag"] == 3
