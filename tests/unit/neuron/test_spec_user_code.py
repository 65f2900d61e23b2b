"""A user's job in the spec: a ``command`` instead of an entry point, sent to the launcher as ``--command``."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError


def test_the_spec_sends_a_users_command_and_marks_user_code():
    spec = JobSpec(name="j", command=("python", "train.py"), args=("--epochs", "2"), instance_type="trn1.2xlarge")
    assert launcher_arguments(spec) == ["--nodes=1", "--nproc-per-node=2", "--user-code", "--command", "--",
                                        "python", "train.py", "--epochs", "2"]  # fmt: skip
    project = JobSpec(name="j", entry_point="trainium_trainer.mnist_mlp.train", instance_type="trn1.2xlarge")
    assert "--user-code" not in launcher_arguments(project)  # the project's trainers write to their URIs
    every = spec.with_changes(all_nodes_outputs=True)
    assert "--all-nodes-outputs" in launcher_arguments(every)


def test_a_spec_names_a_module_or_a_command_not_both():
    with pytest.raises(JobSpecError, match="either entry_point"):
        JobSpec(name="j", entry_point="m", command=("python", "x.py")).validate()
    with pytest.raises(JobSpecError, match="dotted Python module"):
        JobSpec(name="j").validate()


def test_later_fields_stay_out_of_an_older_specs_hash():
    spec = JobSpec(name="j", entry_point="trainium_trainer.allreduce")
    assert not {"command", "code_uri", "secrets", "all_nodes_outputs"} & set(spec.to_dict())
    assert JobSpec.from_dict(spec.to_dict()) == spec
    user = JobSpec(name="j", command=("python", "t.py"), code_uri="s3://b/code/1", secrets={"T": "ssm:/t"})
    assert JobSpec.from_dict(user.to_dict()) == user and user.content_hash() != spec.content_hash()
