"""The repository stands alone: README order, links that resolve, the example notebook runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_readme_opens_with_its_title_then_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0] == "# pmsim"
    body = [ln for ln in lines[1:] if ln.strip()]
    assert body[0] == "```sh" and body[1].startswith("pip install . && pmsim reproduce asap")
    assert "pip install '.[test]' && cargo test" in body[2] and body[2].endswith("&& pytest")
    assert body[3] == "```"


def test_readme_documents_the_exit_codes():
    text = (ROOT / "README.md").read_text()
    for code, word in [("0", "ok"), ("1", "finding"), ("2", "bad input"), ("3", "internal error")]:
        assert re.search(rf"^\| {code} \| .*{word}", text, re.M), code


@pytest.mark.parametrize("doc", ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))])
def test_documentation_links_resolve_and_no_missing_design_file(doc):
    path = ROOT / doc if doc == "README.md" else ROOT / "docs" / doc
    text = path.read_text()
    assert "DESIGN" + ".md" not in text, f"{doc} points to DESIGN.md, which is not in the repository"
    for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{doc}: link to {target} does not resolve"


def test_design_reference_covers_designs_and_the_checker():
    text = (ROOT / "docs" / "design.md").read_text()
    import pmsim

    for name, _ in pmsim.designs():
        assert f"`{name}`" in text, name
    assert "consistent" in text and "durable" in text and "persist order" in text


def test_example_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(ROOT / "examples" / "sweep.ipynb", as_version=4)
    monkeypatch.chdir(tmp_path)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("sim_time_ns" in str(o.get("data", {})) for o in outputs)
