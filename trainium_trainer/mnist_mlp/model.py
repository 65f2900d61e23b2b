from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """784-120-84-10 with ReLU and log_softmax, as in the ECS + Trn1 recipe; ``in_features`` from the data."""

    def __init__(self, in_features: int = 784, hidden: tuple[int, int] = (120, 84), classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return torch.log_softmax(self.fc3(x), dim=-1)
