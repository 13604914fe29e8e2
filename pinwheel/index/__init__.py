"""Package index metadata, read for a target.

- ``config``: pip's configuration (settings, the default index URL, the CA bundle);
- ``target``: the target's wheel tags and marker environment (``plan.Target`` calls these);
- ``files``: the files a project page lists;
- ``metadata``: what a wheel declares, from METADATA or the wheel itself;
- ``client``: ``IndexClient``, with its cache, retries and deadline (bounded HTTP in ``transfer``);
- ``sources``: routing packages to indexes, and the one metadata source of a Plan.

Nothing here touches the network or runs pip at import time.
"""
from .client import DEFAULT_DEADLINE, IndexClient
from .config import ca_bundle, default_index_url, pip_setting
from .errors import (
    CacheMiss,
    HashMismatch,
    IndexClientError,
    IndexNotConfigured,
    IndexUnavailable,
    MetadataUnavailable,
    PackageNotFound,
)
from .files import IndexFile, parse_html_page, parse_json_page
from .metadata import DistMetadata, local_metadata, parse_metadata
from .sources import MetadataSource, RoutedSource, metadata_source
from .target import expand_platforms, target_environment, target_platforms, target_tags

__all__ = [
    "DEFAULT_DEADLINE",
    "CacheMiss",
    "DistMetadata",
    "HashMismatch",
    "IndexClient",
    "IndexClientError",
    "IndexFile",
    "IndexNotConfigured",
    "IndexUnavailable",
    "MetadataSource",
    "MetadataUnavailable",
    "PackageNotFound",
    "RoutedSource",
    "ca_bundle",
    "default_index_url",
    "expand_platforms",
    "local_metadata",
    "metadata_source",
    "parse_html_page",
    "parse_json_page",
    "parse_metadata",
    "pip_setting",
    "target_environment",
    "target_platforms",
    "target_tags",
]
