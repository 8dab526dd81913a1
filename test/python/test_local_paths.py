"""The local mode's own files in a shared directory: its run directory and
lock files are never followed through a link another user planted."""

import os

import pytest

from shardfeed import ShardfeedError, _local


def test_a_run_directory_that_is_a_link_is_refused(tmp_path, monkeypatch):
    runtime, target = tmp_path / "runtime", tmp_path / "victim"
    runtime.mkdir()
    target.mkdir(mode=0o700)
    (runtime / f"shardfeed-{os.getuid()}").symlink_to(target)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(ShardfeedError, match="is a symbolic link or not a directory"):
        _local._run_dir()
    assert list(target.iterdir()) == []


def test_a_run_directory_others_may_write_is_refused(tmp_path, monkeypatch):
    (tmp_path / f"shardfeed-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(tmp_path / f"shardfeed-{os.getuid()}", 0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(ShardfeedError, match="others may write it"):
        _local._run_dir()


def test_a_lock_file_that_is_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    run, fd = _local._run_dir()
    try:
        assert run == tmp_path / f"shardfeed-{os.getuid()}" and oct(os.stat(run).st_mode & 0o777) == "0o700"
        victim = tmp_path / "victim.txt"
        victim.write_text("keep me")
        (run / "k.lock").symlink_to(victim)
        with pytest.raises(ShardfeedError, match="is a symbolic link where shardfeed keeps its own file"):
            _local._open_new("k.lock", fd, "w")
        assert victim.read_text() == "keep me"
        with _local._open_new("own.lock", fd, "w") as f:
            f.write("x")
        assert oct(os.stat(run / "own.lock").st_mode & 0o777) == "0o600"
    finally:
        os.close(fd)
