"""``python -m ao_calib.plot``: kept where users type it; the code lives in ``ao_calib.reporting.plot``."""

import sys

from ao_calib.reporting.plot import main

if __name__ == "__main__":
    sys.exit(main())
