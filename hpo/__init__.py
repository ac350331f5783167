"""hpo: hyperparameter optimisation for encoder classifiers on ReDSM5-format data."""

__version__ = "0.1.0"
