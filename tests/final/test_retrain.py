"""finalize's retrainings (hpo.final.retrain), the parts that need no training: a run's name
and fold, and the log a retraining keeps (its lines named on standard error, and the detail
too in its folder's train.log), with the ``hpo`` logger as it was once the run ends."""

from __future__ import annotations

import logging

from hpo.final.retrain import RUN_LOG, Run, run_log


def test_a_run_is_named_by_its_trial_seed_and_fold():
    plain = Run(rank=1, trial=3, params={}, seed=0)
    assert (plain.name, plain.cv_fold) == ("trial_3-seed_0", None)
    fold = Run(rank=1, trial=3, params={}, seed=1, folds=2, fold=1)
    assert (fold.name, fold.cv_fold) == ("trial_3-seed_1-fold_2of2", (2, 1))


def test_a_retrainings_log_names_its_lines_and_keeps_the_detail_in_its_folder(
    tmp_path, capsys, monkeypatch
):
    package, detail = logging.getLogger("hpo"), logging.getLogger("hpo.detail")
    before = (package.level, package.propagate, list(package.handlers), list(detail.handlers))
    # as hpo.models.loading sets it: the detail is for the file only
    monkeypatch.setattr(detail, "propagate", False)
    with run_log(tmp_path / "trial_3-seed_0", "trial_3-seed_0") as path:
        logging.getLogger("hpo.train").info("epoch 1 done")
        detail.info("loaded 12 tensors")
    assert path == tmp_path / "trial_3-seed_0" / RUN_LOG
    kept = path.read_text()
    assert "INFO hpo.train: epoch 1 done" in kept and "INFO hpo.detail: loaded 12 tensors" in kept
    shown = capsys.readouterr().err
    assert "[trial_3-seed_0] epoch 1 done" in shown and "loaded 12 tensors" not in shown
    after = (package.level, package.propagate, list(package.handlers), list(detail.handlers))
    assert after == before
