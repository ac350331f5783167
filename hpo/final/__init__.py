"""From a finished search to one model with an honest test score (``hpo finalize``).

``pipeline``: plan, retrain, choose on validation, score once on test, publish and record;
``plan``: the configurations and seeds to retrain and the threshold rule, said before anything
trains; ``choose``: the configuration, its model and its thresholds; ``final_folder``: one copy
of each model;
``retrain``: the retrainings, in this process or as ``hpo retrain`` children; ``holdout``:
the test split's only reader; ``model_card``: the card rendered from the summary.

Import the module you need: this package imports nothing itself, so a retraining child
loads no Optuna and no study storage.
"""
