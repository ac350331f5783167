"""A prediction's progress as log lines, where no bar is shown (``--no-progress``, a log file):
200 posts took 4 minutes on a CPU, and a command silent that long looks hung."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from hpo.train.loop import clock

# a line at each tenth of the posts, and at the first block done past this many seconds since
# the last line: a slow tenth still says where it is
SHARE = 0.1
SECONDS = 30.0
log = logging.getLogger(__name__)
# asked for: where hpo's lines are shown (the CLI's stderr), these are too, whatever the level
log.setLevel(logging.INFO)


class ProgressLines:
    """``update(n)`` after every block of ``n`` posts, as a tqdm bar's; it logs a line such as
    ``predicted 60/200 posts (30%), 1.2 posts/s, ETA 2m50s`` at each tenth and every 30 s."""

    def __init__(self, total: int, what: str = "predicted", say: Callable[[str], None] = log.info):
        self.total, self.what, self.say = total, what, say
        self.step = max(1, math.ceil(total * SHARE))
        self.done, self.next_line = 0, self.step
        self.started = self.said = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if self.done < min(self.next_line, self.total) and now - self.said < SECONDS:
            return
        self.said = now
        self.next_line = (self.done // self.step + 1) * self.step
        rate = self.done / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate if rate else 0.0
        self.say(
            f"{self.what} {self.done}/{self.total} posts ({self.done / max(self.total, 1):.0%}), "
            f"{rate:.1f} posts/s, ETA {clock(eta)}"
        )
