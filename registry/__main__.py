import sys

from registry.commands import main

sys.exit(main())
