"""imapd_harness — shim kept for tests written against the old name: the imapd harness (Imapd,
the Raw line client) now lives in tests/lib/heronlib.py (remove once nothing imports it)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import *  # noqa: E402,F401,F403
from heronlib import Imapd, free_port, sha256_hash  # noqa: E402,F401
from heronlib import IMAP_PASSWORD as PASSWORD, IMAP_QUOTAS as QUOTAS  # noqa: E402,F401
from heronlib import IMAP_USERS as USERS, ImapRaw as Raw  # noqa: E402,F401
