"""The spec's sections: a pruner wrapping another, and the storage as one value that never
prints its password."""

from __future__ import annotations

import pytest

from hpo.spec import PatientOptions, SpecError, load_spec
from tests.support.study_files import BASE, changed, write


def test_a_patient_pruner_wraps_another(tmp_path):
    study = write(
        tmp_path,
        changed(
            (
                "pruner",
                {
                    "name": "patient",
                    "options": {
                        "patience": 2,
                        "wrapped": {"name": "hyperband", "options": {"reduction_factor": 3}},
                    },
                },
            )
        ),
    )
    options = load_spec(study, env={}).pruner.patient_options()
    assert isinstance(options, PatientOptions)
    assert (options.patience, options.wrapped.name, options.wrapped.options) == (
        2,
        "hyperband",
        {"reduction_factor": 3},
    )


def test_the_storage_is_one_value_that_never_prints_its_password(tmp_path):
    spec = load_spec(write(tmp_path, BASE), storage="postgresql://hpo:s3cret@db/hpo", env={})
    assert spec.storage.is_shared and spec.storage.text == "postgresql://hpo:s3cret@db/hpo"
    assert "s3cret" not in f"{spec.storage} {spec!r} {spec.model_dump_json()}"
    for wrong in ("storage=5", "storage=[sqlite:///a.db]"):
        with pytest.raises(SpecError, match="storage: must be a URL such as sqlite:///PATH"):
            load_spec(write(tmp_path, BASE), overrides=[wrong], env={})
