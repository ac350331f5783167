"""What a training process is handed by the process that starts it: its CPU threads, its
host-memory ceiling, its GPUs, the parent to stop with and the study's storage. One type for
``hpo tune``'s workers, finalize's ``hpo retrain`` children and Slurm's array tasks.

``flags`` and ``env`` turn it into command-line flags and an environment as pure functions
(after accelerate's ``prepare_*_cmd_env``), tested without spawning; the child rebuilds it from
its parsed flags (``from_args``) and ``apply``s it once, before any work. The storage URL travels
in the environment only, so a password never shows in `ps`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from hpo.storage_url import ENV as STORAGE_ENV
from hpo.storage_url import StorageUrl

THREAD_FLAG, MEMORY_FLAG, PARENT_FLAG = "--threads", "--memory-limit", "--parent-pid"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the BLAS pools torch starts with
QUIET_ENV = {"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


@dataclass(frozen=True)
class ChildContract:
    threads: int | None = None  # torch CPU threads; None: torch's own default
    memory_mb: int | None = None  # host-memory ceiling; None: the machine's share for one
    gpus: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES; empty: the parent's, unchanged
    parent_pid: int | None = None  # the process this one stops with (SIGTERM when it exits)
    storage: StorageUrl | None = None  # in $HPO_STORAGE, never on the command line

    def flags(self) -> list[str]:
        """The command-line flags ``hpo worker`` and ``hpo retrain`` read back (``from_args``)."""
        flags = []
        for flag, value in (
            (THREAD_FLAG, self.threads),
            (PARENT_FLAG, self.parent_pid),
            (MEMORY_FLAG, self.memory_mb),
        ):
            if value is not None:
                flags += [flag, str(value)]
        return flags

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """A copy of ``base`` (default: this process's environment) with what the child needs."""
        env = dict(os.environ if base is None else base)
        env.update(QUIET_ENV)
        if self.threads is not None:
            env.update(dict.fromkeys(THREAD_VARIABLES, str(self.threads)))
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        if self.storage is not None:
            env[STORAGE_ENV] = self.storage.text
        return env

    @classmethod
    def from_args(cls, args) -> ChildContract:
        """The contract as the child received it: its parsed flags (the storage and GPUs are
        read from the environment by whoever needs them)."""
        return cls(threads=args.threads, memory_mb=args.memory_limit, parent_pid=args.parent_pid)

    def apply(self) -> None:
        """In the child, once, before any work: follow the parent out (first, so a parent killed
        during this start-up is noticed too), set torch's threads and the memory ceiling."""
        from hpo.process import exit_with_parent, obey_sigint
        from hpo.train.memory import memory_share_mb, set_memory_ceiling

        if self.parent_pid is not None:
            obey_sigint()  # how the parent stops it
            exit_with_parent(self.parent_pid)
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)
        set_memory_ceiling(self.memory_mb or memory_share_mb(1))  # alone here unless told
