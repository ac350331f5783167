"""The host-memory ceiling: a block that grows past it is interrupted, and pages glibc keeps
after a free are handed back before the process is called over it."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hpo.train import memory


def test_the_watcher_interrupts_a_block_that_grows_past_the_ceiling():
    resident = memory.resident_mb()
    memory.set_memory_ceiling(resident + 200)
    try:
        with (
            pytest.raises(memory.HostMemoryExceeded, match="out of memory"),
            memory.guard_host_memory(),
        ):
            hoard = []
            for _ in range(150):  # up to 1.2 GiB, 8 MiB at a time, touched so it is resident
                hoard.append(np.ones(2**20))
                # a step's pace: the watcher samples every 50 ms, even on a busy machine
                time.sleep(0.005)
            pytest.fail("the block grew past its ceiling without being stopped")
        assert len(hoard) < 150
    finally:
        memory.set_memory_ceiling(None)


def test_freed_memory_glibc_keeps_does_not_count_against_the_ceiling():
    """glibc keeps freed heap pages for reuse (fast steps), and they count as resident: the
    ceiling hands them back before it calls the process over."""
    before = memory.resident_mb()
    blocks = [np.ones(8192) for _ in range(4096)]  # 64 KiB each: from the heap, 256 MiB touched
    last = blocks.pop()  # still live at the heap's top, so freeing the rest cannot shrink it
    del blocks
    ceiling = before + 100
    assert memory.resident_mb() > ceiling, "glibc kept the freed pages resident"
    memory.set_memory_ceiling(ceiling)
    try:
        assert memory.over_ceiling() is None
        assert memory.resident_mb() < ceiling
        with memory.guard_host_memory():  # leaving a guarded block checks the same way
            pass
    finally:
        memory.set_memory_ceiling(None)
    assert last.sum() == 8192
