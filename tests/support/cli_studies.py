"""What the CLI commands' tests read: a finished study shaped as the objective writes one
(status, best, export), and a spec with a conditional space and a warm start (validate,
enqueue)."""

from __future__ import annotations

import uuid
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hpo.outputs import TrialOutputs
from hpo.study.records import metric_attrs
from hpo.study.storage import get_storage
from tests.support import REPO

SMOKE = REPO / "studies" / "criteria-smoke.yaml"
SPACE = {
    "learning_rate": FloatDistribution(1e-3, 6e-3, log=True),
    "head_layers": IntDistribution(0, 1),
    "pooling": CategoricalDistribution(["cls", "mean"]),
}
# (macro_f1, accuracy) per finished trial; None: pruned after one epoch
RESULTS = [(0.61, 0.70), (0.87, 0.91), None, (0.74, 0.80)]
BEST = 1


def build_study(url: str, name: str, checkpoints: Path, n_trials: int) -> optuna.Study:
    """A study shaped like the one the objective writes: params, per-epoch reports,
    metric:NAME / epochs_run / wall_seconds / checkpoint user attributes, and trial folders
    under ``checkpoints`` (its output_dir) whose metrics.json names the study and trial."""
    study = optuna.create_study(study_name=name, storage=get_storage(url), direction="maximize")
    uid = uuid.uuid4().hex
    for key, value in {
        "task": "criteria",
        "metric": "macro_f1",
        "n_trials": n_trials,
        "spec_file": str(SMOKE),
        "uid": uid,
    }.items():
        study.set_user_attr(key, value)
    outputs = TrialOutputs(checkpoints, name, uid, keep_top_k=len(RESULTS), direction="maximize")
    for number, result in enumerate(RESULTS):
        trial = study.ask(SPACE)
        trial.set_user_attr("worker", "node/0")
        if result is None:
            trial.report(0.05, 0)
            trial.set_user_attr("epochs_run", 1)
            study.tell(trial, state=TrialState.PRUNED)
            continue
        macro_f1, accuracy = result
        for epoch, value in enumerate((macro_f1 - 0.1, macro_f1)):
            trial.report(value, epoch)
        checkpoint = outputs.checkpoint_dir(number)
        checkpoint.mkdir(parents=True)
        outputs.write_metrics(number, {"value": macro_f1})
        for key, value in metric_attrs({"macro_f1": macro_f1, "accuracy": accuracy}).items():
            trial.set_user_attr(key, value)
        trial.set_user_attr("epochs_run", 2)
        trial.set_user_attr("wall_seconds", 10.5 + number)
        trial.set_user_attr("checkpoint", str(checkpoint))
        study.tell(trial, macro_f1)
    return study


CONDITIONAL = """\
name: {name}
task: criteria
data_dir: {data_dir}
n_trials: 4
sampler: {{name: tpe, options: {{multivariate: true, group: true, constant_liar: true}}}}
train: {{encoder: {encoder}, max_length: 96}}
search_space:
  adapter: {{type: categorical, choices: [full, lora]}}
  lora_r: {{type: int, low: 4, high: 16, when: {{adapter: lora}}}}
  lora_alpha: {{type: int, low: 8, high: 32, when: {{adapter: lora}}}}
  head_layers: {{type: int, low: 0, high: 2}}
  head_hidden_size: {{type: categorical, choices: [32, 64], when: {{head_layers: [1, 2]}}}}
  learning_rate: {{type: float, low: 1.0e-5, high: 1.0e-3, log: true}}
warm_start:
  - {{adapter: full, head_layers: 0, learning_rate: 2e-5}}
  - {{adapter: lora, lora_r: 8, learning_rate: 3e-4}}
"""
