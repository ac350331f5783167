"""Optuna's log records in the command's own format."""

from __future__ import annotations

import optuna


def log_through_hpo() -> None:
    """Send Optuna's records ("A new study created…", a failed trial's warning) up to the
    root logger, where the ``hpo`` command's handler writes them in hpo's format, instead of
    through Optuna's own handler and its ``[I 2026-…]`` format. Optuna's levels are kept."""
    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
