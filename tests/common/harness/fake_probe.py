"""A torch-free stand-in for harness/cells/probe.py that speaks the same protocol.

``--probe EXPR --out FILE -- PYTEST_ARGS``: write the facts file, exit 77 if the backend is
absent, else run pytest in-process. ``FAKE_PROBE_IMPORT_ERROR`` makes "torch" fail to import
(the facts file says why, exit 78); ``FAKE_PROBE_BACKEND_OK=0`` reports the backend absent.
"""

import json
import os
import sys

argv = sys.argv[1:]
cut = argv.index("--")
options = dict(zip(argv[:cut:2], argv[1:cut:2], strict=False))
if os.environ.get("FAKE_PROBE_IMPORT_ERROR"):  # like probe.py: say why, exit 78
    with open(options["--out"], "w") as fh:
        json.dump({"import_error": f"ImportError: {os.environ['FAKE_PROBE_IMPORT_ERROR']}"}, fh)
    sys.exit(78)
ok = os.environ.get("FAKE_PROBE_BACKEND_OK", "1") == "1"
facts = {
    "installed": {"torch": "2.6.0"},
    "torchao_cpp": True,
    "import_s": 0.0,
    "backend_ok": ok,
    "backend_error": None,
}
with open(options["--out"], "w") as fh:
    json.dump(facts, fh)
if not ok:
    sys.exit(77)
sys.path[0] = os.getcwd()
import pytest  # noqa: E402

sys.exit(pytest.main(argv[cut + 1 :]))
