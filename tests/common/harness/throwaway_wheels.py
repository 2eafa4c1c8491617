"""Throwaway wheels for the harness's tests of installs and listings: real, minimal, pure-Python
wheels written byte by byte (a folder of them is an index pip and uv read with --find-links), and
a real venv to install them into."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from harness.matrix.interpreters import uv_bin


def wheel(
    folder: Path,
    name: str,
    version: str,
    source: str,
    requires: tuple[str, ...] = (),
    *,
    package: str | None = None,
) -> Path:
    """A minimal, valid pure-Python wheel (RECORD with hashes), written byte by byte: the
    distribution ``name`` holding the package ``package`` (default: ``name``)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{package or name}/__init__.py": source,
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


def outer_site_venv(folder: Path) -> Path:
    """A real venv at ``folder`` (its interpreter returned); pytest and pytest-reportlog come from
    this interpreter's site-packages through a .pth file, so nothing but the throwaway packages is
    ever installed into it."""
    subprocess.run([uv_bin(), "venv", "-q", "--python", sys.executable, str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_outer_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python
