"""Triggers that wait on remote Trainium jobs in the triggerer."""
