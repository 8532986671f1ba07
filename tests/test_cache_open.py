"""An unusable response cache stops the run when opened, before any call, with a CacheError naming the file and the
fix, and is left as it was (its replies may have cost money). Read-only cases run as an unprivileged child."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from acemad_utils.agents.cache import CacheError, ResponseCache
from acemad_utils.agents.client import LLMClient
from acemad_utils.agents.llm_agent import LLMPopulation
from tests.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-test-cache-errors-0000"
DAMAGED = (
    r"the response cache .*llm\.sqlite is damaged or not a cache \({why}\): delete it \(and .*llm\.sqlite-wal, "
    r".*llm\.sqlite-shm if present\) to start a fresh cache; .*No model call was made\.$"
)


def filled_cache(path: Path, n: int = 300) -> Path:
    with ResponseCache(path) as c:
        for i in range(n):
            c.put(f"k{i}", {"text": "x" * 500}, model="m", kind="openai")
    return path


def _cut(path: Path) -> None:
    filled_cache(path)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 3)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.write_bytes(bytes(range(256)) * 20), DAMAGED.format(why="file is not a database")),
        (lambda p: p.write_bytes(b"a text file\n"), DAMAGED.format(why="file is not a database")),
        (_cut, DAMAGED.format(why="database disk image is malformed") + r"|sqlite3 .*llm\.sqlite \.recover"),
        (
            Path.mkdir,
            r"cannot open the response cache .*llm\.sqlite \(unable to open database file\): .*llm\.sqlite "
            r"is a directory\. No model call was made\.",
        ),
    ],
    ids=["garbage", "text", "cut in the middle", "a directory"],
)
def test_an_unusable_cache_stops_before_any_call_and_is_left_as_it_was(tmp_path, make, says):
    """Neither a client nor a population opens the endpoint: not even the free GET /models."""
    path = tmp_path / "llm.sqlite"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with FakeOpenAI() as srv:
        with pytest.raises(CacheError, match=says):
            LLMClient("m", srv.url, KEY, cache=str(path))
        with pytest.raises(CacheError, match=says):
            LLMPopulation(model="m", base_url=srv.url, api_key=KEY, cache=str(path))
        assert srv.count == 0 and srv.auth == set()
    assert (path.read_bytes() if path.is_file() else None) == before and os.listdir(tmp_path) == ["llm.sqlite"]


# ----------------------------------------------------------------------------- read-only
CHILD = r"""
import sys
sys.path.insert(0, {repo!r})
from acemad_utils.agents.cache import CacheError, ResponseCache
try:
    ResponseCache({path!r})
except CacheError as e:
    print("CacheError:", e)
else:
    print("opened")
"""


def unprivileged(cmd: list) -> subprocess.CompletedProcess:
    """Run cmd as a user that cannot write through permissions (root can: it runs as nobody then)."""
    kw: dict = {}
    if os.geteuid() == 0:
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        else:
            kw["preexec_fn"] = lambda: (os.setgroups([]), os.setgid(65534), os.setuid(65534))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def open_unprivileged(path: Path) -> str:
    """Open the cache in such a child; what it printed."""
    probe = next(d for d in path.parents if d.is_dir() and os.access(d, os.W_OK)) / "probe-0444"
    probe.write_text("")
    probe.chmod(0o444)
    try:
        if unprivileged([sys.executable, "-c", f"open({str(probe)!r}, 'a')"]).returncode == 0:
            pytest.skip("cannot run a child without write privileges here")
    finally:
        probe.unlink()
    out = unprivileged([sys.executable, "-c", CHILD.format(repo=str(REPO), path=str(path))])
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return out.stdout.strip()


@pytest.fixture
def world_dir():
    """A directory an unprivileged child can reach (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="acemad-ro-"))
    d.chmod(0o777)
    yield d
    for p in [d, *d.rglob("*")]:
        p.chmod(0o777)
    shutil.rmtree(d)


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_read_only_file(world_dir):
    path = filled_cache(world_dir / "llm.sqlite")
    path.chmod(0o444)
    before = path.read_bytes()
    msg = open_unprivileged(path)
    assert msg == (
        f"CacheError: the response cache {path} is read-only (attempt to write a readonly database): make "
        f"the file and its directory {world_dir} writable (sqlite also writes a -wal and a -shm file beside "
        "it), or move the cache elsewhere; replies must be stored or a rerun pays for them again. No model "
        "call was made."
    ), msg
    assert path.read_bytes() == before
    assert open_unprivileged(world_dir / "fresh" / "llm.sqlite") == "opened"  # the child can open a writable one


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_read_only_directory(world_dir):
    d = world_dir / "cache"
    d.mkdir()
    path = filled_cache(d / "llm.sqlite")
    path.chmod(0o666)
    d.chmod(0o555)  # the file is writable, but sqlite cannot create its -wal file beside it
    assert open_unprivileged(path).startswith(f"CacheError: the response cache {path} is read-only (")
    empty = world_dir / "empty"
    empty.mkdir(mode=0o555)
    empty.chmod(0o555)
    assert open_unprivileged(empty / "llm.sqlite") == (
        f"CacheError: cannot open the response cache {empty / 'llm.sqlite'} (unable to open database file): its "
        f"directory {empty} must exist and be writable. No model call was made."
    )
    assert open_unprivileged(empty / "sub" / "llm.sqlite").startswith(
        f"CacheError: cannot create the directory of the response cache {empty / 'sub' / 'llm.sqlite'} "
        "(Permission denied): make its parent writable"
    )


def test_a_usable_cache_is_unchanged_by_the_write_check(tmp_path):
    path = filled_cache(tmp_path / "llm.sqlite", n=3)
    with ResponseCache(path) as c:
        assert len(c) == 3 and c.get("") is None and c.get("k1") == {"text": "x" * 500}
