"""Test helpers: real servers on loopback."""
