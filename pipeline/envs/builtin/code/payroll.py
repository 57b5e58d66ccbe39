"""Payroll: employees, pay runs, bonuses, raises and paid time off."""


class Payroll:
    """A payroll system: pay runs accrue year-to-date gross and tax per employee, write payslips
    and draw from the company's cash account."""

    def __init__(self, config=None):
        config = config or {}
        self.employees = config.get("employees", {})
        self.payslips = config.get("payslips", {})
        self.company = config.get("company", {"cash": 0, "total_paid": 0, "period": 1})
        self.tax_rate = config.get("tax_rate", 0.2)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_employees(self):
        """List employees with salary and status."""
        return {"success": True, "data": self.employees}

    def company_summary(self):
        """Cash, total paid and the current pay period."""
        return {"success": True, "data": self.company}

    def get_employee(self, employee_id: str):
        """Get one employee.

        Args:
            employee_id (str): The employee id.
        """
        if employee_id not in self.employees:
            return self._fail(f"Employee {employee_id} not found")
        return {"success": True, "data": self.employees[employee_id]}

    def _active(self, ids):
        if not ids or len(set(ids)) != len(ids):
            return "employee_ids must be a non-empty list without duplicates"
        for eid in ids:
            if eid not in self.employees:
                return f"Employee {eid} not found"
            if self.employees[eid]["status"] != "active":
                return f"Employee {eid} is {self.employees[eid]['status']}"
        return None

    def run_payroll(self, employee_ids: list):
        """Pay one period's salary to the listed employees: year-to-date gross and tax go up, a
        payslip is written for each, company cash goes down.

        Args:
            employee_ids (list): Employees to pay.
        """
        problem = self._active(employee_ids)
        if problem:
            return self._fail(problem)
        gross = {eid: round(self.employees[eid]["salary"] / 12, 2) for eid in employee_ids}
        total = round(sum(gross.values()), 2)
        if total > self.company["cash"]:
            return self._fail(f"Insufficient cash: payroll {total}, cash {self.company['cash']}")
        period = self.company["period"]
        for eid, amount in gross.items():
            emp = self.employees[eid]
            if f"{eid}-P{period}" in self.payslips:
                return self._fail(f"Employee {eid} was already paid for period {period}")
        for eid, amount in gross.items():
            emp = self.employees[eid]
            tax = round(amount * self.tax_rate, 2)
            emp["ytd_gross"] = round(emp["ytd_gross"] + amount, 2)
            emp["ytd_tax"] = round(emp["ytd_tax"] + tax, 2)
            self.payslips[f"{eid}-P{period}"] = {"gross": amount, "tax": tax, "net": round(amount - tax, 2)}
        self.company["cash"] = round(self.company["cash"] - total, 2)
        self.company["total_paid"] = round(self.company["total_paid"] + total, 2)
        return {"success": True, "data": {"paid": total, "period": period}}

    def close_period(self):
        """Close the current pay period and open the next one."""
        self.company["period"] += 1
        return {"success": True, "data": {"period": self.company["period"]}}

    def grant_bonus(self, employee_ids: list, amount: float):
        """Pay the same one-off bonus to several employees.

        Args:
            employee_ids (list): Employees receiving the bonus.
            amount (float): Bonus per employee (0-5000].
        """
        problem = self._active(employee_ids)
        if problem:
            return self._fail(problem)
        if not isinstance(amount, (int, float)) or not 0 < amount <= 5000:
            return self._fail("Bonus must be in (0, 5000]")
        total = amount * len(employee_ids)
        if total > self.company["cash"]:
            return self._fail(f"Insufficient cash for bonuses totalling {total}")
        for eid in employee_ids:
            self.employees[eid]["ytd_gross"] = round(self.employees[eid]["ytd_gross"] + amount, 2)
        self.company["cash"] = round(self.company["cash"] - total, 2)
        self.company["total_paid"] = round(self.company["total_paid"] + total, 2)
        return {"success": True, "data": {"total": total}}

    def give_raise(self, employee_id: str, percent: float):
        """Raise an employee's salary.

        Args:
            employee_id (str): The employee id.
            percent (float): Raise in percent (0-20].
        """
        emp = self.employees.get(employee_id)
        if emp is None:
            return self._fail(f"Employee {employee_id} not found")
        if not isinstance(percent, (int, float)) or not 0 < percent <= 20:
            return self._fail("A raise must be in (0, 20] percent")
        emp["salary"] = round(emp["salary"] * (1 + percent / 100), 2)
        emp["raises"] += 1
        return {"success": True, "data": emp}

    def record_pto(self, employee_id: str, hours: int):
        """Record paid time off taken.

        Args:
            employee_id (str): The employee id.
            hours (int): Hours taken (1-80), at most the balance.
        """
        emp = self.employees.get(employee_id)
        if emp is None:
            return self._fail(f"Employee {employee_id} not found")
        if not isinstance(hours, int) or not 1 <= hours <= min(80, emp["pto_hours"]):
            return self._fail(f"Hours must be between 1 and {min(80, emp['pto_hours'])}")
        emp["pto_hours"] -= hours
        return {"success": True, "data": emp}

    def terminate(self, employee_id: str):
        """Terminate an employee: unused PTO is paid out and the salary stops.

        Args:
            employee_id (str): The employee id.
        """
        emp = self.employees.get(employee_id)
        if emp is None:
            return self._fail(f"Employee {employee_id} not found")
        if emp["status"] != "active":
            return self._fail(f"Employee {employee_id} is already {emp['status']}")
        payout = round(emp["salary"] / 2080 * emp["pto_hours"], 2)
        emp["ytd_gross"] = round(emp["ytd_gross"] + payout, 2)
        emp["pto_hours"] = 0
        emp["status"] = "terminated"
        self.company["cash"] = round(self.company["cash"] - payout, 2)
        self.company["total_paid"] = round(self.company["total_paid"] + payout, 2)
        return {"success": True, "data": {"payout": payout}}

    def add_cash(self, amount: float):
        """Fund the payroll account.

        Args:
            amount (float): Amount deposited (0-1000000].
        """
        if not isinstance(amount, (int, float)) or not 0 < amount <= 1_000_000:
            return self._fail("Deposit must be in (0, 1000000]")
        self.company["cash"] = round(self.company["cash"] + amount, 2)
        return {"success": True, "data": self.company}
