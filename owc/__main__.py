"""``python3 -m owc``. A Ctrl-C before ``main`` has installed its own handling (while the modules load) is
still exit 130, without a traceback."""

import sys

try:
    from owc.cli import main

    code = main()
except KeyboardInterrupt:
    code = 130
sys.exit(code)
