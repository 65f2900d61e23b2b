"""Measured comparisons, one command each."""
