"""paper-tables: recompute the published Cleanba tables."""


from analysis.cli import main
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER
from analysis.scoring.tables import paper_table

MAIN = PAPER / "main_10CPU.csv"


def _col(res, prefix):
    return next(i for i, c in enumerate(res.columns) if c.startswith(prefix))


def test_main_10cpu_median_hns_and_runtime_ratios():
    res = paper_table(MAIN)
    assert res.games == 57
    assert res.median_hns_percent[_col(res, "Cleanba IMPALA,")] == 165.8
    assert res.median_hns_percent[_col(res, "Monobeast IMPALA,")] == 159.7
    assert res.median_hns_percent[_col(res, "Moolib IMPALA,")] == 124.4
    assert res.runtime_ratio[_col(res, "Monobeast IMPALA,")] == 6.81
    assert res.runtime_ratio[_col(res, "Moolib IMPALA,")] == 1.20
    assert res.runtime_ratio[_col(res, "Cleanba IMPALA,")] == 1.0
    assert res.claims[_col(res, "Monobeast IMPALA,")]["runtime_ratio"] == "6.8x"


def test_spec_out_and_table_without_reference():
    res = paper_table(PAPER / "spec_out.csv")
    assert res.runtime_ratio[_col(res, "Monobeast IMPALA,")] == 4.69
    assert res.runtime_ratio[_col(res, "Moolib IMPALA,")] == 1.92
    # Without an IMPALA column the asynchronous Cleanba PPO column is the reference.
    sync = paper_table(PAPER / "sync_or_not_sync.csv")
    assert sync.reference_column == "Cleanba PPO, 8 A100, 46 CPU"
    assert "relative to Cleanba PPO, 8 A100, 46 CPU" in sync.notes[0]
    ref = sync.columns.index(sync.reference_column)
    assert sync.runtime_ratio[ref] == 1.0 and all(r > 0 for r in sync.runtime_ratio)


def test_cli_prints_numbers_next_to_claims(tmp_path, capsys):
    assert main(["paper-tables", "--table", str(MAIN), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "165.8%" in out and "~165%" in out and "6.81x" in out and "6.8x" in out
    assert (tmp_path / "paper_main_10CPU.csv").exists()
    assert (tmp_path / "runtimes_main_10CPU.png").stat().st_size > 10_000
    assert main(["paper-tables", "--table", str(tmp_path / "missing.csv")]) == 2
