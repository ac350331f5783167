"""A study file with a conditional search space and a two-point warm start, on a given storage,
which the study's tests of sampling and warm starts share."""

from __future__ import annotations

from pathlib import Path

CONDITIONAL = """\
name: {name}
task: criteria
data_dir: unused
n_trials: {n_trials}
storage: {storage}
sampler: {{name: tpe, seed: 0, options: {{n_startup_trials: 5, multivariate: true, group: true, \
constant_liar: true}}}}
pruner: {{name: none}}
train: {{encoder: tiny-roberta}}
search_space:
  adapter: {{type: categorical, choices: [full, lora]}}
  lora_r: {{type: int, low: 4, high: 16, when: {{adapter: lora}}}}
  head_layers: {{type: int, low: 0, high: 2}}
  head_hidden_size: {{type: categorical, choices: [32, 64], when: {{head_layers: [1, 2]}}}}
  learning_rate: {{type: float, low: 1.0e-5, high: 1.0e-3, log: true}}
warm_start:
  - {{adapter: full, head_layers: 0, learning_rate: 2e-5}}
  - {{adapter: lora, lora_r: 8, learning_rate: 3e-4}}
"""


def conditional_spec(tmp_path: Path, storage: str, name: str, n_trials: int = 30) -> Path:
    path = tmp_path / "conditional.yaml"
    path.write_text(CONDITIONAL.format(name=name, storage=storage, n_trials=n_trials))
    return path
