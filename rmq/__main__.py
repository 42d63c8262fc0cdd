import sys

from rmq.tools.cli import main

sys.exit(main())
