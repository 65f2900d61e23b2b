"""Evidence keys: derived per job from Airflow's own secret, the same on every try and worker, different per job."""

from __future__ import annotations

import stat

from airflow_provider_trainium.registry import seal


def test_the_key_file_is_created_once_owner_only_and_read_back_alike(tmp_path):
    first = seal.home_key(tmp_path)
    assert seal.home_key(tmp_path) == first and len(first) == 64
    assert stat.S_IMODE((tmp_path / seal.KEY_FILE).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [seal.KEY_FILE]  # no draft left behind


def test_each_job_gets_its_own_key_from_the_configured_secret(monkeypatch):
    monkeypatch.setenv("AIRFLOW__TRAINIUM__EVIDENCE_KEY", "one secret")
    key = seal.job_key("d-evaluate-aaaaaaaaaaaa")
    assert key == seal.job_key("d-evaluate-aaaaaaaaaaaa")  # every try, every worker
    assert key != seal.job_key("d-evaluate-bbbbbbbbbbbb")  # another run's job cannot derive it
    assert key != seal.plan_key("d", "r", "evaluate-aaaaaaaaaaaa")
    monkeypatch.setenv("AIRFLOW__TRAINIUM__EVIDENCE_KEY", "another secret")
    assert seal.job_key("d-evaluate-aaaaaaaaaaaa") != key


def test_a_seal_holds_only_for_the_fields_and_key_it_was_made_with():
    record = seal.sealed({"a": 1, "b": [1.5, "x"]}, "00" * 32)
    assert seal.seal_holds(record, "00" * 32)
    assert not seal.seal_holds({**record, "a": 2}, "00" * 32)
    assert not seal.seal_holds(record, "11" * 32)
    assert not seal.seal_holds({"a": 1, "b": [1.5, "x"]}, "00" * 32)
