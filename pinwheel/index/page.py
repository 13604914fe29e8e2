"""A project's page as the client holds it: files grouped by version, each group built on first use, and the
wheel tag tables a target's choice of wheel reads (moved out of client.py, which asks them)."""
from __future__ import annotations

import functools
from typing import Callable

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename
from packaging.version import InvalidVersion, Version

from .files import IndexFile, file_version, is_yanked_entry, parse_version
from .target import target_tags


class Page:
    """A project's files as its page lists them, grouped by version; a group is built on first use.

    ``versions`` maps each version's text (the first file's) to the text of its first unyanked file's
    version, or None when every file of it is yanked, in ascending version order (so the sort a caller
    does is one pass over a sorted list); ``load_group`` gives one version's files (IndexFiles, or the
    parsed store's entries for them, built when asked for) and ``load_all`` every file in page order.
    """

    def __init__(self, versions: dict[str, str | None], load_group, load_all) -> None:
        self._versions = versions
        self._load_group = load_group
        self._load_all = load_all
        self._texts: dict[Version, str] | None = None  # each version's first text, built on first lookup
        self.best: dict[tuple, IndexFile | None] = {}  # best_wheel's answers for this page, per target
        self._entries: dict[str, list[IndexFile | dict]] = {}  # each group as load_group gave it
        self._groups: dict[str, list[IndexFile]] = {}  # each group, every file built
        self._all: list[IndexFile] | None = None

    @classmethod
    def of(cls, files: list[IndexFile]) -> "Page":
        groups = group_by_version(files)
        page = cls({text: next((str(f.version) for f in group if not f.is_yanked), None)
                    for text, group in groups.items()}, groups.__getitem__, lambda: files)
        page._groups, page._all = groups, files
        return page

    @classmethod
    def of_entries(cls, entries: list[dict]) -> "Page":
        """A page of file entries as IndexFile.to_json writes them (a fetched page's, or its cache record's),
        each built into an IndexFile when asked for; an entry whose name IndexFile rejects is left out."""
        groups: dict[Version, list[dict]] = {}
        kept: list[dict] = []  # in page order
        for entry in entries:
            try:
                version = file_version(entry["filename"])
            except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
                continue
            groups.setdefault(version, []).append(entry)
            kept.append(entry)
        by_text = {str(v): groups[v] for v in sorted(groups)}
        page = cls({text: next((str(file_version(e["filename"])) for e in group if not is_yanked_entry(e)), None)
                    for text, group in by_text.items()}, by_text.__getitem__, lambda: [built(e) for e in kept])
        page._entries = dict(by_text)
        return page

    def stored_groups(self) -> dict[str, tuple[str | None, list[dict]]]:
        """Each version's first unyanked version text and its file entries, as the parsed store keeps them."""
        return {text: (unyanked, [e if isinstance(e, dict) else e.to_json() for e in self._group_entries(text)])
                for text, unyanked in self._versions.items()}

    def versions(self, include_yanked: bool) -> list[Version]:
        return [parse_version(text if include_yanked else unyanked) for text, unyanked in self._versions.items()
                if include_yanked or unyanked is not None]

    def _text_of(self, want: Version) -> str | None:
        if self._texts is None:
            self._texts = {}
            for text in self._versions:
                self._texts.setdefault(parse_version(text), text)
        return self._texts.get(want)

    def _group_entries(self, text: str) -> list[IndexFile | dict]:
        if text not in self._entries:
            self._entries[text] = self._load_group(text)
        return self._entries[text]

    def files_of(self, want: Version) -> list[IndexFile]:
        """The files of one version, in page order (equal versions share one group)."""
        text = self._text_of(want)
        if text is None:
            return []
        if text not in self._groups:
            self._groups[text] = [built(e) for e in self._group_entries(text)]
        return list(self._groups[text])

    def wheels_of(self, want: Version, may_match: Callable[[str], bool]) -> list[IndexFile]:
        """The wheels of one version whose file name ``may_match`` accepts, in page order. A version lists a
        wheel per Python and platform, and building each file's record costs more than choosing among them,
        so the others are never built."""
        text = self._text_of(want)
        if text is None:
            return []
        if text in self._groups:
            return [f for f in self._groups[text] if f.is_wheel and may_match(f.filename)]
        return [built(e) for e in self._group_entries(text)
                if filename_of(e).endswith(".whl") and may_match(filename_of(e))]

    def all(self) -> list[IndexFile]:
        if self._all is None:
            self._all = self._load_all()
        return list(self._all)


def built(entry: IndexFile | dict) -> IndexFile:
    """A group's file: the parsed store gives its entries as IndexFile.to_json wrote them."""
    return entry if isinstance(entry, IndexFile) else IndexFile.from_json(entry)


def filename_of(entry: IndexFile | dict) -> str:
    return entry.filename if isinstance(entry, IndexFile) else entry["filename"]


@functools.lru_cache(maxsize=64)
def tag_priority(python_version: str, platforms: tuple[str, ...]) -> dict:
    """Each wheel tag a target supports, by preference (0 is best); asked once per target, not per lookup."""
    return {tag: i for i, tag in enumerate(target_tags(python_version, platforms))}


@functools.lru_cache(maxsize=64)
def tag_parts(python_version: str, platforms: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The interpreters and the platforms of the target's tags: a wheel naming none of either cannot match."""
    tags = tag_priority(python_version, platforms)
    return frozenset(t.interpreter for t in tags), frozenset(t.platform for t in tags)


def may_match(filename: str, interpreters: frozenset[str], platforms: frozenset[str]) -> bool:
    """Whether a wheel's compressed tag set (its name's last three fields) can hold one of the target's tags:
    parsing each file's tags in full costs more than the rest of choosing a wheel."""
    py, _abi, plat = filename[:-4].rsplit("-", 3)[-3:]
    return (not interpreters.isdisjoint(py.lower().split(".")) and
            not platforms.isdisjoint(plat.lower().split(".")))


def group_by_version(files: list[IndexFile]) -> dict[str, list[IndexFile]]:
    """Files grouped by equal versions, each group keyed by its first file's version text, in ascending version
    order; the files of a group in page order."""
    groups: dict[Version, list[IndexFile]] = {}
    for f in files:
        groups.setdefault(f.version, []).append(f)
    return {str(groups[v][0].version): groups[v] for v in sorted(groups)}
