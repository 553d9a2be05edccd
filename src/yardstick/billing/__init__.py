"""Credits: the tariff and quotes, holds and settlements (the core's `Ledger`), purchases of credit packages,
and the usage statements an operator invoices from."""
