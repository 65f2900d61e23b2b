"""Which Dockerfile builds the training image of each stack, so a run on the native stack gets a native image.

The two images share the container contract (``neuron/container_contract.py``) and differ in what they carry:
``docker/Dockerfile`` is the XLA stack over the Neuron 2.28 DLC, ``docker/native/Dockerfile`` the native stack
(TorchNeuron, Neuron 2.33) built from Ubuntu. Each records its Neuron runtime in an image label, which is how
``neuron.releases.image_stack`` tells them apart afterwards.
"""

from __future__ import annotations

from trainium_trainer import boundary

#: Dockerfile path relative to the repository root (the build context), per stack.
DOCKERFILES: dict[str, str] = {
    boundary.STACK_XLA: "docker/Dockerfile",
    boundary.STACK_NATIVE: "docker/native/Dockerfile",
}


def dockerfile_for(stack: str) -> str:
    """The Dockerfile of ``stack``'s image; ValueError naming the stacks for anything else."""
    try:
        return DOCKERFILES[stack]
    except KeyError:
        raise ValueError(f"no training image for stack {stack!r}: one of {', '.join(DOCKERFILES)}") from None


def image_stack_for_build(stack: str | None, instance_type: str | None) -> str:
    """The stack a build task's image is for: ``xla`` when none is given (the image every build made before
    stacks existed); ``auto`` resolved for ``instance_type`` as a job without an image resolves it, since the
    image being built is the one the run's jobs get. The release table refuses a stack the family cannot train."""
    from airflow_provider_trainium.neuron.releases import resolve_stack, stack_problem
    from airflow_provider_trainium.neuron.stack_names import STACK_AUTO

    chosen = str(stack or "").strip()
    if not chosen:
        return boundary.STACK_XLA
    if chosen == STACK_AUTO:
        if not instance_type:
            raise ValueError("stack 'auto' needs the run's instance_type to choose which image to build")
        return resolve_stack(chosen, instance_type)
    dockerfile_for(chosen)  # an unknown stack fails here, naming the known ones
    if instance_type:
        problem = stack_problem(chosen, instance_type)
        if problem:
            raise ValueError(problem)
    return chosen
