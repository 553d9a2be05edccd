"""The sign-in record `yardstick login` keeps: the platform and the key that belongs to it, in a private file.

`$YARDSTICK_CONFIG_DIR/credentials.json`, else `$XDG_CONFIG_HOME/yardstick/credentials.json`, else
`~/.config/yardstick/credentials.json`; the file mode 0600 in a directory of mode 0700, written by rename so
a reader sees the old record or the new one, never half of one.

Which key a command uses: `$YARDSTICK_API_KEY` (or `$POSITRONIC_PLATFORM_API_KEY`), else the record's, and
the record's only when the command calls the record's platform: a key is never sent to a platform it was
not minted by. Which platform: `--platform-url` / `$YARDSTICK_PLATFORM_URL` / `$POSITRONIC_PLATFORM_URL`,
else the record's, else a local one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

CONFIG_DIR_ENV = "YARDSTICK_CONFIG_DIR"
FILENAME = "credentials.json"
DEFAULT_PLATFORM_URL = "http://127.0.0.1:8080"
KEY_ENVS = ("YARDSTICK_API_KEY", "POSITRONIC_PLATFORM_API_KEY")


class RecordUnreadable(Exception):
    """The record exists and cannot be used; the message names the file, never its content (a key)."""


class Credentials(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    platform_url: str
    api_key: str


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(CONFIG_DIR_ENV, "").strip():
        return Path(env[CONFIG_DIR_ENV]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    return (Path(xdg) if xdg else Path("~/.config").expanduser()) / "yardstick"


def record_path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / FILENAME


def read(env: Mapping[str, str] | None = None) -> Credentials | None:
    path = record_path(env)
    try:
        return Credentials.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RecordUnreadable(f"{path} cannot be read: {exc.strerror}") from None
    except ValidationError:
        raise RecordUnreadable(
            f"{path} is not a sign-in record: delete it and run `yardstick login`"
        ) from None


def write(record: Credentials, env: Mapping[str, str] | None = None) -> Path:
    directory = config_dir(env)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)  # mkdir's mode is cut by the umask, and an existing folder keeps its own
    path = directory / FILENAME
    descriptor, staged = tempfile.mkstemp(dir=directory, prefix=f".{FILENAME}.")  # mode 0600
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(record.model_dump_json(indent=2) + "\n")
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise
    return path


def remove(env: Mapping[str, str] | None = None) -> bool:
    try:
        record_path(env).unlink()
        return True
    except FileNotFoundError:
        return False


def same_platform(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def key_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    for name in KEY_ENVS:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def locate(given_url: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The platform to call and the key to call it with (None: no key), by the order above."""
    key = key_from_env(env)
    record = read(env) if key is None or not given_url else None
    url = given_url or (record.platform_url if record else DEFAULT_PLATFORM_URL)
    if key is None and record is not None and same_platform(record.platform_url, url):
        key = record.api_key
    return url, key
