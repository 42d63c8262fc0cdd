"""DLedger groups: the Trio driver of the Raft core (node.py) over the remoting layer and
DLedger's file store. `python -m rmq.broker.dledger` runs one member on its own."""
