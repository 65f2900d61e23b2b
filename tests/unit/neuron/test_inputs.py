"""The input allowlist: a URI is under a prefix only at a path boundary."""

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
