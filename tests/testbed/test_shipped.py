"""The shipped testbed: the package's archive matches its listed sha256 and today's definition
of the full testbed; the cache is filled from it unless `force`; a damaged archive is one line."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from traac.errors import TraacError
from traac.testbed import build, shipped
from traac.testbed.build import CARD
from traac.testbed.config import default_config


def test_the_package_ships_todays_full_testbed():
    config = default_config()
    archive = shipped.archive_path(config)
    assert shipped.is_shipped(config) and shipped.sha256(archive) == shipped.SHIPPED[config.hash()]
    with tarfile.open(archive, "r:xz") as tar:
        assert set(tar.getnames()) == shipped.MEMBERS
        card = json.load(tar.extractfile(CARD))  # type: ignore[arg-type]
    assert card["config"] == config.to_dict() and card["config_hash"] == config.hash()
    assert not shipped.is_shipped(default_config(quick=True))
    assert not shipped.is_shipped(default_config(seed=1))


def fake_archive(where: Path, config, files: dict[str, bytes]) -> str:
    """An archive of `files` where the package keeps `config`'s; its sha256."""
    where.mkdir(parents=True, exist_ok=True)
    with tarfile.open(where / shipped.archive_path(config).name, "w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return shipped.sha256(where / shipped.archive_path(config).name)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake shipped quick testbed (a card and placeholder files) and an empty cache."""
    config = default_config(quick=True)
    files = {name: b"x" for name in shipped.MEMBERS}
    files[CARD] = json.dumps({"config_hash": config.hash()}).encode()
    digest = fake_archive(tmp_path / "shipped", config, files)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path / "shipped")
    monkeypatch.setattr(shipped, "SHIPPED", {config.hash(): digest})
    monkeypatch.setenv("TRAAC_CACHE_DIR", str(tmp_path / "cache"))
    return config


def test_the_cache_is_filled_from_the_archive_unless_forced(fake, monkeypatch):
    built = []
    monkeypatch.setattr(build, "_build", lambda work, config, *a: built.append(config) or {})
    entry = build.build_cached(fake)
    card = json.loads((entry / CARD).read_text())
    assert card["config_hash"] == fake.hash() and card["shipped"]["sha256"]
    assert {p.name for p in entry.iterdir()} == shipped.MEMBERS and built == []

    def fresh(work, config, *a):  # what the real build would write last
        built.append(config)
        (work / CARD).write_text("{}")
        return {}

    monkeypatch.setattr(build, "_build", fresh)
    build.build_cached(fake, force=True)
    assert built == [fake] and json.loads((entry / CARD).read_text()) == {}


def test_a_damaged_archive_is_one_line(fake, tmp_path, monkeypatch):
    archive = shipped.archive_path(fake)
    archive.write_bytes(archive.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(TraacError, match=r"is damaged \(sha256 .*--force") as error:
        shipped.unpack_shipped(fake, tmp_path, CARD)
    assert "\n" not in str(error.value)
    # the right sha256 over the wrong files
    digest = fake_archive(tmp_path / "shipped", fake, {"../model.safetensors": b"x"})
    monkeypatch.setattr(shipped, "SHIPPED", {fake.hash(): digest})
    with pytest.raises(TraacError, match="holds other files than a testbed model"):
        shipped.unpack_shipped(fake, tmp_path / "work", CARD)
