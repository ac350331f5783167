"""What several test files share: ``helpers`` (the ``hpo`` CLI run as a user runs it, a free
port, the rule for a tool this machine lacks), ``shared_storage`` (the tests' own reads of a
study), ``cli_studies`` and ``tune_cli`` (a finished study, ``hpo tune`` on the sample data),
``headless`` (Chromium's flags), ``redsm5_files`` (a hand-counted pair of ReDSM5 files),
``study_files`` (a small study file to edit, and the smoke study as the CLI loads it),
``auto_specs`` (a ``sampler: auto`` study around a warm start), ``conditional_space`` (a study
file with a conditional space and a warm start), ``inference_settings`` (a model folder
sealed around stand-in weights), ``untrained_models`` (tiny classifiers saved untrained) and
``final_summaries/`` (metrics.json files ``hpo finalize`` wrote). Paths come from here, not
from a test file's own place in the tree."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# real metrics.json files that `hpo finalize` wrote, one folder per shape
FINAL_SUMMARIES = Path(__file__).parent / "final_summaries"
