"""Operator programs: the command line, the embedded default, shipped files, the reference and threshold tools."""
