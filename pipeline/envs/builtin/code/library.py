"""Library: books and copies, members, loans, holds and fines."""


class Library:
    """A public library circulation desk: loans with due days, holds queues and overdue fines."""

    def __init__(self, config=None):
        config = config or {}
        self.books = config.get("books", {})
        self.members = config.get("members", {})
        self.loans = config.get("loans", {})
        self.loan_counter = config.get("loan_counter", 0)
        self.today = config.get("today", 100)
        self.max_loans = config.get("max_loans", 8)

    def _fail(self, message):
        return {"success": False, "error": message}

    def catalog(self):
        """List books with available copies."""
        return {"success": True, "data": self.books}

    def get_book(self, book_id: str):
        """Get one book.

        Args:
            book_id (str): The book id.
        """
        if book_id not in self.books:
            return self._fail(f"Book {book_id} not found")
        return {"success": True, "data": self.books[book_id]}

    def get_member(self, member_id: str):
        """Get a member's loans and fines.

        Args:
            member_id (str): The member id.
        """
        if member_id not in self.members:
            return self._fail(f"Member {member_id} not found")
        return {"success": True, "data": self.members[member_id]}

    def checkout_books(self, member_id: str, book_ids: list):
        """Lend several books to a member: each book loses a copy and counts a circulation, a loan
        is created per book, the member's loan list grows.

        Args:
            member_id (str): The member id.
            book_ids (list): Books to borrow.
        """
        member = self.members.get(member_id)
        if member is None:
            return self._fail(f"Member {member_id} not found")
        if member["fines"] > 10:
            return self._fail(f"Member {member_id} owes {member['fines']} in fines")
        if not book_ids or len(set(book_ids)) != len(book_ids):
            return self._fail("book_ids must be a non-empty list without duplicates")
        if len(member["loans"]) + len(book_ids) > self.max_loans:
            return self._fail(f"Member {member_id} may hold at most {self.max_loans} loans")
        for bid in book_ids:
            book = self.books.get(bid)
            if book is None:
                return self._fail(f"Book {bid} not found")
            if book["available"] < 1:
                return self._fail(f"No copy of {bid} is available")
            if book["holds"] and book["holds"][0] != member_id:
                return self._fail(f"Book {bid} is on hold for {book['holds'][0]}")
        new = []
        for bid in book_ids:
            book = self.books[bid]
            book["available"] -= 1
            book["circulation"] += 1
            if book["holds"] and book["holds"][0] == member_id:
                book["holds"] = book["holds"][1:]
            self.loan_counter += 1
            lid = f"L{self.loan_counter:05d}"
            self.loans[lid] = {"book_id": bid, "member_id": member_id, "due": self.today + 21, "status": "out"}
            new.append(lid)
        member["loans"] = member["loans"] + new
        return {"success": True, "data": {"loans": new}}

    def return_books(self, loan_ids: list):
        """Return loans: copies come back, overdue days are fined.

        Args:
            loan_ids (list): Loans being returned.
        """
        if not loan_ids or len(set(loan_ids)) != len(loan_ids):
            return self._fail("loan_ids must be a non-empty list without duplicates")
        for lid in loan_ids:
            if lid not in self.loans or self.loans[lid]["status"] != "out":
                return self._fail(f"Loan {lid} is not an open loan")
        for lid in loan_ids:
            loan = self.loans[lid]
            member = self.members[loan["member_id"]]
            self.books[loan["book_id"]]["available"] += 1
            loan["status"] = "returned"
            member["loans"] = [x for x in member["loans"] if x != lid]
            if self.today > loan["due"]:
                member["fines"] = round(member["fines"] + 0.25 * (self.today - loan["due"]), 2)
        return {"success": True, "data": {"returned": loan_ids}}

    def renew(self, loan_id: str):
        """Renew an open loan for 14 more days (not if someone holds the book).

        Args:
            loan_id (str): The loan id.
        """
        loan = self.loans.get(loan_id)
        if loan is None or loan["status"] != "out":
            return self._fail(f"Loan {loan_id} is not an open loan")
        if self.books[loan["book_id"]]["holds"]:
            return self._fail(f"Book {loan['book_id']} has holds and cannot be renewed")
        loan["due"] += 14
        loan["renewals"] = loan.get("renewals", 0) + 1
        return {"success": True, "data": loan}

    def place_hold(self, member_id: str, book_id: str):
        """Join the holds queue of a book.

        Args:
            member_id (str): The member id.
            book_id (str): The book id.
        """
        if member_id not in self.members:
            return self._fail(f"Member {member_id} not found")
        book = self.books.get(book_id)
        if book is None:
            return self._fail(f"Book {book_id} not found")
        if member_id in book["holds"]:
            return self._fail(f"Member {member_id} already holds {book_id}")
        book["holds"] = book["holds"] + [member_id]
        return {"success": True, "data": book}

    def pay_fine(self, member_id: str, amount: float):
        """Pay part or all of a member's fines.

        Args:
            member_id (str): The member id.
            amount (float): Amount paid, positive and at most the fines owed.
        """
        member = self.members.get(member_id)
        if member is None:
            return self._fail(f"Member {member_id} not found")
        if not isinstance(amount, (int, float)) or not 0 < amount <= member["fines"]:
            return self._fail(f"Amount must be in (0, {member['fines']}]")
        member["fines"] = round(member["fines"] - amount, 2)
        member["paid"] = round(member["paid"] + amount, 2)
        return {"success": True, "data": member}

    def advance_days(self, days: int):
        """Advance the library's calendar.

        Args:
            days (int): Days to advance (1-60).
        """
        if not isinstance(days, int) or not 1 <= days <= 60:
            return self._fail("days must be between 1 and 60")
        self.today += days
        return {"success": True, "data": {"today": self.today}}
