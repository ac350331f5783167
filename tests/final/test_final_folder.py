"""finalize's final/: one copy of each model on disk; final/model, final/ensemble, a run's link
and a copy of the folder made elsewhere (cp -r, tar) all predict; a move cut short by a kill
is completed by the next finalize. And "logs only" (--no-progress) means lines: each
retraining's epochs on the terminal, named by the run, and its train.log kept."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from hpo.cli import main
from hpo.final.final_folder import LINK, move_back, move_leaving_link, reclaim, settle
from tests.final.test_finalize_guards import assets, final_dir, finalize_argv, run, searched  # noqa: F401

EPOCHS = 2


def disk_bytes(folder: Path) -> int:
    """What ``folder`` holds on disk, as du counts it: each file once, links not followed."""
    seen, total = set(), 0
    for root, _, files in os.walk(folder):  # followlinks=False
        for name in files:
            status = os.lstat(Path(root) / name)
            if (status.st_dev, status.st_ino) not in seen and not os.path.islink(Path(root) / name):
                seen.add((status.st_dev, status.st_ino))
                total += status.st_size
    return total


def finalized(tmp_path_factory, assets, name: str, *flags: str) -> dict:  # noqa: F811
    root = tmp_path_factory.mktemp(name)
    storage = f"sqlite:///{root / 'hpo.db'}"
    args = searched(root, assets, storage, name, settings=(f"train.epochs={EPOCHS}",))
    result = run(finalize_argv(storage, args, "--top-k", "1", *flags), root)
    assert result.returncode == 0, result.stderr[-3000:]
    final = final_dir(root, storage, args)
    summary = json.loads((final / "metrics.json").read_text())
    return {"root": root, "final": final, "summary": summary, "result": result}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, assets):  # noqa: F811
    """Two seeds in two retraining processes, averaged into an ensemble."""
    return finalized(tmp_path_factory, assets, "seeds", "--seeds", "2", "--workers", "2")


@pytest.fixture(scope="module")
def refit(tmp_path_factory, assets):  # noqa: F811
    """One seed retrained in finalize's own process, then refit on train + validation."""
    return finalized(tmp_path_factory, assets, "refit", "--seeds", "1", "--refit", "train+val")


def predict(model: Path, tmp_path: Path, posts: Path) -> list[dict[str, str]]:
    out = tmp_path / f"{abs(hash(str(model)))}.csv"
    assert main(["predict", str(model), "--input", str(posts), "--out", str(out)]) == 0
    with out.open(newline="") as stream:
        return list(csv.DictReader(stream))


@pytest.mark.slow
def test_a_two_seed_finalize_writes_each_models_weights_once(seeds):
    final, summary = seeds["final"], seeds["summary"]
    members = summary["ensemble"]["members"]
    assert len(members) == 2
    model = final / "model"
    one = [disk_bytes(model / "members" / member) for member in members]
    assert min(one) > 100_000, one  # real weights
    # each seed once, plus the logs, results and card (a few KB): not three copies of each
    assert disk_bytes(final) == pytest.approx(sum(one), rel=0.1), (disk_bytes(final), one)
    assert not [p for p in model.rglob("*") if p.is_symlink()], "final/model is whole, no links"
    for member in members:
        link = final / "runs" / member / "model"
        assert link.is_symlink() and not os.path.isabs(os.readlink(link)), "relative"
        assert link.resolve() == (model / "members" / member).resolve()
    assert (final / "ensemble").is_symlink() and (final / "ensemble").resolve() == model.resolve()
    assert not (final / "chosen").exists()


@pytest.mark.slow
def test_every_entry_point_and_a_copied_folder_predicts_alike(seeds, assets, tmp_path):  # noqa: F811
    final, posts = seeds["final"], assets["data"] / "redsm5_posts.csv"
    expected = predict(final / "model", tmp_path, posts)
    assert len(expected) == 60
    assert predict(final / "ensemble", tmp_path, posts) == expected
    # a copy of final/model alone is the whole model
    subprocess.run(["cp", "-r", str(final / "model"), str(tmp_path / "copied")], check=True)
    assert predict(tmp_path / "copied", tmp_path, posts) == expected
    # a copy of final/ keeps its links, relative, leading into the copy
    (tmp_path / "unpacked").mkdir()
    tar = tmp_path / "final.tar"
    subprocess.run(["tar", "-cf", str(tar), "-C", str(final.parent), "final"], check=True)
    subprocess.run(["tar", "-xf", str(tar), "-C", str(tmp_path / "unpacked")], check=True)
    subprocess.run(["cp", "-r", str(final), str(tmp_path / "final-cp")], check=True)
    for copy in (tmp_path / "unpacked" / "final", tmp_path / "final-cp"):
        assert predict(copy / "ensemble", tmp_path, posts) == expected
        member = seeds["summary"]["ensemble"]["members"][0]
        assert (copy / "runs" / member / "model").resolve().is_relative_to(copy.resolve())
    # a member alone, through its run's link
    member = seeds["summary"]["ensemble"]["members"][0]
    alone = predict(final / "runs" / member / "model", tmp_path, posts)
    assert [row["post_id"] for row in alone] == [row["post_id"] for row in expected]


