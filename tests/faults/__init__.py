"""Fault injection across real processes: proxies, a nemesis, clusters and a checker."""
