"""Errors users can act on. ``UsageError`` means bad input: the CLI prints it on one line and
exits 2."""

from collections.abc import Callable


def find_cause(
    exc: BaseException, matches: Callable[[BaseException], bool]
) -> BaseException | None:
    """The first exception in ``exc``'s chain (itself, then causes and contexts) that
    ``matches``: libraries re-raise over the error that explains a failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if matches(seen):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class UsageError(Exception):
    """A problem with the user's input (spec, data, flags, storage URL) that they can fix."""

    exit_code = 2


class RunStopped(UsageError):
    """The launcher stopped a study that could only fail (every trial failing the same way,
    workers dying in a row); the message names the reason. Exit 1: the input may be fine."""

    exit_code = 1


class StudyBusy(UsageError):
    """Another process holds the study for a job that runs once at a time (``hpo finalize``).
    Exit 1: nothing is wrong with the input; run again once the other has finished."""

    exit_code = 1


class DataError(UsageError):
    """A data file is missing, malformed or holds values we cannot use."""


class MetaTensorError(RuntimeError):
    """Tensors are still on the meta device and could not be restored from a checkpoint."""

    def __init__(self, names, context: str = ""):
        self.names = sorted(names)
        shown = ", ".join(self.names[:20]) + (
            f" … (+{len(self.names) - 20} more)" if len(self.names) > 20 else ""
        )
        where = f" {context}" if context else ""
        super().__init__(
            f"{len(self.names)} tensor(s) are on the meta device{where} and were not restored: "
            f"{shown}. Pass the checkpoint they came from, or reload the model; weights are never "
            "re-initialised."
        )


class IncompleteCheckpoint(UsageError):
    """An encoder checkpoint lacks weights its model needs: transformers would start them from
    random values with only a warning, silently re-initialising part of the encoder."""


class OutOfMemoryError(RuntimeError):
    """A training step ran out of memory even at micro-batch 1."""


class TrainingDiverged(RuntimeError):
    """A run's training loss or validation scores stopped being finite numbers (NaN or inf):
    every later step and score would be garbage, so the run fails at once, naming where."""


class NonFiniteWeights(UsageError):
    """A classifier whose weights hold NaN or inf: it would predict ``nan`` for every text, so
    it is neither saved nor loaded."""
