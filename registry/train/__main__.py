import os
import sys
import time

entered = time.time()  # before torch: the start-up timeline in metrics.jsonl counts imports from here

from registry.train.loop import main  # noqa: E402

code = main(sys.argv[1:], entered=entered)
# A rank of a one-node run that is done leaves at once: the interpreter's own teardown of torch,
# accelerate and the process group (about 1 s a launch: docs/trainer.md, "Leaving") writes nothing a
# finished run needs. Every file is closed and every collective done by now; the streams and
# logging handlers are flushed here. Over several nodes the usual exit stays: there the other
# nodes' launchers still talk to a store that a node leaving early takes down with it. An
# exception never gets this far and unwinds as usual.
if os.environ.get("WORLD_SIZE", "1") == os.environ.get("LOCAL_WORLD_SIZE", "1"):
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
