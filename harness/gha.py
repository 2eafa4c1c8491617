"""The GitHub Actions matrix, from matrix.toml through the same loader the noxfile uses.

    python -m harness.gha [--tier core] [--tier extended] [--backend cpu] ...

prints ``{"include": [...]}``: one entry per cell, with the nox session to run, the runner
labels from the backend's ``runs_on``, and the artifact name the cell uploads. Standard library.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness import runner, spec


def github_matrix(
    matrix: spec.Matrix, tiers: list[str], backends: list[str] | None = None
) -> dict[str, Any]:
    include = []
    for cell in matrix.cells(tiers=tiers):
        if backends and cell.backend.name not in backends:
            continue
        session = runner.cell_name(cell)
        include.append(
            {
                "session": session,
                "cell": cell.id,
                "python": cell.python,
                "torch": cell.torch.pin,
                "torchao": cell.torchao.pin,
                "backend": cell.backend.name,
                "tier": cell.tier,
                "runs-on": list(cell.backend.runs_on),
                "artifact": f"reports-{session}",
                "timeout-minutes": -(-cell.timeout_s // 60) + 10,  # + install and upload
            }
        )
    return {"include": include}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.gha")
    parser.add_argument("--tier", action="append", choices=spec.TIERS)
    parser.add_argument("--backend", action="append")
    parser.add_argument("--matrix", default=str(spec.DEFAULT_PATH))
    args = parser.parse_args(argv)
    matrix = spec.load(args.matrix)
    unknown = sorted(set(args.backend or ()) - set(matrix.backends))
    if unknown:
        parser.error(f"unknown backend {unknown[0]!r}; accepted: {sorted(matrix.backends)}")
    print(json.dumps(github_matrix(matrix, args.tier or ["core"], args.backend)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
