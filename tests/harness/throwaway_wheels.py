"""Throwaway wheels for the harness's tests of installs and listings: real, minimal, pure-Python
wheels written byte by byte (a folder of them is an index pip and uv read with --find-links)."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path


def wheel(
    folder: Path, name: str, version: str, source: str, requires: tuple[str, ...] = ()
) -> Path:
    """A minimal, valid pure-Python wheel (RECORD with hashes), written byte by byte."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": source,
        f"{dist}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_bisect\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = folder / f"{name}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    out.write_bytes(buffer.getvalue())
    return out
