"""The training and evaluation data: SQuAD-format questions (BIG-bench tarball) and the verifier's claim pairs."""
