"""mtadlib.py — shim kept for tests written against the old name: the harness of mtad's
end-to-end tests now lives in tests/lib/heronlib.py (remove once nothing imports mtadlib)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import *  # noqa: E402,F401,F403
from heronlib import (DOMAIN, Mtad, RelayHandler, RelayTarget, Store,  # noqa: E402,F401
                      check_sanitizers, free_port, make_cert, run_suite, run_tests, ssha,
                      wait_for, wait_port, write_users)
