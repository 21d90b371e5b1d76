"""Benchmarks: every tier beside the anchors the field uses, in one run, written to figures/data/."""
