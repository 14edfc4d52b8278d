"""SEM-7: the indexer's loop lowers its own thread's CPU priority, not its process's."""

from __future__ import annotations

import os
import threading

import pytest

from aidememo.service.semantic_indexer import NICE, _lower_priority


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no thread priorities here")
def test_sem7_indexer_thread_yields_the_cpu_to_the_rest_of_the_process() -> None:
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def indexer_thread() -> None:
        _lower_priority(NICE)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=indexer_thread)
    thread.start()
    thread.join()
    assert seen == [min(19, main + NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main
