"""stacklib.py — shim kept for tests written against the old name: Stack (scripts/stack up and
down), read_env, alive, processes_with now live in tests/lib/heronlib.py (remove once nothing
imports stacklib)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
# the old module put tests/mtad on sys.path: tests may import mtadlib after it
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mtad"))
from heronlib import *  # noqa: E402,F401,F403
from heronlib import (Stack, alive, processes_with, read_env, run_tests,  # noqa: E402,F401
                      wait_for)
