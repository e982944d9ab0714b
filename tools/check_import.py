"""Check that `import ember._C` loads the build under test, not another one.

usage: python tools/check_import.py EXPECTED_LIB_DIR
"""
import os
import sys

import ember._C

expected = os.path.realpath(sys.argv[1]) + os.sep
where = os.path.realpath(ember._C.__file__)
print(f"ember._C loaded from {where}")
if not where.startswith(expected):
    sys.exit(f"error: expected ember._C from {expected}")
