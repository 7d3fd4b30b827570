"""`pva dataset add` on a tampered dataset: manifest table names are plain names of the schema, and
nothing is removed outside the dataset, through a symbolic link, or that the manifest does not record as
an uncommitted write of pva's own."""

from __future__ import annotations

import json
import os

import hostile_inputs
import pytest

import pva.dataset
from formats.errors import PvaError
from formats.fleet import dataset as fds
from pva.cli import main

pytest.importorskip("duckdb")


def _victim(sample, tmp_path) -> str:
    victim = str(tmp_path / "victim")
    pva.dataset.add_reports(victim, [sample.path])
    return victim


def _partitions(dataset: str) -> list[str]:
    return sorted(
        f"{table}/{name}"
        for table in os.listdir(dataset)
        if os.path.isdir(os.path.join(dataset, table))
        for name in os.listdir(os.path.join(dataset, table))
        if name.startswith("report_id=")
    )


def _tamper(dataset: str, change) -> None:
    path = os.path.join(dataset, fds.MANIFEST)
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


@pytest.mark.parametrize("name", ["../victim/reports", "../victim/steps", "/abs/reports", "steps/../../victim/steps"])
def test_a_manifest_naming_a_path_is_refused_and_the_other_dataset_kept(sample, tmp_path, capsys, name):
    victim = _victim(sample, tmp_path)
    before = _partitions(victim)
    attacker = str(tmp_path / "attacker")
    pva.dataset.add_reports(attacker, [sample.path])
    if name.startswith("/abs"):
        name = os.path.join(victim, "reports")
    hostile_inputs.tampered_manifest(attacker, name)
    assert main(["dataset", "add", attacker, sample.path, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "tampered dataset manifest" in err and repr(name) in err and fds.MANIFEST in err
    assert _partitions(victim) == before
    assert pva.dataset.query(victim, "SELECT count(*) AS n FROM reports").to_pylist() == [{"n": 1}]


def test_a_table_name_the_schema_does_not_have_is_refused(sample, tmp_path):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [sample.path])
    hostile_inputs.tampered_manifest(data, "victim")
    with pytest.raises(PvaError, match="'victim' is not a table of a pva dataset"):
        pva.dataset.add_reports(data, [])


def test_a_table_folder_that_links_into_another_dataset_is_refused(sample, tmp_path, capsys):
    victim = _victim(sample, tmp_path)
    before = _partitions(victim)
    attacker = str(tmp_path / "attacker")
    pva.dataset.add_reports(attacker, [sample.path])
    hostile_inputs.linked_table(attacker, victim)
    # a no-op add (the report is already there), as in the attack
    assert main(["dataset", "add", attacker, sample.path, "--no-progress"]) == 2
    assert "is a symbolic link; expected the dataset's own folder of table 'steps'" in capsys.readouterr().err
    assert _partitions(victim) == before


def test_partitions_the_manifest_does_not_record_are_never_removed(sample, tmp_path):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [sample.path])
    stranger = os.path.join(data, "steps", "report_id=" + "ab" * 16)
    os.makedirs(stranger)
    with open(os.path.join(stranger, "keep.txt"), "w") as handle:
        handle.write("not pva's")
    pva.dataset.add_reports(data, [])
    assert os.listdir(stranger) == ["keep.txt"]


def test_an_uncommitted_id_that_is_not_an_id_is_refused(sample, tmp_path):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [sample.path])
    _tamper(data, lambda d: d.__setitem__("uncommitted", ["../../victim"]))
    with pytest.raises(PvaError, match="uncommitted report '../../victim' is not a report id"):
        pva.dataset.add_reports(data, [])


def test_an_interrupted_commit_is_recorded_and_removed_by_the_next_add(sample, tmp_path, monkeypatch):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [])
    real_rename = os.rename
    calls = []

    def crash(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_rename(src, dst)

    monkeypatch.setattr(fds.os, "rename", crash)
    with pytest.raises(KeyboardInterrupt):
        pva.dataset.add_reports(data, [sample.path])
    monkeypatch.setattr(fds.os, "rename", real_rename)
    rid = fds.report_id(sample.path)
    assert fds.read_manifest(data).uncommitted == {rid}
    assert len(_partitions(data)) == 2
    pva.dataset.add_reports(data, [])
    assert _partitions(data) == [] and fds.read_manifest(data).uncommitted == set()
