import pytest

from airflow_provider_trainium.neuron.catalog import get_instance_type


@pytest.mark.parametrize(
    ("name", "chips", "cores", "efa"),
    [
        ("trn1.2xlarge", 1, 2, 0),
        ("trn1.32xlarge", 16, 32, 8),
        ("trn1n.32xlarge", 16, 32, 16),
        ("trn2.48xlarge", 16, 64, 16),
    ],
)
def test_catalog_matches_the_design_table(name, chips, cores, efa):
    it = get_instance_type(name)
    assert (it.chips, it.neuron_cores, it.efa_interfaces) == (chips, cores, efa)
    assert it.neuron_devices == tuple(f"/dev/neuron{i}" for i in range(chips))
    assert len(it.efa_devices) == efa
    assert it.multi_node is (efa > 0)


def test_peak_flops_is_per_instance():
    assert get_instance_type("trn1.32xlarge").peak_bf16_tflops == pytest.approx(16 * 190.0)


def test_unknown_instance_type_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"p4d.24xlarge.*allowed: trn1.2xlarge, trn1.32xlarge"):
        get_instance_type("p4d.24xlarge")
