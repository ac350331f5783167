"""The predictions file's header, and how a rerun tells its own earlier output from any other
file it must not replace without --force."""

from __future__ import annotations

import pytest

from hpo.data import SYMPTOMS
from hpo.predict._files import EVIDENCE_HEADER, criteria_header, is_predictions_file


def test_the_criteria_header_is_each_label_then_each_labels_probability():
    assert criteria_header(["A", "B"]) == ["post_id", "A", "B", "A_prob", "B_prob"]


@pytest.mark.parametrize(
    "first_line",
    [
        ",".join(criteria_header(SYMPTOMS)),
        ",".join(criteria_header(["ONLY"])),
        ",".join(EVIDENCE_HEADER),
    ],
)
def test_a_file_predict_wrote_is_recognised_by_its_header(tmp_path, first_line):
    path = tmp_path / "predictions.csv"
    path.write_text(f"{first_line}\np1,1,0.9\n", encoding="utf-8")
    assert is_predictions_file(path)


@pytest.mark.parametrize(
    "content",
    [
        b"post_id,text\np1,my own post\n",  # the input, whose header it is not
        b"post_id,A,B,B_prob,A_prob\n",  # labels out of order
        b"post_id,A,A_prob,extra\n",
        b"",
        b"post_id,\xff\xfe\n",  # not UTF-8
    ],
)
def test_any_other_file_is_not_one_to_replace(tmp_path, content):
    path = tmp_path / "other.csv"
    path.write_bytes(content)
    assert not is_predictions_file(path)
    assert not is_predictions_file(tmp_path / "absent.csv")
    assert not is_predictions_file(tmp_path)  # a folder
