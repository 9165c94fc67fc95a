"""report_files: the report directory writer shared by benchmark_report, fleet_report and spec_tune."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import files as rf


def test_first_write_creates_the_directory_and_every_file(tmp_path):
    out = tmp_path / "reports" / "h1" / "run1"
    files, changed = rf.write_report_files(str(out), {"b.md": b"# b\n", "a.json": b"{}\n"})
    assert files == [str(out / "a.json"), str(out / "b.md")]          # sorted by name
    assert changed == files
    assert (out / "a.json").read_bytes() == b"{}\n"
    assert (out / "b.md").read_bytes() == b"# b\n"
    assert stat.S_IMODE(os.stat(out / "a.json").st_mode) == 0o644
    assert sorted(os.listdir(out)) == ["a.json", "b.md"]                # no temporary file left behind


def test_same_bytes_are_not_rewritten_and_only_the_changed_file_counts(tmp_path):
    out = tmp_path / "r"
    rf.write_report_files(str(out), {"a": b"1", "b": b"2"})
    before = os.stat(out / "a").st_ino
    files, changed = rf.write_report_files(str(out), {"a": b"1", "b": b"3"})
    assert files == [str(out / "a"), str(out / "b")]
    assert changed == [str(out / "b")]
    assert os.stat(out / "a").st_ino == before                          # untouched, not replaced
    assert (out / "b").read_bytes() == b"3"


def test_check_mode_names_the_files_and_writes_nothing(tmp_path):
    out = tmp_path / "new"
    files, changed = rf.write_report_files(str(out), {"a": b"1"}, check_mode=True)
    assert changed == [str(out / "a")] and files == changed
    assert not out.exists()


def test_an_unwritable_directory_names_the_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(rf.ReportWriteError) as err:
        rf.write_report_files(str(blocker / "sub"), {"a": b"1"})
    assert err.value.path == str(blocker / "sub" / "a")
    assert str(err.value).startswith("cannot write %s: " % (blocker / "sub" / "a"))


@pytest.mark.parametrize("value, ok", [("20261201T060000Z", True), ("ab-1.mtp_on", True), ("a/b", False),
                                       ("..", False), (".", False), ("", False), ("two words", False)])
def test_run_id_problem(value, ok):
    problem = rf.run_id_problem("run_id", value)
    if ok:
        assert problem is None
    else:
        assert problem == "run_id=%r: use only letters, digits, '.', '_' and '-' (it is a directory name)" % value


def test_plot_dir_is_removed_even_when_drawing_fails(tmp_path):
    seen = []
    with pytest.raises(RuntimeError):
        with rf.plot_dir() as d:
            seen.append(d)
            open(os.path.join(d, "x.png"), "wb").close()
            raise RuntimeError("matplotlib failed")
    assert seen and not os.path.exists(seen[0])


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "r"
    out.mkdir()

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rf.os, "rename", refuse)
    with pytest.raises(rf.ReportWriteError) as err:
        rf.write_report_files(str(out), {"a": b"1"})
    assert "No space left on device" in str(err.value)
    assert os.listdir(out) == []


def test_a_directory_where_the_file_belongs_is_named(tmp_path):
    out = tmp_path / "r"
    (out / "a").mkdir(parents=True)
    with pytest.raises(rf.ReportWriteError) as err:
        rf.write_report_files(str(out), {"a": b"1"})
    assert err.value.path == str(out / "a")
