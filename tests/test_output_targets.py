"""Where outputs go: a regular file or a new name is replaced atomically, a stream (``-``, the process's own stdout,
a character device) is written in place, anything else is refused; nothing a run did not create is ever replaced.

Run as root (CI containers), renaming a temporary file over /dev/null or /dev/stdout replaces the machine's device
node. These tests never touch the real /dev: they use look-alikes made in a temporary folder (a FIFO, a socket, a
symlink to /proc/self/fd/1, a pseudo-terminal this test opens) and check what is there afterwards.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from daydream.api.demo import bundled_example
from daydream.errors import DaydreamError
from daydream.files import check_output_path, output_target, remove_stale_temporaries, temporary_file, write_atomically

SCENARIOS = '[[scenario]]\nname = "faster"\nscripts = ["faster.whatif"]\n'


def cli(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    return {
        stat.S_IFIFO: "fifo",
        stat.S_IFSOCK: "socket",
        stat.S_IFLNK: "symlink",
        stat.S_IFCHR: "char",
        stat.S_IFREG: "file",
        stat.S_IFDIR: "dir",
    }[stat.S_IFMT(mode)]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".daydream-" in p.name)


@pytest.fixture
def unix_socket(tmp_path: Path):
    s = socket.socket(socket.AF_UNIX)
    path = tmp_path / "sock"
    s.bind(str(path))
    yield path
    s.close()


@pytest.fixture
def pty_slave(tmp_path: Path):
    """A character device of this test's own: a pseudo-terminal, its master end to read what was written."""
    master, slave = os.openpty()
    yield master, os.ttyname(slave)
    os.close(master)
    os.close(slave)


def read_pty(master: int, size: int, timeout: float = 5) -> bytes:
    got = b""
    deadline = time.monotonic() + timeout
    while len(got) < size and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            got += os.read(master, 65536)
    return got


class PtyReader(threading.Thread):
    """Reads a pseudo-terminal's master end while a process writes to it (a full terminal buffer would block it)."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self.master, self.data, self.done = master, b"", threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.data += read_pty(self.master, 1 << 30, timeout=0.2)


# --- the decision, one kind of target at a time --------------------------------------------------------------------


def test_a_new_name_and_a_regular_file_are_replaced_atomically(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    write_atomically(out, b"one")
    assert out.read_bytes() == b"one" and kind(out) == "file"
    out.chmod(0o600)
    write_atomically(out, b"two")
    assert out.read_bytes() == b"two" and stat.S_IMODE(out.stat().st_mode) == 0o600  # the replaced file's mode kept
    assert leftovers(tmp_path) == []


def test_a_symlink_to_a_file_writes_the_file_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "sub" / "real.json"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomically(link, b"new")
    assert kind(link) == "symlink" and real.read_bytes() == b"new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "sub" / "made.json")
    write_atomically(dangling, b"made")
    assert kind(dangling) == "symlink" and (tmp_path / "sub" / "made.json").read_bytes() == b"made"


@pytest.mark.parametrize("via_link", [False, True])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, via_link: bool) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = fifo
    if via_link:
        target = tmp_path / "link"
        target.symlink_to(fifo)
    with pytest.raises(
        DaydreamError, match=r"is a FIFO \(named pipe\)" + (r" \(through a symlink\)" if via_link else "")
    ):
        write_atomically(target, b"x", "--save")
    assert kind(fifo) == "fifo" and kind(target) == ("symlink" if via_link else "fifo")
    assert leftovers(tmp_path) == []


def test_a_socket_is_refused(tmp_path: Path, unix_socket: Path) -> None:
    with pytest.raises(DaydreamError, match="is a socket; outputs go to regular files"):
        check_output_path(unix_socket, [], "--export-trace")
    with pytest.raises(DaydreamError, match="is a socket"):
        write_atomically(unix_socket, b"x")
    assert kind(unix_socket) == "socket"


def test_a_character_device_is_written_in_place(tmp_path: Path, pty_slave: tuple[int, str]) -> None:
    master, slave = pty_slave
    link = tmp_path / "tty"
    link.symlink_to(slave)
    assert output_target(link).stream == "device"
    write_atomically(link, b"through the device\n")
    assert b"through the device" in read_pty(master, 18)
    assert kind(link) == "symlink" and kind(Path(slave)) == "char"  # nothing renamed over either
    assert leftovers(tmp_path) == []


def test_directories_and_missing_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DaydreamError, match="is a directory"):
        write_atomically(tmp_path, b"x")
    with pytest.raises(DaydreamError, match="does not exist"):
        write_atomically(tmp_path / "no" / "x.json", b"x")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(DaydreamError, match="cannot write"):
        write_atomically(loop, b"x")


def test_dash_is_standard_output(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    assert output_target("-").stream == "stdout"
    write_atomically("-", b"to stdout\n")
    assert capfdbinary.readouterr().out == b"to stdout\n"


# --- stale temporaries, interrupted writes ---------------------------------------------------------------------------


def test_a_failed_write_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(out, b"new")
    assert out.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_dead_runs_temporaries_are_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".out.json.daydream-{dead_pid}-abc123.tmp"
    stale.write_bytes(b"half")
    fd, live = temporary_file(tmp_path, "out.json")  # this process's: alive
    os.close(fd)
    other = tmp_path / f".other.json.daydream-{dead_pid}-xyz.tmp"
    other.write_bytes(b"half")
    unrelated = tmp_path / ".out.json.mine.tmp"
    unrelated.write_bytes(b"not ours")
    write_atomically(tmp_path / "out.json", b"whole")
    assert not stale.exists() and Path(live).exists() and other.exists() and unrelated.exists()
    assert remove_stale_temporaries(tmp_path) == [str(other)]


# --- at the command line ----------------------------------------------------------------------------------------------


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    dst = tmp_path / "t.json.gz"
    shutil.copyfile(bundled_example(), dst)
    return dst


def test_compare_save_onto_look_alike_devices(tmp_path: Path, trace: Path, pty_slave: tuple[int, str]) -> None:
    """The issue's case: `compare T S.toml --save /dev/null` made /dev/null a regular file (as root)."""
    master, slave = pty_slave
    scenarios = tmp_path / "s.toml"
    scenarios.write_text(SCENARIOS)
    (tmp_path / "faster.whatif").write_text("scale cpu by 0.5\n")
    tty = tmp_path / "null-like"
    tty.symlink_to(slave)
    reader = PtyReader(master)
    reader.start()
    out = cli("compare", str(trace), str(scenarios), "--save", str(tty))
    reader.done.set()
    reader.join()
    assert out.returncode == 0, out.stderr
    assert kind(tty) == "symlink" and kind(Path(slave)) == "char"
    assert b'"scenarios"' in reader.data
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = cli("compare", str(trace), str(scenarios), "--save", str(fifo))
    assert out.returncode == 1 and "is a FIFO" in out.stderr and "Traceback" not in out.stderr
    assert kind(fifo) == "fifo" and leftovers(tmp_path) == []


