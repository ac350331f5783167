"""``final/``: one copy of each model on disk.

    final/model/                    the model test scored, whole: the chosen run's folder moved
                                    here, or an ensemble (ensemble.json, members/<run>/ moved in)
    final/ensemble -> model         an ensemble's earlier path, kept as a link
    final/runs/<run>/model -> ../../model[/members/<run>]   where a moved run's model went
    final/refit/model -> ../model   with --refit train+val

Models are moved, not copied: three copies of each seed (its run, the ensemble, the model) were
3x the disk of what they hold, 4.4 GB instead of 1.5 GB for two deberta-v3-base seeds.
``final/model`` holds no link, so copying it anywhere (cp -r, tar, scp) carries the whole
model; the links point into it from outside, relative, so a copy of ``final/`` keeps them.

A move and its link are two steps: each goes through a sibling (``model.link``, a link waiting
for the folder to leave; ``model.back``, a folder on its way back), so a finalize killed
between them is completed by the next (``settle``). A resumed finalize first moves every model
back to its run (``reclaim``), then places the model it chose, which may differ.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from hpo.final.retrain import RESULT_FILE, Say
from hpo.models.classifier_file import read_inference, rewrite_inference
from hpo.models.ensemble_file import MEMBERS, write_ensemble

MODEL = "model"  # final/model: the model
ENSEMBLE_LINK = "ensemble"  # final/ensemble, a link to model/ when it is an ensemble
LINK, BACK = ".link", ".back"  # the siblings of a move cut short (module docstring)


def place(
    final_dir: Path,
    members: Mapping[str, Path],
    thresholds: Mapping[str, float],
    tuned: Mapping[str, float] | None,
) -> Path:
    """``final/model`` made of ``members`` (name -> model folder under ``final_dir``), moved in:
    several are an ensemble, one is the model itself; either decides at ``thresholds``
    (``tuned``: the validation-tuned ones, recorded beside them). Returns ``final/model``."""
    reclaim(final_dir)
    model = final_dir / MODEL
    if len(members) > 1:
        for name, folder in members.items():
            move_leaving_link(folder, model / MEMBERS / name)
        in_place = {name: model / MEMBERS / name for name in members}
        write_ensemble(model, in_place, thresholds, tuned)
        (final_dir / ENSEMBLE_LINK).symlink_to(MODEL, target_is_directory=True)
    else:
        move_leaving_link(next(iter(members.values())), model)
        settings = read_inference(model)
        rewrite_inference(  # sealed again: no classifier.json is edited by hand
            model,
            dataclasses.replace(
                settings,
                thresholds=dict(thresholds),
                validation_thresholds=None if tuned is None else dict(tuned),
            ),
        )
    return model


def reclaim(final_dir: Path) -> None:
    """Every model a link leads into ``final/model`` moved back to its run (or refit), and what
    is left of ``final/model`` (ensemble.json) removed, with the ``final/ensemble`` link."""
    links = [*sorted(final_dir.glob(f"runs/*/{MODEL}")), final_dir / "refit" / MODEL]
    for link in links:
        settle(link)
        if link.is_symlink() and link.resolve().is_dir():
            move_back(link)
    for name in (MODEL, ENSEMBLE_LINK):
        path = final_dir / name
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)


def forget_lost_models(runs_dir: Path) -> list[str]:
    """Runs whose model link leads nowhere (``final/model`` deleted before a finalize ended)
    count as unfinished again, so that they are retrained; their names."""
    lost = []
    for link in sorted(runs_dir.glob(f"*/{MODEL}")):
        settle(link)
        if link.is_symlink() and not link.exists():
            link.unlink()
            (link.parent / RESULT_FILE).unlink(missing_ok=True)
            lost.append(link.parent.name)
    return lost


def move_leaving_link(folder: Path, to: Path) -> None:
    """``folder`` moved to ``to``, and a relative link to it left at ``folder``."""
    pending = folder.with_name(folder.name + LINK)
    pending.unlink(missing_ok=True)
    pending.symlink_to(os.path.relpath(to, folder.parent), target_is_directory=True)
    to.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(to)
    pending.rename(folder)  # onto a free name: atomic


def move_back(link: Path) -> None:
    """The folder ``link`` leads to moved back in its place."""
    back = link.with_name(link.name + BACK)
    link.resolve().rename(back)
    link.unlink()
    back.rename(link)


def settle(folder: Path) -> None:
    """Complete a move to or from ``folder`` that a kill cut short."""
    back, pending = folder.with_name(folder.name + BACK), folder.with_name(folder.name + LINK)
    if back.is_dir() and not back.is_symlink():  # moved back, its link not yet removed
        if folder.is_symlink():
            folder.unlink()
        back.rename(folder)
    if pending.is_symlink():
        if folder.is_symlink() or folder.exists():  # the move had not started, or was done
            pending.unlink()
        else:  # moved, its link not yet in place
            pending.rename(folder)


def model_files(model: Path) -> dict[str, int]:
    """Every file of the model folder and its size: what metrics.json lists for a rerun to
    check the model against."""
    return {
        str(path.relative_to(model)): path.stat().st_size
        for path in sorted(model.rglob("*"))
        if path.is_file()
    }


def intact(model: Path, files: Mapping[str, int]) -> bool:
    """Every file ``files`` lists is in ``model``, at its size."""
    return all(
        (path := model / name).is_file() and path.stat().st_size == size
        for name, size in files.items()
    )


FOLD_RUN = re.compile(r"-fold_\d+of(\d+)$")  # a --cv run's name (Run.name); group 1: its K


def forget_other_folds(runs_dir: Path, k: int, say: Say) -> None:
    """Remove the fold runs of another K than this finalize's ``--cv`` (0: none), which an
    earlier, interrupted finalize left: nothing reads them again, and each may hold a model."""
    stale = [
        folder
        for folder in sorted(runs_dir.glob("*-fold_*of*"))
        if (match := FOLD_RUN.search(folder.name)) and int(match[1]) != k
    ]
    for folder in stale:
        if folder.is_symlink() or not folder.is_dir():
            folder.unlink()  # never followed: what a link leads to is not finalize's
        else:
            shutil.rmtree(folder)
    if stale:
        earlier = sorted({int(FOLD_RUN.search(folder.name)[1]) for folder in stale})
        now = f"--cv {k}" if k else "no --cv"
        say(
            f"removed {len(stale)} fold retrainings an earlier finalize left "
            f"(--cv {', '.join(map(str, earlier))}); this one runs {now}"
        )
