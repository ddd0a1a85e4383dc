"""A tiny bookkeeping package: money in integer cents, a ledger of accounts, stock, prices and reports."""
