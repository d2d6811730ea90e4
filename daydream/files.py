"""Output: every file daydream writes goes through here, so none is ever seen half-written and none overwrites an
input of the run; and messages quoting user input are cut to a readable length (:func:`clip`)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar

import msgspec

from daydream import signals
from daydream.errors import DaydreamError, about_file

# printed errors and warnings are cut to this many characters: a message quoting a huge name or line stays readable
MAX_MESSAGE = 2000


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out: for messages that quote user input."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


# TOML inputs (scenarios, cases, embedding tables) are a person's writing: kilobytes; a bound so /dev/zero-like input
# ends
MAX_TOML_BYTES = 16 * 1024 * 1024
FILE_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


_Reader = TypeVar("_Reader", bound=Callable[..., Any])


def _path_in_trace_errors(read: _Reader) -> _Reader:
    """A reader whose refusal, where it is a :class:`~daydream.errors.TraceError`, carries the path as its field."""

    @functools.wraps(read)
    def reading(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        with about_file(path):
            return read(path, *args, **kwargs)

    return reading  # type: ignore[return-value]


@_path_in_trace_errors
def open_input(
    path: str | os.PathLike[str],
    what: str = "file",
    error: type[DaydreamError] = DaydreamError,
    expected: str | None = None,
) -> BinaryIO:
    """Open an input for reading: every file daydream reads on a user's behalf comes through here. Only a regular
    file is opened; a FIFO (its open would block), a device such as /dev/zero (it never ends), a socket or a directory
    is refused, without blocking, by ``error`` naming the file and ``what`` it should have been (``expected``: how a
    refusal ends, e.g. "daydream reads trace files only"). The file may be swapped between the look and the open:
    what was opened is checked again."""
    name = os.fspath(path)
    tail = f"; {expected}" if expected else ""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        )
    except FileNotFoundError:
        raise error(f"{name}: no such {what}") from None
    except IsADirectoryError:
        raise error(f"{name}: is a directory, expected a {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{name}: too many levels of symbolic links (a symlink loop?)") from None
        if exc.errno == errno.ENOTDIR:
            raise error(f"{name}: no such {what} (a part of the path is not a directory)") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise error(f"{name}: is a socket, not a regular file{tail}") from None
        raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL byte
        raise error(f"{name!r}: not a valid file name") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise error(f"{name}: is a directory, expected a {what}")
        if not stat.S_ISREG(mode):
            raise error(
                f"{name}: is {FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular file{tail}"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@_path_in_trace_errors
def read_input(
    path: str | os.PathLike[str], what: str, limit: int, error: type[DaydreamError] = DaydreamError
) -> bytes:
    """The bytes of an input file (:func:`open_input`) of at most ``limit`` bytes, read no further than that: a
    file that grows while it is read cannot take more memory."""
    with open_input(path, what, error) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise error(f"{os.fspath(path)}: {size:,} bytes: a {what} holds at most {limit:,}")
            data = fh.read(limit + 1)
        except OSError as exc:
            raise error(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{os.fspath(path)}: more than {limit:,} bytes: a {what} holds at most {limit:,}")
    return data


def read_toml(path: str | os.PathLike[str], what: str, hint: str = "") -> dict[str, Any]:
    """A TOML input file (a cases, scenarios or tables file): its tables, or DaydreamError naming the file as
    ``what``. Read through :func:`open_input`, at most MAX_TOML_BYTES."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    p = Path(path)
    if not os.path.lexists(p):
        raise DaydreamError(f"{p}: no such {what}{hint}")
    data = read_input(p, what, MAX_TOML_BYTES)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DaydreamError(f"{p}: not a TOML {what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        detail = exc if isinstance(exc, tomllib.TOMLDecodeError) else "nested too deeply"
        raise DaydreamError(f"{p}: not a TOML {what}: {detail}") from None
    except ValueError:  # int() of a literal past Python's 4,300 digits: tomllib lets it out as it is
        raise DaydreamError(f"{p}: not a TOML {what}: a whole number of over 4,300 digits") from None
    check_numbers(doc, p)
    return doc


def read_json(path: str | os.PathLike[str], what: str, limit: int, hint: str = "") -> Any:
    """A JSON input file that a person or a command saved (``compare --save`` results): its value, every number in it
    checked (:func:`check_numbers`), or DaydreamError naming the file as ``what`` - for a file that is no JSON, is
    nested too deeply to read, or holds a number out of range. ``hint`` ends the message of a missing file."""
    p = Path(path)
    if not os.path.lexists(p):
        raise DaydreamError(f"{p}: no such {what}{hint}")
    data = read_input(p, what, limit)
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DaydreamError(f"{p}: not a {what}: {exc}") from None
    except RecursionError:  # msgspec recurses once per level: 100,000 nested brackets end here, with the file named
        raise DaydreamError(f"{p}: not a {what}: nested too deeply to read") from None
    check_numbers(doc, p)
    return doc


# A number read from an input file (TOML, saved JSON) or a flag is finite and at most this in magnitude: no count,
# size, time or factor daydream models comes near 1e18 (an exabyte; 31,700 years in microseconds), while anything past
# it overflows a float (10^400) or an int64, or turns a product into inf downstream. check_numbers checks files',
# input_number flags'.
MAX_INPUT_NUMBER = 1e18


def check_numbers(doc: Any, path: str | os.PathLike[str]) -> None:
    """Refuse, naming the file and the field (``scenario[2].params.speedup``), a number of ``doc`` (a file's decoded
    tables, lists and values) that is not finite (``inf``, ``nan``, ``1e400``) or exceeds MAX_INPUT_NUMBER in magnitude.
    Booleans are not numbers here. Iterative: a deep document cannot exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and value != value:
                bad = "nan"
            elif isinstance(value, float) and abs(value) == float("inf"):
                bad = "infinite (inf, or a number beyond a float such as 1e400)"
            elif abs(value) > MAX_INPUT_NUMBER:
                bad = shown_number(value) if isinstance(value, int) else f"{value:.3g}"
            else:
                continue
            field = clip(where or "(the whole file)", 200)
            raise DaydreamError(
                f"{os.fspath(path)}: {field}: {bad}: a number in a file is finite and at most 10^18 in magnitude"
            )


def json_bytes(obj: Any, indent: int | None = None, enc_hook: Callable[[Any], Any] | None = None) -> bytes:
    """``obj`` as JSON (``indent``: formatted, with a final newline). A string that cannot be UTF-8 (a file name
    with an undecodable byte, held by Python as a surrogate escape) is written with that byte as ``\\xNN``, as the
    terminal output shows it, instead of failing the command after its work."""
    try:
        data = msgspec.json.encode(obj, enc_hook=enc_hook)
    except UnicodeEncodeError:
        data = msgspec.json.encode(_encodable(msgspec.to_builtins(obj, enc_hook=enc_hook)))
    return msgspec.json.format(data, indent=indent) + b"\n" if indent is not None else data


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        return {utf8_text(k) if isinstance(k, str) else k: _encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    return value


def utf8_text(text: str) -> str:
    """``text`` made writable as UTF-8: undecodable file-name bytes as \\xNN, lone surrogates as \\uNNNN."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:  # a file name's undecodable bytes (os.fsdecode's surrogate escapes) as \xNN
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape such as "\ud800": as \ud800
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def write_atomically(path: str | os.PathLike[str], data: bytes, what: str | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    What is there decides how (:func:`output_target`): a regular file or a new name is replaced by renaming a
    temporary file over it (through a symlink: the file it points to, the link stays); ``-``, this process's
    standard output or error, and a character device (``/dev/null``) are streams, written in place and never
    renamed over; anything else is refused. An interrupted write (an exception, Ctrl-C, SIGTERM) removes its
    temporary file, and a write removes the ones a killed run left beside the same output."""
    target = output_target(path, what)
    if target.stream is not None:
        _write_stream(target, data)
        return
    assert target.folder is not None
    remove_stale_temporaries(target.folder, target.path.name)
    tmp = None

    def remove() -> None:  # failed or interrupted (KeyboardInterrupt, the CLI's SIGTERM): nothing left behind
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    try:
        with signals.on_abandon(remove):  # a signal's watchdog that ends the process removes it too
            fd, tmp = temporary_file(target.folder, target.path.name)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            # mkstemp makes it private: a new file gets the usual permissions, a replaced one keeps its own
            os.chmod(tmp, target.mode if target.mode is not None else 0o666 & ~_umask())
            _still_replaceable(target)
            os.replace(tmp, target.path)
            tmp = None
    except OSError as exc:
        raise DaydreamError(f"{target.path}: cannot write: {exc.strerror or exc}{_tail(what)}") from None
    finally:
        remove()


class OutputTarget(NamedTuple):
    """Where an output goes (:func:`output_target`): ``path`` the file to replace (a symlink's target) and ``folder``
    the folder its temporary file goes in; or ``stream`` set (``stdout``, ``stderr`` or ``device``) and the data
    written in place. ``mode``: the permissions of the file replaced, kept."""

    path: Path
    folder: Path | None
    stream: str | None = None
    mode: int | None = None


def output_target(path: str | os.PathLike[str], what: str | None = None) -> OutputTarget:
    """Decide how ``path`` is written, or DaydreamError (nothing written) when it cannot be: an empty name, a
    directory, a folder that does not exist, a FIFO, a socket or a block device (or a symlink to one) that is not
    this process's own standard output. ``what`` names the option in messages (``--export-trace``).

    Run as root, renaming a file over ``/dev/null`` or ``/dev/stdout`` would replace the machine's device node;
    so only regular files and new names are replaced, and character devices are written as streams."""
    text = os.fspath(path)
    tail = _tail(what)
    if not text.strip():
        raise DaydreamError(f"{what + ': ' if what else ''}empty file name; name the file to write")
    if text == "-":
        return OutputTarget(Path("-"), None, "stdout")
    given = Path(text)
    try:
        st = os.stat(given)  # through symlinks: what a write would reach
    except FileNotFoundError:
        st = None
    except OSError as exc:  # a symlink loop, a path through a file, no permission
        raise DaydreamError(f"{given}: cannot write: {exc.strerror or exc}{tail}") from None
    if st is None:  # a new name, or a symlink to a name that does not exist yet: the file is made there
        real = Path(os.path.realpath(given)) if given.is_symlink() else given
        folder = real.parent if str(real.parent) else Path(".")
        if not folder.is_dir():
            via = f" (the target of the symlink {given})" if real != given else ""
            raise DaydreamError(f"{real}: directory {folder} does not exist{via}{tail}")
        return OutputTarget(real, folder)
    mode = st.st_mode
    for fd, name in ((1, "stdout"), (2, "stderr")):
        with contextlib.suppress(OSError):
            own = os.fstat(fd)
            if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):  # /dev/stdout: piped, a terminal, or redirected
                return OutputTarget(given, None, name)
    if stat.S_ISREG(mode):
        real = Path(os.path.realpath(given))
        if not real.exists():  # /proc/PID/fd/N of a deleted file: no name to put the new file under
            raise DaydreamError(f"{given}: cannot write: it names a file that has no path{tail}")
        return OutputTarget(real, real.parent, mode=stat.S_IMODE(mode))
    if stat.S_ISDIR(mode):
        raise DaydreamError(f"{given}: is a directory, expected a file path to write{tail}")
    if stat.S_ISCHR(mode):
        return OutputTarget(given, None, "device")
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    via = " (through a symlink)" if given.is_symlink() else ""
    raise DaydreamError(
        f"{given}: is a {kind}{via}; outputs go to regular files, new names, '-' (standard output) "
        f"or a character device such as /dev/null{tail}"
    )


_KINDS = {stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFSOCK: "socket", stat.S_IFBLK: "block device"}
# a temporary file's name: .NAME.daydream-PID-RANDOM.tmp beside its output; NAME cut so the whole stays a legal name
_TEMP_NAME = 100
_STALE = re.compile(r"\.daydream-(\d+)-[A-Za-z0-9_]+\.tmp$")


def temporary_file(folder: str | os.PathLike[str], name: str) -> tuple[int, str]:
    """A new private file beside ``folder/name`` (its descriptor and path), named after the output and this
    process, so that :func:`remove_stale_temporaries` can tell a dead run's leftovers from a live one's."""
    return tempfile.mkstemp(prefix=f".{name[:_TEMP_NAME]}.daydream-{os.getpid()}-", suffix=".tmp", dir=folder)


def remove_stale_temporaries(folder: str | os.PathLike[str], name: str | None = None) -> list[str]:
    """Remove the temporary files a killed run left in ``folder`` (those of ``name``, or of every output): the
    ones whose process is gone. Returns their paths. Never fails: cleaning is not the work."""
    removed = []
    prefix = f".{name[:_TEMP_NAME]}.daydream-" if name is not None else "."
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix) or not entry.is_file(follow_symlinks=False):
                continue
            m = _STALE.search(entry.name)
            if m is None or _alive(int(m.group(1))):
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # another user's process, or a number that is none: leave the file
    return True


def _write_stream(target: OutputTarget, data: bytes) -> None:
    """Write to a stream in place: this process's stdout or stderr, or a character device opened without blocking
    (a terminal or a modem line would wait for a carrier) and checked to still be one once open."""
    if target.stream in ("stdout", "stderr"):
        stream = sys.stdout if target.stream == "stdout" else sys.stderr
        stream.flush()
        stream.buffer.write(data)
        stream.buffer.flush()
        return
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target.path, flags)
    except OSError as exc:
        raise DaydreamError(f"{target.path}: cannot write: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISCHR(os.fstat(fd).st_mode):  # swapped for something else since it was looked at
            raise DaydreamError(f"{target.path}: changed while it was opened; not written")
        with contextlib.suppress(OSError):
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise DaydreamError(f"{target.path}: cannot write: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _still_replaceable(target: OutputTarget) -> None:
    """Just before the rename: the name still holds a regular file or nothing (not a device put there since)."""
    try:
        st = os.lstat(target.path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise DaydreamError(
            f"{target.path}: changed to something other than a regular file while it was written; not replaced"
        )


def _tail(what: str | None) -> str:
    return f" ({what})" if what else ""


class InputFolder(str):
    """A folder among a run's inputs (:func:`check_output_path`): a job's folder of rank traces, whose every file
    at its top is read as a rank (``suffixes`` None), or an ``--include-dir``, from which scripts are read
    (``suffixes`` (".whatif",), at any depth). An output written there would change what the folder means - a
    phantom rank, a report.json that is no trace, a script - so none is."""

    suffixes: tuple[str, ...] | None

    def __new__(cls, path: str | os.PathLike[str], suffixes: tuple[str, ...] | None = None) -> InputFolder:
        folder = super().__new__(cls, os.fspath(path))
        folder.suffixes = suffixes
        return folder


def _in_folder(target: Path, folder: InputFolder) -> bool:
    """Whether writing ``target`` would put a file where ``folder`` is read from."""
    real, root = os.path.realpath(target), os.path.realpath(folder)
    if folder.suffixes is None:  # a job's folder: its top-level files are its ranks
        return os.path.dirname(real) == root
    return real.endswith(folder.suffixes) and os.path.commonpath([real, root]) == root


def check_output_path(
    out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None], what: str = "output"
) -> Path:
    """Refuse an output path before anything is written: what :func:`output_target` refuses (an empty name, a
    directory, a folder that does not exist, a FIFO, socket or block device), the same file as one of ``inputs``
    (this run's trace, scripts, ...; compared as files, so through symlinks and hard links too), or a file inside
    an input folder (:class:`InputFolder`) that reading the folder would take in. ``what`` names the option in
    messages (``--export-trace``). Returns the path the output will be written to."""
    text = os.fspath(out)
    target = output_target(out, what)
    inputs = list(inputs)
    if target.stream is None:
        for folder in inputs:
            if isinstance(folder, InputFolder) and _in_folder(target.path, folder):
                kind = (
                    "a job's folder: each file there is read as a rank"
                    if folder.suffixes is None
                    else ("an --include-dir: each .whatif file there is a script a run may include")
                )
                raise DaydreamError(
                    f"{text}: inside {folder}, {kind}; refusing to write there ({what}): write it outside the folder"
                )
    if target.stream is None and target.path.exists():
        for inp in inputs:
            if inp is None or not str(inp) or str(inp).startswith("<"):
                continue
            try:
                same = os.path.samefile(target.path, inp)
            except (OSError, ValueError):
                continue
            if same:
                named = "" if os.fspath(inp) == text else f" (the same file as {inp})"
                raise DaydreamError(f"{text}: is an input of this run{named}; refusing to overwrite it ({what})")
    return target.path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def digits(value: int) -> int:
    """The decimal digits of a whole number, without making its text (str() refuses past 4,300 digits)."""
    n = abs(value)
    if n < 10**18:
        return len(str(n))
    guess = int(n.bit_length() * 0.30102999566398120)  # log10(2): the digits, or one fewer
    return guess + 1 if n >= 10**guess else guess


def shown_number(value: object, limit: int = 40) -> str:
    """A value for a message, cut to ``limit`` characters: a whole number of more than 40 digits by its digit count
    (its text would be long, and past 4,300 digits Python refuses to make it)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"a whole number of {digits(value):,} digits"
    return clip(repr(value), limit)


def input_number(text: str, whole: bool = False) -> float:
    """A number given as text (a command-line flag): ASCII digits only (``int`` and ``float`` also read full-width
    and other scripts' digits, "１２"), finite and at most MAX_INPUT_NUMBER in magnitude; ``whole``: an integer.
    ValueError with a message otherwise."""
    text = text.strip()
    if not text.isascii():
        raise ValueError(f"{clip(text, 40)!r}: write a number in ASCII digits (0-9)")
    try:
        value: float = int(text) if whole else float(text)
    except ValueError:
        raise ValueError(f"{clip(text, 40)!r}: not a {'whole ' if whole else ''}number") from None
    if not abs(value) <= MAX_INPUT_NUMBER:  # nan too (and no float() of a 400-digit int)
        raise ValueError(f"{clip(text, 40)}: a number is finite and at most 10^18 in magnitude")
    return value
