"""A double-entry-free ledger: accounts with balances in cents, postings, and transfers."""


class InsufficientFunds(ValueError):
    """A transfer would take an account below zero."""


class Ledger:
    """Accounts and the postings made to them, in the order they were made."""

    def __init__(self, allow_overdraft=False):
        self.allow_overdraft = allow_overdraft
        self.entries = []

    def post(self, account, cents, memo=""):
        """Add `cents` (negative to take away) to `account`."""
        if cents == 0:
            raise ValueError("a posting of zero cents records nothing")
        self.entries.append((account, cents, memo))

    def balance(self, account):
        """The sum of the account's postings."""
        return sum(cents for name, cents, _ in self.entries if name == account)

    def transfer(self, source, target, cents, memo="transfer"):
        """Move `cents` from one account to another; refuses to overdraw unless allowed."""
        if cents <= 0:
            raise ValueError(f"transfer amount must be positive, got {cents}")
        if source == target:
            raise ValueError(f"cannot transfer from {source!r} to itself")
        if not self.allow_overdraft and self.balance(source) < cents:
            raise InsufficientFunds(f"{source!r} has {self.balance(source)} cents, needs {cents}")
        self.post(source, -cents, memo)
        self.post(target, cents, memo)

    def accounts(self):
        """Every account that has a posting, sorted by name."""
        return sorted({name for name, _, _ in self.entries})

    def history(self, account, last=None):
        """The account's (cents, memo) postings, oldest first; only the `last` ones when given."""
        rows = [(cents, memo) for name, cents, memo in self.entries if name == account]
        if last is not None:
            rows = rows[len(rows) - last:] if last < len(rows) else rows
        return rows

    def trial_balance(self):
        """Every account's balance, and the total (always 0 when every posting came from a transfer)."""
        balances = {name: self.balance(name) for name in self.accounts()}
        return balances, sum(balances.values())
