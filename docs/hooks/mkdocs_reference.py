"""MkDocs hook (``hooks:`` in mkdocs.yml): adds the generated pages to the site.

- ``reference/cli.md`` and ``reference/jobs.md``: rendered by ``docs/hooks/reference.py``
  from the argument parsers. That script imports slatelib, which the docs venv does not
  have, so it runs under the project's Python: ``$SLATELIB_DOCS_PYTHON``, else the
  checkout's ``.venv/bin/python`` (``make docs`` sets it).
- ``rfcs/index.md``: the list of ``docs/rfcs/*.md`` with their titles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _project_python() -> str:
    configured = os.environ.get("SLATELIB_DOCS_PYTHON")
    if configured:
        return configured
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _reference_pages() -> dict[str, str]:
    done = subprocess.run([_project_python(), str(HERE / "reference.py")], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError("docs/hooks/reference.py failed:\n" + done.stderr)
    pages: dict[str, str] = json.loads(done.stdout)
    return pages


def _rfc_index(docs_dir: Path) -> str:
    lines = ["# RFCs", "",
             "Format and protocol decisions of this project, one file each (cited in code as "
             "`docs/rfcs/NNNN-name.md`). SlateDB's own RFCs are listed in the "
             "[design notes](../design.md).", ""]
    for path in sorted((docs_dir / "rfcs").glob("[0-9]*.md")):
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        title = first[0].lstrip("#").strip() if first else path.stem
        lines.append(f"- [{title}]({path.name})")
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: Any) -> Files:
    docs_dir = Path(config["docs_dir"])
    pages = _reference_pages()
    pages["rfcs/index.md"] = _rfc_index(docs_dir)
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files
