import sys

from npupack.cli import main

sys.exit(main())
