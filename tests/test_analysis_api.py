"""The public Python API: the worked example of docs/analysis.md runs as a doctest on the
shipped reference records, and every name of analysis.__all__ resolves."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

from harness_cli import ROOT

import analysis


def test_docs_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)  # the example names results/reference/ relative to the root
    res = doctest.testfile(str(ROOT / "docs" / "analysis.md"), module_relative=False,
                           optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 10 and res.failed == 0


def test_every_public_name_resolves():
    assert sorted(analysis.__all__) == sorted(analysis._API)
    for name in analysis.__all__:
        module, _, attribute = analysis._API[name].partition(":")
        assert getattr(analysis, name) is getattr(importlib.import_module(module),
                                                  attribute or name)
    assert "analysis" not in dir(analysis) and "gate" in dir(analysis)


def test_import_stays_light():
    """`import analysis` and its error type load neither SciPy nor matplotlib."""
    code = ("import sys, analysis; from analysis.errors import AnalysisError; "
            "print(sorted(m for m in ('scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"
