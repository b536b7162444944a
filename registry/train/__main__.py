import sys

from registry.train.loop import main

sys.exit(main(sys.argv[1:]))
