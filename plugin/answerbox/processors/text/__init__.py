"""Text shared by the processors: passages of a hit, sentences, answer normalisation."""
