"""The input allowlist: a URI is under a prefix only at a path boundary."""

from airflow_provider_trainium.neuron.inputs import is_under


def test_a_sibling_whose_name_starts_with_the_prefix_is_not_under_it():
    assert is_under("file:///data/root/x", ["file:///data/root"])
    assert is_under("file:///data/root", ["file:///data/root"])
    assert not is_under("file:///data/root2/x", ["file:///data/root"])
    assert not is_under("s3://bucket-evil/x", ["s3://bucket"])
