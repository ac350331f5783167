"""The storage URL value type: parsed once, asked what it is, never shown with its password."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import sqlalchemy as sa

from hpo.storage_url import DEFAULT, ENV, HIDDEN, StorageUrl, redact


@pytest.mark.parametrize(
    ("url", "backend", "sqlite", "grpc", "shared"),
    [
        ("sqlite:///_runs/hpo.db", "sqlite", True, False, False),
        ("sqlite://", "sqlite", True, False, False),
        ("postgresql://hpo@db:5432/hpo", "postgresql", False, False, True),
        ("postgresql+psycopg2://hpo:s3cret@db/hpo", "postgresql", False, False, True),
        ("grpc://proxy:13000", "grpc", False, True, True),
        ("mysql://hpo@db/hpo", "mysql", False, False, False),
        ("nonsense", "", False, False, False),
    ],
)
def test_what_a_storage_is(url, backend, sqlite, grpc, shared):
    storage = StorageUrl(url)
    assert (storage.backend, storage.is_sqlite, storage.is_grpc, storage.is_shared) == (
        backend,
        sqlite,
        grpc,
        shared,
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://hpo:s3cret@db:5432/hpo", "postgresql://hpo:***@db:5432/hpo"),
        ("postgresql://hpo:at@s3cret@db:5432/hpo", "postgresql://hpo:***@db:5432/hpo"),
        (
            "postgresql://hpo@db/hpo?password=s3cret&sslmode=require",
            "postgresql://hpo@db/hpo?password=***&sslmode=require",
        ),
        ("grpc://hpo:s3cret@proxy:13000", "grpc://hpo:***@proxy:13000"),
        ("s3cret and no url", HIDDEN),
    ],
)
def test_printing_it_any_way_never_shows_the_password(url, shown):
    storage = StorageUrl(url)
    assert storage.redacted == shown
    for text in (
        str(storage),
        f"{storage}",
        repr(storage),
        f"{storage!s:>10}",
        repr([storage]),
        str(dataclasses.replace(storage)),
    ):
        assert "s3cret" not in text
    assert storage.text == url, (
        "the URL itself, secrets included, for the storage and a child's environment"
    )


def test_mask_hides_its_secrets_in_a_message_and_shows_itself_redacted():
    storage = StorageUrl("postgresql://hpo:p@ss@db/hpo?sslpassword=key9")
    said = storage.mask(f"could not connect to {storage.text}: password p@ss rejected, key9 too")
    assert (
        said == "could not connect to postgresql://hpo:***@db/hpo?sslpassword=***: "
        "password *** rejected, *** too"
    )
    assert redact(storage.text, "p@ss") == "***" and redact(storage) == storage.redacted


def test_sqlalchemy_reads_the_password_as_users_write_it():
    """A password with an unescaped @ is what users mean; SQLAlchemy splits at the first @."""
    url = sa.make_url(StorageUrl("postgresql://hpo:p@ss@db:5432/hpo").sqlalchemy)
    assert (url.username, url.password, url.host, url.port) == ("hpo", "p@ss", "db", 5432)
    plain = "postgresql://hpo:s3cret@db/hpo"
    assert StorageUrl(plain).sqlalchemy == plain, "nothing to quote: unchanged"


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("grpc://proxy:13000", ("proxy", 13000)),
        ("grpc://hpo:p@ss@proxy:13000", ("proxy", 13000)),
        ("grpc://proxy", None),
        ("grpc://proxy:port", None),
    ],
)
def test_address_of_a_server(url, address):
    assert StorageUrl(url).address == address


@pytest.mark.parametrize(
    ("flag", "env", "from_spec", "default", "expected"),
    [
        (
            "sqlite:///flag.db",
            {ENV: "sqlite:///env.db"},
            "sqlite:///spec.db",
            DEFAULT,
            "sqlite:///flag.db",
        ),
        (None, {ENV: "sqlite:///env.db"}, "sqlite:///spec.db", DEFAULT, "sqlite:///env.db"),
        (None, {}, "sqlite:///spec.db", DEFAULT, "sqlite:///spec.db"),
        (None, {}, None, DEFAULT, DEFAULT),
        (None, {}, None, None, None),
    ],
)
def test_resolve_by_precedence(flag, env, from_spec, default, expected):
    resolved = StorageUrl.resolve(flag, from_spec, env, default)
    assert (resolved.text if resolved else None) == expected


def test_a_value_compared_and_hashed_by_its_text():
    url = StorageUrl("sqlite:///a.db")
    assert url == StorageUrl("sqlite:///a.db") and len({url, StorageUrl("sqlite:///a.db")}) == 1
    assert StorageUrl.of(url) is url and StorageUrl.of("sqlite:///a.db") == url
    with pytest.raises(dataclasses.FrozenInstanceError):
        url.text = "sqlite:///b.db"
    with pytest.raises(TypeError, match="is text"):
        StorageUrl(5)


def test_the_spec_gives_the_value_and_loads_without_optuna(tmp_path):
    """The spec resolves the storage, so the type lives outside hpo.study (whose __init__ imports
    optuna)."""
    code = (
        "import sys, hpo.spec, hpo.storage_url; "
        "print(sorted({'optuna', 'torch', 'transformers'} & set(sys.modules)))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "[]"
    )
