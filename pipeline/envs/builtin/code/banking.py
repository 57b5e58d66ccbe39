"""Banking: accounts, transfers with daily limits, payouts, interest and freezes."""


class Bank:
    """A retail bank core: every money movement writes a transaction record."""

    def __init__(self, config=None):
        config = config or {}
        self.accounts = config.get("accounts", {})
        self.transactions = config.get("transactions", {})
        self.tx_counter = config.get("tx_counter", 0)
        self.daily_limit = config.get("daily_limit", 5000)

    def _fail(self, message):
        return {"success": False, "error": message}

    def _tx(self, kind, account_id, amount, counterparty=None):
        self.tx_counter += 1
        ref = f"T{self.tx_counter:06d}"
        self.transactions[ref] = {"kind": kind, "account": account_id, "amount": amount, "counterparty": counterparty}
        return ref

    def _usable(self, account_id):
        acct = self.accounts.get(account_id)
        if acct is None:
            return None, f"Account {account_id} not found"
        if acct["status"] != "open":
            return None, f"Account {account_id} is {acct['status']}"
        return acct, None

    def list_accounts(self):
        """List accounts with owner, balance and status."""
        return {"success": True, "data": self.accounts}

    def get_account(self, account_id: str):
        """Get one account.

        Args:
            account_id (str): The account number.
        """
        if account_id not in self.accounts:
            return self._fail(f"Account {account_id} not found")
        return {"success": True, "data": self.accounts[account_id]}

    def deposit(self, account_id: str, amount: float):
        """Deposit cash.

        Args:
            account_id (str): The account number.
            amount (float): Amount (0-10000].
        """
        acct, problem = self._usable(account_id)
        if problem:
            return self._fail(problem)
        if not isinstance(amount, (int, float)) or not 0 < amount <= 10000:
            return self._fail("Deposit must be in (0, 10000]")
        acct["balance"] = round(acct["balance"] + amount, 2)
        ref = self._tx("deposit", account_id, amount)
        return {"success": True, "data": {"transaction": ref, "balance": acct["balance"]}}

    def transfer(self, from_account: str, to_account: str, amount: float):
        """Transfer money between two accounts (daily outgoing limit applies).

        Args:
            from_account (str): Paying account.
            to_account (str): Receiving account.
            amount (float): Amount, positive.
        """
        src, problem = self._usable(from_account)
        if problem:
            return self._fail(problem)
        dst, problem = self._usable(to_account)
        if problem:
            return self._fail(problem)
        if from_account == to_account:
            return self._fail("Cannot transfer to the same account")
        if not isinstance(amount, (int, float)) or amount <= 0:
            return self._fail("Amount must be positive")
        if src["balance"] < amount:
            return self._fail(f"Insufficient funds: balance {src['balance']}")
        if src["sent_today"] + amount > self.daily_limit:
            return self._fail(f"Daily limit of {self.daily_limit} exceeded")
        src["balance"] = round(src["balance"] - amount, 2)
        src["sent_today"] = round(src["sent_today"] + amount, 2)
        dst["balance"] = round(dst["balance"] + amount, 2)
        ref = self._tx("transfer", from_account, amount, to_account)
        return {"success": True, "data": {"transaction": ref}}

    def batch_payout(self, from_account: str, to_accounts: list, amount: float):
        """Pay the same amount from one account to several accounts, one transaction each.

        Args:
            from_account (str): Paying account.
            to_accounts (list): Receiving accounts.
            amount (float): Amount per recipient, positive.
        """
        src, problem = self._usable(from_account)
        if problem:
            return self._fail(problem)
        if not to_accounts or len(set(to_accounts)) != len(to_accounts) or from_account in to_accounts:
            return self._fail("to_accounts must be distinct accounts other than the payer")
        for acc in to_accounts:
            _, problem = self._usable(acc)
            if problem:
                return self._fail(problem)
        if not isinstance(amount, (int, float)) or amount <= 0:
            return self._fail("Amount must be positive")
        total = round(amount * len(to_accounts), 2)
        if src["balance"] < total:
            return self._fail(f"Insufficient funds for {total}")
        if src["sent_today"] + total > self.daily_limit:
            return self._fail(f"Daily limit of {self.daily_limit} exceeded")
        refs = []
        for acc in to_accounts:
            self.accounts[acc]["balance"] = round(self.accounts[acc]["balance"] + amount, 2)
            refs.append(self._tx("payout", from_account, amount, acc))
        src["balance"] = round(src["balance"] - total, 2)
        src["sent_today"] = round(src["sent_today"] + total, 2)
        return {"success": True, "data": {"transactions": refs}}

    def apply_interest(self, account_ids: list, rate: float):
        """Credit interest to the open savings accounts among those listed (others are skipped);
        each credited account records the interest earned.

        Args:
            account_ids (list): Accounts to credit.
            rate (float): Interest rate in percent (0-5].
        """
        if not isinstance(rate, (int, float)) or not 0 < rate <= 5:
            return self._fail("rate must be in (0, 5]")
        eligible = sorted({a for a in account_ids if a in self.accounts and self.accounts[a]["type"] == "savings"
                           and self.accounts[a]["status"] == "open" and self.accounts[a]["balance"] > 0})
        if not eligible:
            return self._fail(f"No open savings account with a positive balance among {account_ids}")
        for acc in eligible:
            acct = self.accounts[acc]
            interest = round(acct["balance"] * rate / 100, 2)
            acct["balance"] = round(acct["balance"] + interest, 2)
            acct["interest_earned"] = round(acct["interest_earned"] + interest, 2)
        return {"success": True, "data": {"credited": eligible, "skipped": [a for a in account_ids if a not in eligible]}}

    def freeze_account(self, account_id: str):
        """Freeze an open account.

        Args:
            account_id (str): The account number.
        """
        acct, problem = self._usable(account_id)
        if problem:
            return self._fail(problem)
        acct["status"] = "frozen"
        return {"success": True, "data": acct}

    def close_account(self, account_id: str, payout_account: str):
        """Close an account, moving its balance to another account.

        Args:
            account_id (str): Account to close.
            payout_account (str): Account receiving the balance.
        """
        acct, problem = self._usable(account_id)
        if problem:
            return self._fail(problem)
        dest, problem = self._usable(payout_account)
        if problem or account_id == payout_account:
            return self._fail(problem or "Payout account must differ")
        dest["balance"] = round(dest["balance"] + acct["balance"], 2)
        ref = self._tx("closure", account_id, acct["balance"], payout_account)
        acct["balance"] = 0
        acct["status"] = "closed"
        return {"success": True, "data": {"transaction": ref}}

    def reset_daily_limits(self):
        """Start a new banking day (outgoing totals reset)."""
        for acct in self.accounts.values():
            acct["sent_today"] = 0
        return {"success": True, "data": {"reset": len(self.accounts)}}
