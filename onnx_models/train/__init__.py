"""Training: the reader/evaluator and the claim verifier, their checkpoints, averaging, and runs on a lent GPU."""
