import sys

from owc.cli import main

sys.exit(main())
