"""The files agents make, kept in Open WebUI's own file storage, in process (issue 28).

The old Pipe uploaded each file by an HTTP call to its own server's Files API and fell back to an unauthenticated
file server of its own; owc calls what that API calls, in Open WebUI's process: the configured storage provider
(``open_webui.storage.provider.Storage``: local folder, S3, GCS or Azure, whatever the admin set) and the ``file``
table (``Files.insert_new_file``), exactly as ``routers/files.py`` ``upload_file_handler`` does for an upload with
``process=false``: the same stored name ``<id>_<name>``, the same tags, the same ``meta`` (name, content type,
size, sha256). The file is owned by the chat's user, so ``GET /api/v1/files/<id>/content`` serves it to them (and
to admins) and to nobody else. No HTTP call, nothing listening.
"""

from __future__ import annotations

import hashlib
import io
import logging
import uuid
from typing import Any

import anyio.to_thread

from owc.emit.files import FileRefused, StoredFile, content_url
from owc.owui import trio_host

log = logging.getLogger("owc.owui")


class OwuiFiles:
    """The Trio side's ``FileSink`` inside Open WebUI: each call crosses to the loop's asyncio side (the host)."""

    def __init__(self, host: trio_host.TrioHost) -> None:
        self._host = host

    async def store(self, user_id: str, name: str, mime: str, data: bytes, *, source: str) -> StoredFile:
        return await self._host.run_in_asyncio(store_file, user_id, name, mime, data, source)


async def store_file(user_id: str, name: str, mime: str, data: bytes, source: str) -> StoredFile:
    """Keep ``data`` in Open WebUI's storage and ``file`` table as ``user_id``'s. Raises ``FileRefused``."""
    from open_webui.models.files import FileForm, Files
    from open_webui.models.users import Users
    from open_webui.storage.provider import Storage

    if not data:
        raise FileRefused("it is empty")
    user = await Users.get_user_by_id(user_id)
    if user is None:
        raise FileRefused("the chat's user no longer exists")
    file_id = str(uuid.uuid4())
    tags = {
        "OpenWebUI-User-Email": getattr(user, "email", "") or "",
        "OpenWebUI-User-Id": user_id,
        "OpenWebUI-User-Name": getattr(user, "name", "") or "",
        "OpenWebUI-File-Id": file_id,
    }
    stored_name = f"{file_id}_{name}"
    try:
        _, path = await anyio.to_thread.run_sync(Storage.upload_file, io.BytesIO(data), stored_name, tags)
    except Exception as exc:  # a full disk, an unwritable folder, a cloud bucket refusing: named, never raised on
        log.error("owui.file_not_stored user=%s error=%s", user_id, type(exc).__name__)
        raise FileRefused("Open WebUI's file storage refused it") from exc
    meta: dict[str, Any] = {
        "name": name,
        "content_type": mime,
        "size": len(data),
        "file_hash": hashlib.sha256(data).hexdigest(),
        "data": {"source": "openclaw", "openclaw_artifact": source},
    }
    item = await Files.insert_new_file(user_id, FileForm(id=file_id, filename=name, path=path, data={}, meta=meta))
    if item is None:
        try:
            await anyio.to_thread.run_sync(Storage.delete_file, path)
        except Exception:
            log.warning("owui.file_orphaned id=%s (its row was refused; the stored copy could not be removed)", file_id)
        raise FileRefused("Open WebUI's file table refused it")
    log.info("owui.file_stored id=%s user=%s bytes=%d type=%s", file_id, user_id, len(data), mime)
    return StoredFile(file_id, content_url(file_id))
