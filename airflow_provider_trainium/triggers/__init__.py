"""Triggers: wait for remote jobs in the triggerer."""
