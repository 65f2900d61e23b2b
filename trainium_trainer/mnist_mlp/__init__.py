"""MNIST-style MLP: the ECS + Trn1 recipe's model (784-120-84-10), input size taken from the data."""
