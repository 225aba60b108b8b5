"""`python -m npbert ...`: the same as the `npbert` console script (see npbert/cli/)."""
import sys

from npbert.cli import main

if __name__ == "__main__":
    sys.exit(main())
