"""Everything a running platform is made of, composed once: the core on an open install, with the billing
package as its ledger, the sign-in service and the credit purchases beside it. The server, the tests and
the benchmarks open a platform here, its builds the execution plane's (`worker.builds`); a worker needs only
the ledger (`ledger_for`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from yardstick.billing.credits import CreditLedger
from yardstick.billing.purchases import AdminSettles, Purchases
from yardstick.billing.terms import BillingTerms
from yardstick.core.hosting import Hosting
from yardstick.core.install import open_install
from yardstick.core.platform import Platform
from yardstick.core.settings import Settings
from yardstick.signin.service import SignIn
from yardstick.worker.boxes.containers import Podman, install_podman
from yardstick.worker.boxes.image_builds import ImageBuilder
from yardstick.worker.boxes.image_cache import ImageCache
from yardstick.worker.builds import BoxBuilds


@dataclass(frozen=True)
class Services:
    platform: Platform
    sign_in: SignIn
    purchases: Purchases

    def close(self) -> None:
        self.sign_in.close()
        self.platform.close()


def ledger_for(settings: Settings) -> CreditLedger:
    """The ledger an install's runs are held and settled through, under its billing terms (`billing.toml`
    in the data folder, `$YARDSTICK_BILLING_FILE`, or the defaults)."""
    return CreditLedger(BillingTerms.locate(settings.data_dir).tariff())


def builds_for(settings: Settings) -> Callable[[Hosting], BoxBuilds]:
    """What builds an install's registered versions: boxes held to its limits, hiding its folders; images'
    systems by podman (where it is installed) from the install's first registry, its mirror."""
    images = None
    if Podman.available():
        podman = install_podman(settings.data_dir, settings.registries)
        hosts = [urlsplit(url).netloc for url in settings.registries]
        cache = ImageCache(podman, hosts, settings.image_cache_bytes)

        def kept(bases: Iterable[str]) -> None:
            for base in bases:
                cache.used(base)
            cache.collect()

        images = ImageBuilder(podman, settings.data_dir / "images", limits=settings.box_limits, kept=kept)
    mirror = settings.registries[0] if settings.registries else None
    return lambda hosting: BoxBuilds(
        hosting, hidden=settings.private_folders, limits=settings.box_limits, images=images, mirror=mirror
    )


def open_services(settings: Settings, *, prepare: bool = True) -> Services:
    """Open the install (folders, migrations, the shipped catalogue, the secret) and compose its services;
    start again the builds a gateway left unfinished. Without `prepare`, only connect and compose: an HTTP
    process of a server that prepared the install and resumed its builds (`gateway.http_workers`)."""
    terms = BillingTerms.locate(settings.data_dir)
    install = open_install(settings, prepare=prepare)
    platform = Platform(install, CreditLedger(terms.tariff()), builds=builds_for(settings))
    if prepare:
        platform.hosting.resume()
    return Services(platform, SignIn(platform), Purchases(install.db, terms, AdminSettles()))
