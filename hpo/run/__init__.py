"""Running a study's trials: the checks before a run (``preflight``), the local launcher and
its circuit breaker (``launcher``, ``breaker``), a Slurm job array (``slurm``), one worker's
trial loop and one trial (``worker``, ``objective``), and the gRPC storage proxy that workers
on many machines share (``proxy``).

Import the module you need: this package imports nothing itself, so a worker process loads
only what its own trial loop uses.
"""
