"""The input and write allowlists: a URI is under a prefix only at a path boundary, where its links lead."""

import pytest

from airflow_provider_trainium.neuron.inputs import is_under


def test_a_sibling_whose_name_starts_with_the_prefix_is_not_under_it():
    assert is_under("file:///data/root/x", ["file:///data/root"])
    assert is_under("file:///data/root", ["file:///data/root"])
    assert not is_under("file:///data/root2/x", ["file:///data/root"])
    assert not is_under("s3://bucket-evil/x", ["s3://bucket"])


def test_a_link_under_the_root_is_judged_by_where_it_leads(tmp_path):
    """The provider and the trainer share the rule (``boundary.input_uri_allowed``): a symbolic link inside an
    allowed prefix that points outside it is outside."""
    from trainium_trainer import boundary

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "data").symlink_to(outside)
    (root / "real").mkdir()
    assert not is_under(f"file://{root}/data/train.jsonl", [root.as_uri()])
    assert not boundary.input_uri_allowed(f"{root}/data", [str(root)])
    assert is_under(f"file://{root}/real/train.jsonl", [root.as_uri()])


def test_a_job_writes_only_under_the_root_or_an_allowed_output_prefix(tmp_path):
    """``check_write`` (issue 45: an ``output_uri`` needed only a scheme): the root and the output prefixes pass, by
    the inputs' comparison; the message names the field, the URI, the rule and the field that allows a prefix."""
    from airflow_provider_trainium.neuron.inputs import WriteNotAllowedError, allowed_prefixes, check_write

    root, shared = tmp_path / "root", tmp_path / "shared"
    prefixes = allowed_prefixes(root.as_uri(), [shared.as_uri(), "s3://team/out"])
    for uri in (f"{root.as_uri()}/runs/x", f"{shared}/y", "s3://team/out/z"):
        assert check_write("output_uri", uri, prefixes) == uri
    for uri in ("s3://team/outside", "file:///etc/cron.d", f"{tmp_path}/root2", "s3://team/out/../x", "rel/x"):
        with pytest.raises(WriteNotAllowedError, match="output_uri .*refused") as refused:
            check_write("output_uri", uri, prefixes)
        assert "bounded writes" in str(refused.value)
    with pytest.raises(WriteNotAllowedError) as refused:
        check_write("checkpoint_uri", "s3://other/ckpt", prefixes)
    assert "'s3://other/ckpt'" in str(
        refused.value
    ) and "add it to the trainium connection's allowed_output_prefixes" in str(refused.value)


def test_a_link_under_the_root_does_not_take_a_jobs_writes_outside(tmp_path):
    """A write URI is resolved with ``os.path.realpath`` like an input, and so is the root: a link inside the root
    that points outside is outside, a root reached through a link is the root."""
    from airflow_provider_trainium.neuron.inputs import WriteNotAllowedError, allowed_prefixes, check_write

    real_root, outside = tmp_path / "real-root", tmp_path / "outside"
    real_root.mkdir(), outside.mkdir()
    (real_root / "runs").symlink_to(outside)
    linked_root = tmp_path / "root"
    linked_root.symlink_to(real_root)
    prefixes = allowed_prefixes(linked_root.as_uri())
    with pytest.raises(WriteNotAllowedError):
        check_write("output_uri", f"{linked_root}/runs/model", prefixes)
    assert check_write("output_uri", f"{real_root}/checkpoints/a", prefixes)
