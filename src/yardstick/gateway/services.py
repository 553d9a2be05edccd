"""Everything a running platform is made of, composed once: the core on an open install, with the billing
package as its ledger, the sign-in service and the credit purchases beside it. The server, the tests and
the benchmarks open a platform here; a worker needs only the ledger (`ledger_for`)."""

from __future__ import annotations

from dataclasses import dataclass

from yardstick.billing.credits import CreditLedger
from yardstick.billing.purchases import AdminSettles, Purchases
from yardstick.billing.terms import BillingTerms
from yardstick.core.install import open_install
from yardstick.core.platform import Platform
from yardstick.core.settings import Settings
from yardstick.signin.service import SignIn


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


def open_services(settings: Settings) -> Services:
    """Open the install (folders, migrations, the shipped catalogue, the secret) and compose its services."""
    terms = BillingTerms.locate(settings.data_dir)
    install = open_install(settings)
    platform = Platform(install, CreditLedger(terms.tariff()))
    platform.hosting.resume()
    return Services(platform, SignIn(platform), Purchases(install.db, terms, AdminSettles()))
