"""The Raft core of DLedger broker groups: sans-IO (state machine in, actions out).

`core.RaftNode` is one member; `messages` holds DLedger's peer messages and their JSON.
Trio drives it in a broker; tests/raft/sim.py drives it deterministically under faults.
"""
