"""The native training stack (``TRAINIUM_STACK=native``): plain PyTorch on device ``neuron`` (TorchNeuron) or
``cpu``, with standard torch.distributed (FSDP2, DTensor, DCP). Imports no torch-xla."""
