import os
import sys
import time

entered = time.time()  # before torch: the start-up timeline in metrics.jsonl counts imports from here

from registry.train.loop import main  # noqa: E402

code = main(sys.argv[1:], entered=entered)
# A rank that is done leaves at once: the interpreter's own teardown of torch, accelerate and the
# process group (about 1 s a launch: docs/trainer.md, "Leaving") writes nothing a finished run
# needs. Every file is closed and every collective done by now; the streams and logging handlers
# are flushed here. An exception never gets this far and unwinds as usual.
import logging  # noqa: E402  (torch has imported it already)

logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
