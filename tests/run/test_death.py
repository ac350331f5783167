"""How a worker died, in words (hpo.run.death): the words follow the evidence (the signal, the
peak memory against the ceiling, the kernel's OOM killer), and the peak is read from /proc."""

from __future__ import annotations

import os
import signal

import pytest


@pytest.mark.parametrize(
    ("peak", "ceiling", "ran", "words"),
    [
        (900, 8000, True, "out of memory: the kernel's OOM killer ran, peak RSS 0.9 GB of its"),
        (7500, 8000, None, "out of memory: peak RSS 7.3 GB of its 7.8 GB ceiling"),
        (900, 8000, None, "no sign of running out of memory (peak RSS 0.9 GB of its 7.8 GB"),
        (None, None, False, "(peak RSS not seen; the kernel's OOM killer did not run)"),
    ],
)
def test_sigkill_words_follow_the_evidence(peak, ceiling, ran, words):
    from hpo.run.death import death_words

    assert words in death_words(-signal.SIGKILL, peak, ceiling, ran)
    assert death_words(-signal.SIGTERM, peak, ceiling, ran) == "killed by signal 15 (SIGTERM)"
    assert death_words(3, peak, ceiling, ran) == "exit code 3"


def test_the_peak_memory_is_read_while_the_process_lives_and_none_once_it_is_gone():
    from hpo.run.death import peak_resident_mb

    here = peak_resident_mb(os.getpid())
    assert here is not None and here > 1  # this interpreter holds more than a MiB
    with open("/proc/sys/kernel/pid_max") as pid_max:
        never = int(pid_max.read()) + 1  # no process can have it
    assert peak_resident_mb(never) is None
