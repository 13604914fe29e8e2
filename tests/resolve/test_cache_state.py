"""One command walks the index cache once for its memos, and again after it wrote a page or METADATA.

Real files in a temporary cache; what is checked is the digest each memo records and whether a write made
by this process or a change made behind its back is seen where it should be.
"""
from __future__ import annotations

import json
import os

from pinwheel.fsutil import atomic_write
from pinwheel.resolve import memo as memo_module
from pinwheel.resolve.memo import CacheState, _cache_state, memoized


def cache(tmp_path):
    root = tmp_path / "index"
    atomic_write(root / "pages" / "app.json", b'{"files": []}')
    atomic_write(root / "metadata" / "ab" / "ab12.METADATA", b"Name: app\n")
    return root


def stored_states(root):
    return sorted(json.loads(p.read_text())["state"] for p in (root / "memo").iterdir())


def test_two_memos_of_one_command_record_the_walk_they_share(tmp_path, monkeypatch):
    root = cache(tmp_path)
    walks = []
    monkeypatch.setattr(memo_module, "_cache_state", lambda d: walks.append(d) or _cache_state(d))
    state = CacheState(root)
    assert memoized(root, "first", lambda: 1, state=state) == 1
    assert memoized(root, "second", lambda: 2, state=state) == 2
    assert walks == [root]  # the first memo's own file did not count as a change
    assert stored_states(root) == [_cache_state(root)] * 2
    # a later command sees both as current
    assert memoized(root, "first", lambda: "recomputed") == 1
    assert memoized(root, "second", lambda: "recomputed") == 2


def test_a_page_written_between_the_memos_is_seen_by_the_second(tmp_path):
    root = cache(tmp_path)
    state = CacheState(root)
    before = state.digest()

    def compute_and_fetch():
        atomic_write(root / "pages" / "lib.json", b'{"files": []}')  # as the index client caches a page
        return 2

    memoized(root, "first", lambda: 1, state=state)
    memoized(root, "second", compute_and_fetch, state=state)
    after = _cache_state(root)
    assert after != before
    assert stored_states(root) == sorted([before, after])
    assert memoized(root, "first", lambda: "recomputed") == "recomputed"  # recorded before the new page
    assert memoized(root, "second", lambda: "recomputed") == 2


def test_a_change_made_outside_the_command_is_seen_by_the_next_command(tmp_path):
    root = cache(tmp_path)
    state = CacheState(root)
    memoized(root, "first", lambda: 1, state=state)
    page = root / "pages" / "app.json"
    page.write_bytes(b'{"files": [], "etag": "new"}')  # another process, in place
    os.utime(page, ns=(1, 1))
    assert memoized(root, "first", lambda: "recomputed") == "recomputed"
