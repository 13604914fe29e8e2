"""A find-links page (a manifest index with `flat: true`) read like a project page: one HTML page of links to
the files of any number of projects (tilelang's nightly page), so that the host reads what it lists, with
each file's sha256 from its link's fragment, as it reads an index's project page."""
from __future__ import annotations

from typing import Any

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename, \
    parse_wheel_filename

from .client import IndexClient


def _project(filename: str) -> str | None:
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[0])
        return str(parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


class FlatPageClient(IndexClient):
    """The one page at ``page_url`` stands for every project's page, keeping the named project's files."""

    def __init__(self, page_url: str, **kwargs) -> None:
        super().__init__(page_url, **kwargs)
        self.page_url = page_url

    @classmethod
    def of(cls, client: IndexClient, page_url: str) -> "FlatPageClient":
        """A client of the page with ``client``'s cache, mode, retries and deadline (as IndexClient.sibling)."""
        return cls(page_url, cache_dir=client.cache_dir, offline=client.offline, retries=client.retries,
                   backoff=client.backoff, timeout=client.timeout, max_age=client.max_age, verify=client._verify,
                   probe_metadata=client.probe_metadata, deadline=client.deadline, refresh=client.refresh,
                   clock=client.clock)

    def _page_url(self, name: str) -> str:
        return self.page_url

    def _page_entries(self, resp, cname: str, url: str, page_url: str) -> tuple[list[dict[str, Any]], str]:
        """The file entries the page links, of project ``cname`` only (what is cached as its page)."""
        entries, fmt = super()._page_entries(resp, cname, url, page_url)
        want = canonicalize_name(cname)
        return [e for e in entries if _project(e["filename"]) == want], fmt
