import sys

from trainprof.cli import main

sys.exit(main())
