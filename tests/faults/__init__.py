"""Fault injection across real processes: proxies, a nemesis, clusters and a checker.

A run (run.py) starts broker processes (clusters.py) with a Trio TCP proxy (proxy.py) on
every link between two members and on each member's link to the name server, sends through
them (load.py: our producer, long-lived and renewed, senders with a stale route, and the
official C++ client), applies a seeded schedule of faults (nemesis.py), heals everything and
checks what survived (checker.py, stores.py, watch.py). The tests here run short seeds;
``bench/nemesis.py`` runs long ones and prints a table, and replays a failing seed.
"""
