"""Errors the store raises. Put and get outcomes are statuses, not exceptions; these are for
conditions that stop the store itself from opening or working."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot open or continue: unreadable files, inconsistent configuration."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's lock file."""
