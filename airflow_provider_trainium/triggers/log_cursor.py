"""Moved to :mod:`airflow_provider_trainium.compute.log_cursor`; kept so existing imports keep working."""

from __future__ import annotations

from airflow_provider_trainium.compute.log_cursor import LogCursor, cursor_uri

__all__ = ["LogCursor", "cursor_uri"]
