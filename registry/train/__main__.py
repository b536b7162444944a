import sys
import time

entered = time.time()  # before torch: the start-up timeline in metrics.jsonl counts imports from here

from registry.train.loop import main  # noqa: E402

sys.exit(main(sys.argv[1:], entered=entered))
