import sys

from found_rl.cli import main

sys.exit(main())
