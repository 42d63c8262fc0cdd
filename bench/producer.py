"""Producer benchmark: `rmq bench producer` (RocketMQ's benchmark/producer.sh) as a script.

    python -m rmq dev --store /tmp/bench-store &                  # a name server and a broker
    python bench/producer.py -n 127.0.0.1:9876 -t BenchTopic -w 1  -s 1024 --duration 20
    python bench/producer.py -n 127.0.0.1:9876 -t BenchTopic -w 64 -s 1024 --duration 20
    python bench/producer.py -n 127.0.0.1:9876 -t BenchTopic -w 1  -s 1024 --batch 32 --duration 20

One Producer with `-w` senders, each waiting for its answer before sending again (so `-w`
requests are in flight). Prints send TPS (messages/s), max and average round-trip time
and failures every `--interval` seconds, then a summary; a live table on a terminal.
Run the broker in its own process: in one process the two would share one CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.tools.bench import producer_main

if __name__ == "__main__":
    sys.exit(producer_main(sys.argv[1:]))