def test_export_trace_onto_a_link_to_stdout_writes_stdout(tmp_path: Path, trace: Path) -> None:
    """`--export-trace L`, L a symlink to /proc/self/fd/1 (what /dev/stdout is), replaced L with a file."""
    link = tmp_path / "stdout-like"
    link.symlink_to("/proc/self/fd/1")
    out = cli("simulate", str(trace), "--export-trace", str(link), "--json")
    assert out.returncode == 0, out.stderr
    assert kind(link) == "symlink" and os.readlink(link) == "/proc/self/fd/1"
    assert out.stdout.startswith('{"traceEvents"')  # the timeline, then the --json object, both on stdout
    assert leftovers(tmp_path) == []


def test_export_trace_to_stdout_redirected_into_a_file_is_the_stream(tmp_path: Path, trace: Path) -> None:
    """`--export-trace /dev/stdout > out.txt`: the export and the table both go to the redirected stdout, in order,
    instead of the export replacing out.txt under the shell's feet (and the table going to an unlinked file)."""
    link = tmp_path / "stdout-like"
    link.symlink_to("/proc/self/fd/1")
    out = tmp_path / "out.txt"
    with out.open("wb") as fh:
        got = subprocess.run(
            [sys.executable, "-m", "daydream", "simulate", str(trace), "--export-trace", str(link)],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=False,
            timeout=60,
        )
    assert got.returncode == 0, got.stderr
    text = out.read_text()
    assert text.startswith('{"traceEvents"') and "simulated timeline written to" in text


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_write_leaves_no_temporary(tmp_path: Path, sig: int) -> None:
    """SIGINT (exit 130) and SIGTERM (exit 143) while an output is being written: the old file stays whole and the
    temporary goes. The write is slowed on purpose so that the signal lands inside it."""
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    code = (
        "import sys, time, daydream.files as f, daydream.commands.cli as cli, daydream.commands.scripts as scripts\n"
        "real = f.os.replace\n"
        "def slow(a, b):\n"
        "    print('writing', flush=True); time.sleep(30); real(a, b)\n"
        "f.os.replace = slow\n"
        "scripts._cmd_check = lambda args: f.write_atomically(sys.argv[-1], b'new') or 0\n"
        "raise SystemExit(cli.main(['check', 'x.whatif', sys.argv[-1]]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert ("interrupted" if sig == signal.SIGINT else "terminated") in err and "Traceback" not in err
    assert out.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_killed_write_is_cleaned_by_the_next_run(tmp_path: Path, trace: Path) -> None:
    """SIGKILL cannot be caught: its temporary is removed by the next write of the same output."""
    out = tmp_path / "sim.json"
    code = (
        "import os, sys, daydream.files as f\n"
        "fd, tmp = f.temporary_file(sys.argv[1], 'sim.json'); os.write(fd, b'half'); print(tmp, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == -9 and len(leftovers(tmp_path)) == 1
    assert cli("simulate", str(trace), "--export-trace", str(out)).returncode == 0
    assert out.is_file() and leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("raised", "code", "line"),
    [("KeyboardInterrupt()", 130, "interrupted"), ("signals.Terminated()", 143, "terminated")],
)
def test_an_error_raised_while_a_signal_unwinds_is_the_signal(
    tmp_path: Path, raised: str, code: int, line: str
) -> None:
    """A library's cleanup that fails on half-done work while Ctrl-C or SIGTERM unwinds the command (matplotlib's
    "Invalid bounding box" inside savefig, found by the fuzzer) reports the signal, not an internal error (exit 70)."""
    script = (
        "import sys, daydream.commands.cli as cli, daydream.commands.scripts as scripts, daydream.signals as signals\n"
        "def cmd(args):\n"
        "    try:\n"
        f"        raise {raised}\n"
        "    finally:\n"
        "        raise ValueError('Invalid bounding box')\n"
        "scripts._cmd_check = cmd\n"
        "raise SystemExit(cli.main(['check', 'x.whatif']))\n"
    )
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert got.returncode == code and got.stderr.strip() == f"daydream: {line}", got.stderr
