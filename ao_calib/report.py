"""``python -m ao_calib.report``: kept where users type it; the code lives in ``ao_calib.reporting.report``."""

import sys

from ao_calib.reporting.report import main

if __name__ == "__main__":
    sys.exit(main())
