import pytest

from airflow_provider_trainium.neuron.catalog import CATALOG, get_instance_type
from airflow_provider_trainium.neuron.releases import auto_stack, stack_problem
from airflow_provider_trainium.neuron.spec import JobSpec


@pytest.mark.parametrize(
    ("name", "chips", "cores", "efa"),
    [
        ("trn1.2xlarge", 1, 2, 0),
        ("trn1.32xlarge", 16, 32, 8),
        ("trn1n.32xlarge", 16, 32, 16),
        ("trn2.3xlarge", 1, 4, 0),
        ("trn2.48xlarge", 16, 64, 16),
        ("trn2u.48xlarge", 16, 64, 16),
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
    ("name", "vcpus", "memory_gib", "max_nodes"),
    [("trn2.3xlarge", 12, 128, 1), ("trn2.48xlarge", 192, 2048, 64), ("trn2u.48xlarge", 192, 2048, 64)],
)
def test_trn2_types_are_trainium2_chips_of_eight_neuroncore_v3_at_logical_core_size_2(
    name, vcpus, memory_gib, max_nodes
):
    """docs/fidelity.md, "Trn2 instance types": EC2's specification table and the Neuron Trn2 page."""
    it = get_instance_type(name)
    assert it.logical_core_size == 2 and it.neuron_cores * 2 == it.chips * 8  # 8 physical NeuronCore-v3 per chip
    assert it.chip_bf16_tflops == 667.0
    assert (it.vcpus, it.memory_gib, it.max_nodes) == (vcpus, memory_gib, max_nodes)


def test_trn2_3xlarge_is_single_node_until_a_source_settles_its_efa():
    """The EC2 table lists EFA on its one network card, the Neuron Trn2 page says it has none: no EFA device
    is mapped and a multi-node job is refused rather than started on an interface that may not be there."""
    it = get_instance_type("trn2.3xlarge")
    assert it.efa_interfaces == 0 and not it.multi_node and it.efa_devices == ()
    assert it.neuron_devices == ("/dev/neuron0",)
    two_nodes = JobSpec(name="t", entry_point="m", instance_type="trn2.3xlarge", nodes=2, stack="native")
    assert any("nodes=2 on trn2.3xlarge" in p and "no EFA" in p for p in two_nodes.problems())


@pytest.mark.parametrize(
    ("name", "family", "generation"),
    [
        ("trn1.2xlarge", "trn1", "trn1"),
        ("trn1n.32xlarge", "trn1n", "trn1"),
        ("trn2.3xlarge", "trn2", "trn2"),
        ("trn2.48xlarge", "trn2", "trn2"),
        ("trn2u.48xlarge", "trn2u", "trn2"),
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


def test_trn2u_is_refused_until_the_release_table_names_its_family():
    """No release of neuron/releases.toml lists the trn2u family (its sources name trn1 and trn2), so a job on
    trn2u.48xlarge is refused naming the table, before anything is paid for; every other type has a stack. The
    set shrinks (and this test says so) once a release lists trn2u with its source."""
    untrainable = {name for name in CATALOG if stack_problem(auto_stack(name), name)}
    assert untrainable == {"trn2u.48xlarge"}
    problem = stack_problem("native", "trn2u.48xlarge")
    assert problem and "trn2u" in problem and "no stack in the release table trains there" in problem
