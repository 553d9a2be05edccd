"""Where a platform keeps its state: one data directory (the SQLite database, the artifacts, the signing
secret), or a database URL and an artifact folder given apart for a platform spread over machines."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from yardstick.hosted.limits import BoxLimits

DATA_DIR_ENV = "YARDSTICK_DATA_DIR"
DATABASE_ENV = "YARDSTICK_DATABASE_URL"


GITHUB_API = "https://api.github.com"


@dataclass(frozen=True)
class SignInSettings:
    """Who may sign in, and through what. The platform is always its own device-flow provider (passwords
    set by an admin); GitHub and OpenID Connect issuers are on when named. Each provider is a base URL, so a
    lab points it at its own GitHub Enterprise or issuer, and tests at a stand-in.

    `registration_org`: the org a user created by `users.register` joins (None: none, until an admin adds
    them). `public_url`: the platform's address as browsers reach it, for the device flow's links (None:
    the address each request came to)."""

    github_api_url: str | None = None
    oidc_issuers: tuple[str, ...] = ()
    registration_org: str | None = None
    public_url: str | None = None
    device_code_ttl_s: int = 600
    device_interval_s: int = 5
    # How long the platform's own access token may be exchanged for a key (it is spent by the first use).
    token_ttl_s: int = 600
    session_ttl_s: int = 12 * 3600

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SignInSettings:
        """`YARDSTICK_GITHUB` (`on`, the default, for github.com; `off`; or an API base URL),
        `YARDSTICK_OIDC_ISSUERS` (issuer URLs, comma-separated), `YARDSTICK_REGISTRATION_ORG`,
        `YARDSTICK_PUBLIC_URL`.

        GitHub is on unless turned off because it is the one sign-in the Positronic client's
        `platform-register` can run against a platform that is not Positronic's: its WorkOS flow goes to
        WorkOS's own host, which no setting of the client moves."""
        github = env.get("YARDSTICK_GITHUB", "").strip()
        if github.lower() in ("0", "off", "false", "no"):
            github_api: str | None = None
        elif github.lower() in ("", "1", "on", "true", "yes"):
            github_api = GITHUB_API
        else:
            github_api = github
        issuers = tuple(i.strip() for i in env.get("YARDSTICK_OIDC_ISSUERS", "").split(",") if i.strip())
        return cls(
            github_api_url=github_api,
            oidc_issuers=issuers,
            registration_org=env.get("YARDSTICK_REGISTRATION_ORG", "").strip() or None,
            public_url=env.get("YARDSTICK_PUBLIC_URL", "").strip() or None,
        )


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str | None = None
    artifact_ttl_s: int = 3600
    lease_s: float = 60.0
    max_attempts: int = 3
    # How long one policy or benchmark call may take on a worker before it is cut (the episode fails).
    call_timeout_s: float = 60.0
    sign_in: SignInSettings = field(default_factory=SignInSettings)
    # What each box of an org's code may use, and how long one of its episodes may take on the wall clock.
    box_limits: BoxLimits = field(default_factory=BoxLimits)
    episode_timeout_s: float = 1800.0
    # Loopback and link-local addresses a remote endpoint may name (`HOST:PORT`, `HOST` for any port,
    # `unix:/path` for a unix socket): none unless an administrator allows them (`--allow-remote`).
    allow_remote: tuple[str, ...] = ()
    # A competition takes what the Positronic contract says, one image endpoint; a lab running competitions
    # of its own over served or remote policies, several to a run, opens them (`YARDSTICK_OPEN_COMPETITIONS`).
    open_competitions: bool = False
    # The container registries policy images are pulled from (`http://HOST:PORT`, `https://HOST`): none
    # unless an administrator names them (`--registry`). The published container contract's budgets: the
    # largest image pulled (its config and layers as the registry stores them, 50 GB) and unpacked (55 GB);
    # its deadlines: the pull's (a miss is the platform's fault) and the warm-up's, from the end of the pull
    # to the first answer (a miss is the image's).
    registries: tuple[str, ...] = ()
    max_image_bytes: int = 50 * 10**9
    max_unpacked_image_bytes: int = 55 * 10**9
    image_fetch_deadline_s: float = 1800.0
    image_warmup_deadline_s: float = 1800.0
    # What the images a worker pulled or built may take in podman's store before those used longest ago go.
    image_cache_bytes: int = 32 << 30
    # Robots on a deployment (the act plane): how long a robot's seat lasts past its last keepalive, and how
    # long a worker serving a deployment to robots stays up past its last act.
    seat_ttl_s: float = 60.0
    act_idle_s: float = 300.0
    # The address a worker serving robots listens on and hands out (its machine's, reachable by the robots).
    act_host: str = "127.0.0.1"
    # Where a run's objects are kept: None for the data folder's `artifacts/`, or an S3-compatible bucket
    # (`s3://bucket/prefix`, its endpoint and credentials from the AWS environment variables).
    artifacts_url: str | None = None
    # Where a worker plays the catalogue's episodes: None in its own process, or on the Ray cluster at this
    # address (`auto`, or its head's HOST:PORT), each run's episodes on actors it keeps while the run plays.
    ray_address: str | None = None

    @classmethod
    def from_env(cls, data_dir: str | Path | None = None, database_url: str | None = None) -> Settings:
        folder = Path(data_dir or os.environ.get(DATA_DIR_ENV) or "~/.local/share/yardstick").expanduser()
        return cls(
            data_dir=folder,
            database_url=database_url or os.environ.get(DATABASE_ENV) or None,
            sign_in=SignInSettings.from_env(os.environ),
            open_competitions=os.environ.get("YARDSTICK_OPEN_COMPETITIONS", "").lower()
            in ("1", "on", "true"),
        )

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'yardstick.db').resolve()}"

    @property
    def artifact_root(self) -> Path:
        return self.data_dir / "artifacts"

    @property
    def hosted_root(self) -> Path:
        """Where the code an org registers is unpacked, with its environments (shared with the workers)."""
        return self.data_dir / "hosted"

    @property
    def volume_root(self) -> Path:
        """Where an org's volumes are kept (`seq volume put`), shared with the workers that mount them."""
        return self.data_dir / "volumes"

    @property
    def capture_root(self) -> Path:
        """Where the episodes robots played on deployments that capture are kept, a folder a deployment."""
        return self.data_dir / "captures"

    @property
    def secret_file(self) -> Path:
        return self.data_dir / "secret.key"

    @property
    def private_folders(self) -> tuple[Path, ...]:
        """The install's own folders, hidden in every box: a box is shown only what it is given, and these
        stay out of sight should one lie inside a folder it is shown (an interpreter's environment)."""
        folders = (self.data_dir, self.hosted_root, self.artifact_root, self.volume_root, self.capture_root)
        return tuple(dict.fromkeys(folder.resolve() for folder in folders))
