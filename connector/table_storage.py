"""A table's storage options, given once with seglog's names, as each reader of the table wants them.

seglog names an object store's settings as s3fs does (``key``, ``secret``, ``token``,
``endpoint_url``), like the source's ``storage.*`` options and the compaction job's
``--storage``. Spark reaches a table in a bucket through Hadoop's S3A file system, which takes
them as ``fs.s3a.*`` settings; delta-rs (``seglog tables list|describe|optimize``) as
``AWS_*`` ones. ``s3://`` is served by S3A too, as on most Spark platforms.
"""

from __future__ import annotations

from typing import Mapping

from .option_error import SeglogOptionError

S3_SCHEMES = ("s3", "s3a")
S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"

# seglog's (s3fs's) name -> (Hadoop S3A's, delta-rs's)
_NAMES = {
    "key": ("fs.s3a.access.key", "AWS_ACCESS_KEY_ID"),
    "secret": ("fs.s3a.secret.key", "AWS_SECRET_ACCESS_KEY"),
    "token": ("fs.s3a.session.token", "AWS_SESSION_TOKEN"),
    "endpoint_url": ("fs.s3a.endpoint", "AWS_ENDPOINT_URL"),
}


def is_s3(url: str | None) -> bool:
    """Whether ``url`` names a location in an S3 bucket (``s3://`` or ``s3a://``)."""
    return url is not None and "://" in url and url.split("://", 1)[0].lower() in S3_SCHEMES


def check_storage(storage: Mapping[str, str]) -> Mapping[str, str]:
    """``storage``, once every name in it is one seglog knows (else an error naming ``--storage`` and it)."""
    unknown = sorted(k for k in storage if k not in _NAMES)
    if unknown:
        raise SeglogOptionError(f"--storage {unknown[0]}: not an object store setting of a table; "
                                f"use {', '.join(_NAMES)}")
    return storage


def fsspec_options(url: str, storage: Mapping[str, str]) -> dict[str, str]:
    """fsspec's keyword arguments for ``url``: ``storage`` in a bucket, none on a local disk."""
    return dict(storage) if is_s3(url) else {}


def hadoop_conf(storage: Mapping[str, str]) -> dict[str, str]:
    """The Hadoop settings that let Spark (and Delta) read and write a table at an ``s3://`` or ``s3a://``
    URL with ``storage``: an endpoint of its own (an S3-compatible server) is addressed by path."""
    conf = {"fs.s3.impl": S3A_FILE_SYSTEM, "fs.s3a.impl": S3A_FILE_SYSTEM}
    for name, value in check_storage(storage).items():
        conf[_NAMES[name][0]] = str(value)
    endpoint = storage.get("endpoint_url")
    if endpoint:
        conf["fs.s3a.path.style.access"] = "true"
        conf["fs.s3a.connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
        conf.setdefault("fs.s3a.endpoint.region", "us-east-1")
    return conf


def delta_rs_options(storage: Mapping[str, str]) -> dict[str, str]:
    """delta-rs's storage options for a table with ``storage``."""
    out = {_NAMES[name][1]: str(value) for name, value in check_storage(storage).items()}
    if str(storage.get("endpoint_url", "")).startswith("http://"):
        out["AWS_ALLOW_HTTP"] = "true"
    if "endpoint_url" in storage:
        out.setdefault("AWS_REGION", "us-east-1")
    return out
