"""Readers of the baselines' native logs, on files written here in their exact formats."""

import math

import pytest

from baselines.native_logs import NativeLogError, read_monobeast_logs, read_moolib_logs

# torchbeast/core/file_writer.py: "# " + fieldnames on tick 0, then csv.DictWriter rows;
# monobeast's stat keys follow `step`; mean_episode_return is nan when no episode ended.
MONOBEAST_HEADER = (
    "# _tick,_time,step,total_loss,mean_episode_return,pg_loss,baseline_loss,entropy_loss\n"
)
MONOBEAST_ROWS = (
    "0,1795314697.0080152,0,-1.1511461734771729,nan,-1.0849180221557617,0.0031250212341547012,-0.06935320049524307\n"
    "1,1795314697.277429,40,-1.140339970588684,nan,-1.0741856098175049,0.003198591060936451,-0.06935294717550278\n"
    "2,1795314697.5067399,80,2.5,3.0,2.0,0.5,-0.0693\n"
)

# moolib examples/common/record.py: csv.DictWriter(delimiter="\t") with a header; None
# statistics (StatMean with no samples) are written as empty cells.
MOOLIB_COLUMNS = [
    "local/mean_episode_return", "local/mean_episode_step", "local/SPS", "local/env_act_steps",
    "local/env_train_steps", "local/optimizer_steps", "local/running_reward",
    "local/running_step", "local/steps_done", "local/episodes_done",
    "local/unclipped_grad_norm", "local/model_version", "local/virtual_batch_size",
    "local/num_gradients",
]
MOOLIB_TEXT = (
    "\t".join(MOOLIB_COLUMNS) + "\n"
    + "\t\t30.2\t324\t320\t3\t0.0987\t41.0\t324\t0\t0.038\t3\t4.0\t1.0\n"
    + "1.0\t172.5\t51.1\t884\t880\t10\t1.12\t130.0\t884\t2\t0.19\t10\t4.0\t1.0\n"
)


def test_monobeast_commented_header_and_nan_returns(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text(MONOBEAST_HEADER + MONOBEAST_ROWS)
    log = read_monobeast_logs(p)
    assert log.columns[:3] == ["_tick", "_time", "step"]
    assert len(log.rows) == 3
    assert log.column("step") == [0.0, 40.0, 80.0]
    returns = log.column("mean_episode_return")
    assert math.isnan(returns[0]) and math.isnan(returns[1]) and returns[2] == 3.0
    assert log.rows[2]["total_loss"] == 2.5
    assert log.warnings == []


def test_monobeast_restart_appends_rows_without_a_second_header(tmp_path):
    # A restart with the same xpid appends rows with continued ticks and no header.
    p = tmp_path / "logs.csv"
    p.write_text(MONOBEAST_HEADER + MONOBEAST_ROWS + "3,1795314800.0,0,1.0,nan,1.0,0.0,0.0\n")
    log = read_monobeast_logs(p)
    assert log.column("_tick") == [0.0, 1.0, 2.0, 3.0]


def test_monobeast_torn_last_line_is_dropped_and_reported(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text(MONOBEAST_HEADER + MONOBEAST_ROWS + "3,1795314800.0,120,0.5")
    log = read_monobeast_logs(p)
    assert len(log.rows) == 3
    assert len(log.warnings) == 1 and "torn" in log.warnings[0] and ":5:" in log.warnings[0]


def test_monobeast_malformed_files_name_the_problem(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text("_tick,_time,step\n0,1.0,0\n")  # header not commented
    with pytest.raises(NativeLogError, match="commented header"):
        read_monobeast_logs(p)
    p.write_text(MONOBEAST_HEADER + "0,1.0,0\n" + MONOBEAST_ROWS)  # short row mid-file
    with pytest.raises(NativeLogError, match=r"logs.csv:2: 3 fields, expected 8"):
        read_monobeast_logs(p)
    p.write_text(MONOBEAST_HEADER + "0,1.0,0,x,nan,1,1,1\n")
    with pytest.raises(NativeLogError, match="'total_loss' holds 'x'"):
        read_monobeast_logs(p)


def test_moolib_empty_cells_read_as_nan(tmp_path):
    p = tmp_path / "logs.tsv"
    p.write_text(MOOLIB_TEXT)
    log = read_moolib_logs(p)
    assert log.columns == MOOLIB_COLUMNS
    assert len(log.rows) == 2
    first = log.rows[0]
    assert math.isnan(first["local/mean_episode_return"])
    assert math.isnan(first["local/mean_episode_step"])
    assert first["local/env_train_steps"] == 320.0
    assert log.column("local/model_version") == [3.0, 10.0]
    assert log.rows[1]["local/mean_episode_return"] == 1.0
    with pytest.raises(KeyError, match="no column 'step'"):
        log.column("step")


def test_moolib_malformed_files_name_the_problem(tmp_path):
    p = tmp_path / "logs.tsv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(NativeLogError, match="local/"):
        read_moolib_logs(p)
    p.write_text("")
    with pytest.raises(NativeLogError, match="empty file"):
        read_moolib_logs(p)
    p.write_text(MOOLIB_TEXT + "1.0\t2.0\n")  # torn last line
    log = read_moolib_logs(p)
    assert len(log.rows) == 2 and "torn" in log.warnings[0]
