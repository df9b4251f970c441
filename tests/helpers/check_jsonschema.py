"""`check-jsonschema`, the standard tool an auditor validates documents with, run offline."""

from __future__ import annotations

import sys
from pathlib import Path

CHECK_JSONSCHEMA = str(Path(sys.executable).with_name("check-jsonschema"))
# Any download check-jsonschema tried would go through this closed port and fail the check.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": "", "no_proxy": ""}