@pytest.mark.slow
def test_retrainings_say_each_epoch_and_keep_their_train_log(seeds, refit):
    for finalize in (seeds, refit):  # in retraining processes, and in finalize's own
        err, final = finalize["result"].stderr, finalize["final"]
        names = [seed["run"] for seed in finalize["summary"]["configurations"][0]["seeds"]]
        for name in names:
            for epoch in range(1, EPOCHS + 1):
                said = re.search(rf"\[{re.escape(name)}\] epoch {epoch}/{EPOCHS}\b.*loss", err)
                assert said, (name, epoch, err[-3000:])
            log = (final / "runs" / name / "train.log").read_text()
            assert f"epoch {EPOCHS}/{EPOCHS}" in log and "the encoder sees" in log, log
    assert re.search(r"\[refit\] epoch 1/\d+\b", refit["result"].stderr), refit["result"].stderr
    assert (refit["final"] / "refit" / "train.log").is_file()


@pytest.mark.slow
def test_a_refit_is_moved_into_final_model_and_its_run_keeps_its_own(refit, assets, tmp_path):  # noqa: F811
    final, summary = refit["final"], refit["summary"]
    assert (final / "refit" / "model").is_symlink()
    assert (final / "refit" / "model").resolve() == (final / "model").resolve()
    chosen = final / "runs" / summary["chosen"]["run"] / "model"
    assert chosen.is_dir() and not chosen.is_symlink(), "the train-only run is another model"
    assert disk_bytes(final) == pytest.approx(
        disk_bytes(final / "model") + disk_bytes(chosen), rel=0.1
    )
    rows = predict(final / "model", tmp_path, assets["data"] / "redsm5_posts.csv")
    assert len(rows) == 60


def model_folder(path: Path, weights: bytes) -> Path:
    path.mkdir(parents=True)
    (path / "head.safetensors").write_bytes(weights)
    return path


def test_a_move_cut_short_either_way_is_completed_by_the_next_finalize(tmp_path):
    final = tmp_path / "final"
    run_model = model_folder(final / "runs" / "a" / "model", b"a")
    member = final / "model" / "members" / "a"

    # killed after the folder moved, before its link took its place
    (final / "runs" / "a" / ("model" + LINK)).symlink_to("../../model/members/a")
    member.parent.mkdir(parents=True)
    run_model.rename(member)
    settle(run_model)
    assert run_model.is_symlink() and (run_model / "head.safetensors").read_bytes() == b"a"

    # killed on the way back, after the folder left, before the link went
    back = run_model.with_name("model.back")
    member.rename(back)
    settle(run_model)
    assert run_model.is_dir() and not run_model.is_symlink() and not back.exists()

    # killed before anything moved: the waiting link goes, the folder stays
    (final / "runs" / "a" / ("model" + LINK)).symlink_to("../../model/members/a")
    settle(run_model)
    assert run_model.is_dir() and not run_model.is_symlink()
    assert not (final / "runs" / "a" / ("model" + LINK)).is_symlink()

    move_leaving_link(run_model, member)
    move_back(run_model)
    assert (run_model / "head.safetensors").read_bytes() == b"a" and not member.exists()


def test_a_resumed_finalize_moves_every_model_back_before_placing_anew(tmp_path):
    final = tmp_path / "final"
    for name in ("a", "b"):
        move_leaving_link(
            model_folder(final / "runs" / name / "model", name.encode()),
            final / "model" / "members" / name,
        )
    (final / "model" / "ensemble.json").write_text("{}")
    (final / "ensemble").symlink_to("model")
    refit = model_folder(final / "refit" / "model", b"r")
    reclaim(final)
    for name in ("a", "b"):
        run_model = final / "runs" / name / "model"
        assert not run_model.is_symlink()
        assert (run_model / "head.safetensors").read_bytes() == name.encode()
    assert not (final / "model").exists() and not (final / "ensemble").is_symlink()
    assert (refit / "head.safetensors").read_bytes() == b"r", "a model no link led to stays"
