"""A ledger of accounts held as plain objects (no pydantic, no dataclass, no annotation): the ``env_class_code`` of the
typed corpus's two ledgers. Built as EnvScaler builds an environment (every ``init_config`` key set as an attribute),
its accounts become plain dicts and every call raises ``AttributeError``; with ``env_constructor: from_config``
declared, :meth:`Ledger.from_config` builds the objects."""


class Account:
    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount


class Ledger:
    """Accounts and their balances."""

    def __init__(self):
        self.accounts = {}

    @classmethod
    def from_config(cls, init_config):
        ledger = cls()
        ledger.accounts = {key: Account(**value) for key, value in init_config.get("accounts", {}).items()}
        return ledger

    def _total(self) -> int:
        return sum(account.balance for account in self.accounts.values())

    def balance(self, account_id: str) -> dict:
        """An account's balance, and the ledger's total."""
        total = self._total()
        if account_id not in self.accounts:
            return {"success": False, "error": f"no account {account_id}"}
        return {"success": True, "balance": self.accounts[account_id].balance, "total": total}

    def deposit(self, account_id: str, amount: int) -> dict:
        """Deposit into an account."""
        self._total()
        if account_id not in self.accounts:
            return {"success": False, "error": f"no account {account_id}"}
        if amount <= 0:
            return {"success": False, "error": "amount must be positive"}
        self.accounts[account_id].deposit(amount)
        return {"success": True, "balance": self.accounts[account_id].balance}

    def owners(self) -> dict:
        """Every account's owner, and the ledger's total."""
        total = self._total()
        return {"success": True, "owners": [a.owner for a in self.accounts.values()], "total": total}
