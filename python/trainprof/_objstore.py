"""Object storage for run directories (docs/fleet.md, "Object storage"): s3:// through boto3 (one
paginated listing per prefix; endpoint and credentials from the standard AWS variables), other
fsspec URLs (memory://, file://...) through fsspec; and a local or remote --out directory."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from trainprof._fleet_base import FleetError, MAX_RUNS, UsageError

def is_url(path: str) -> bool:
    return "://" in str(path)


def _s3_client():
    try:
        import boto3
        from botocore.config import Config
    except ImportError as e:  # pragma: no cover - boto3 is a test dependency
        raise FleetError(f"s3:// needs boto3 ({e})") from e
    cfg = Config(connect_timeout=3, read_timeout=30, retries={"max_attempts": 2})
    return boto3.client("s3", config=cfg)


def _s3_error(url: str, e: Exception) -> FleetError:
    """A clear message for what went wrong talking to the object store."""
    from botocore import exceptions as bx

    # boto3's transfers wrap the client's error (S3UploadFailedError): find it.
    seen = e
    for _ in range(8):
        if isinstance(seen, (bx.ClientError, bx.EndpointConnectionError)) or seen is None:
            break
        seen = seen.__cause__ or seen.__context__
    if seen is not None:
        e = seen
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return FleetError(f"{url}: cannot reach the object store at {endpoint} ({e})")
    if isinstance(e, bx.NoCredentialsError):
        return FleetError(f"{url}: no AWS credentials (set AWS_ACCESS_KEY_ID / AWS_PROFILE)")
    if isinstance(e, bx.ClientError):
        code = e.response.get("Error", {}).get("Code", "")
        if code in ("AccessDenied", "403", "Forbidden", "InvalidAccessKeyId",
                    "SignatureDoesNotMatch", "AllAccessDisabled"):
            return FleetError(f"{url}: access denied by the object store ({code})")
        if code in ("NoSuchBucket",):
            return FleetError(f"{url}: no such bucket")
        if code in ("NoSuchKey", "404"):
            return FleetError(f"{url}: not found")
        return FleetError(f"{url}: object store error {code}: {e}")
    return FleetError(f"{url}: {e}")


class Store:
    """Where runs are: the local file system, S3 (boto3) or another fsspec file system."""

    def __init__(self, url: str):
        self.url = url
        self.scheme = url.split("://", 1)[0] if is_url(url) else ""
        self._s3 = None
        self._fs = None
        if self.scheme in ("s3", "s3a"):
            self._s3 = _s3_client()
        elif self.scheme:
            try:
                import fsspec
                self._fs = fsspec.filesystem(self.scheme)
            except (ImportError, ValueError) as e:
                raise FleetError(f"{url}: no file system for {self.scheme}:// ({e})") from e

    @staticmethod
    def split(url: str) -> tuple[str, str]:
        rest = url.split("://", 1)[1]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise UsageError(f"{url}: no bucket in the URL")
        return bucket, key

    def list(self, url: str) -> list[tuple[str, int]]:
        """(url, size) of every object under the prefix `url`."""
        if self._s3 is not None:
            bucket, prefix = self.split(url)
            out = []
            try:
                pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                           Prefix=prefix)
                for page in pages:
                    for o in page.get("Contents", []):
                        out.append((f"{self.scheme}://{bucket}/{o['Key']}", int(o["Size"])))
                        if len(out) > 50 * MAX_RUNS:
                            raise FleetError(f"{url}: more than {50 * MAX_RUNS} objects")
            except FleetError:
                raise
            except Exception as e:
                raise _s3_error(url, e) from e
            return out
        try:
            found = self._fs.find(url, detail=True)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise FleetError(f"{url}: {e}") from e
        proto = self.scheme + "://"
        return [(p if "://" in p else proto + p.lstrip("/"), int(d.get("size") or 0))
                for p, d in found.items()]

    def read(self, url: str, limit: int) -> bytes | None:
        """The object's bytes (None when it does not exist); more than `limit` is an error."""
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                obj = self._s3.get_object(Bucket=bucket, Key=key)
            except Exception as e:
                err = _s3_error(url, e)
                if str(err).endswith(": not found"):
                    return None
                raise err from e
            if int(obj.get("ContentLength", 0)) > limit:
                raise FleetError(f"{url}: {obj['ContentLength']} bytes, more than {limit}")
            return obj["Body"].read(limit + 1)
        try:
            with self._fs.open(url, "rb") as f:
                data = f.read(limit + 1)
        except FileNotFoundError:
            return None
        if len(data) > limit:
            raise FleetError(f"{url}: more than {limit} bytes")
        return data

    def check_bucket(self, url: str) -> None:
        """Fails early, with a clear error, when the bucket is missing, forbidden or the
        store unreachable (before any work is done for it)."""
        if self._s3 is not None:
            bucket, _ = self.split(url)
            try:
                self._s3.head_bucket(Bucket=bucket)
            except Exception as e:
                err = _s3_error(url, e)
                if str(err) == f"{url}: not found":  # HEAD answers a bare 404
                    err = FleetError(f"{url}: no such bucket")
                raise err from e

    def write(self, url: str, data: bytes) -> None:
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.put_object(Bucket=bucket, Key=key, Body=data)
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        with self._fs.open(url, "wb") as f:
            f.write(data)

    def delete(self, url: str) -> None:
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.delete_object(Bucket=bucket, Key=key)
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        try:
            self._fs.rm(url)
        except FileNotFoundError:
            pass

    def download(self, url: str, size: int, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.download_file(bucket, key, str(local))
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        self._fs.get(url, str(local))

    def upload_tree(self, local: Path, url: str) -> int:
        """Copies every file under `local` to `url`/...; returns the number of files."""
        n = 0
        for p in sorted(local.rglob("*")):
            if p.is_file() and not p.is_symlink():
                dest = url.rstrip("/") + "/" + p.relative_to(local).as_posix()
                if self._s3 is not None:
                    bucket, key = self.split(dest)
                    try:
                        self._s3.upload_file(str(p), bucket, key)
                    except Exception as e:
                        raise _s3_error(dest, e) from e
                else:
                    self._fs.put(str(p), dest)
                n += 1
        return n


def _open_out(out: str):
    """(local directory to write into, finish()) for a local or remote --out."""
    if not is_url(out):
        Path(out).mkdir(parents=True, exist_ok=True)
        return Path(out), lambda: None
    store = Store(out)
    store.check_bucket(out)
    tmp = Path(tempfile.mkdtemp(prefix="trainprof-out-"))

    def finish():
        try:
            store.upload_tree(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return tmp, finish
