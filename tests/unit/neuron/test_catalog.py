import pytest

from airflow_provider_trainium.neuron.catalog import CATALOG, get_instance_type


@pytest.mark.parametrize(
    ("name", "chips", "cores", "efa"),
    [
        ("trn1.2xlarge", 1, 2, 0),
        ("trn1.32xlarge", 16, 32, 8),
        ("trn1n.32xlarge", 16, 32, 16),
        ("trn2.48xlarge", 16, 64, 16),
        ("trn3.48xlarge", 16, 64, 16),
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


def test_trn3_is_sixteen_trainium3_chips_of_eight_neuroncore_v4_at_logical_core_size_2():
    it = get_instance_type("trn3.48xlarge")
    assert it.chips * 8 == it.neuron_cores * it.logical_core_size  # 8 physical NeuronCore-v4 per chip
    assert it.chip_bf16_tflops == 671.0 and it.peak_bf16_tflops == pytest.approx(16 * 671.0)
    assert (it.vcpus, it.memory_gib) == (192, 2048)  # a quarter of the Gen1 UltraServer's 768 vCPUs, 8,192 GiB


@pytest.mark.parametrize(
    ("name", "family", "generation"),
    [
        ("trn1.2xlarge", "trn1", "trn1"),
        ("trn1n.32xlarge", "trn1n", "trn1"),
        ("trn2.48xlarge", "trn2", "trn2"),
        ("trn3.48xlarge", "trn3", "trn3"),
    ],
)
def test_family_and_generation(name, family, generation):
    it = get_instance_type(name)
    assert (it.family, it.generation) == (family, generation)


def test_every_catalog_type_is_a_trainium_generation_with_physical_cores_that_fill_its_chips():
    for it in CATALOG.values():
        assert it.generation in {"trn1", "trn2", "trn3"}
        assert (it.neuron_cores * it.logical_core_size) % it.chips == 0
