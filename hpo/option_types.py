"""The numbers the commands' options take, as pydantic types: one definition each for the flags'
checks (hpo/cli/_common.py), the Python API's arguments and the option records that tune and
finalize run from (``TuneOptions``, ``FinalizeOptions``)."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

Count = Annotated[int, Field(ge=1)]  # workers, seeds, configurations: from 1
Threads = Annotated[int, Field(ge=1, le=os.cpu_count() or 1)]  # up to this machine's CPUs
Seconds = Annotated[float, Field(ge=1, le=365 * 24 * 3600)]  # a time budget: a second to a year
MemoryMb = Annotated[int, Field(ge=1, le=1024**4)]  # up to an exbibyte
