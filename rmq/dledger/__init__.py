"""A DLedger group member on Trio: the Raft core (rmq.raft) driven over rmq.remoting, its log
in DLedger's files (rmq.store.dledger_log). Brokers' DLedger CommitLogs (rmq.broker.dledger)
and the controller (rmq.controller) run one each."""
