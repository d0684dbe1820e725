"""The guide's running example, a company's employees, as a few rows of sample data."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EMPLOYEES", "Employee"]


class Employee(NamedTuple):
    department: str
    employee_id: str
    first: str
    last: str
    email: str


EMPLOYEES = [
    Employee("Sales", "000123", "Ada", "Jones", "ada.jones@contoso.com"),
    Employee("Sales", "000152", "Grace", "Smith", "grace.smith@contoso.com"),
    Employee("Sales", "000157", "Edsger", "Jones", "edsger.jones@contoso.com"),
    Employee("Sales", "000201", "Barbara", "Liskov", "barbara.liskov@contoso.com"),
    Employee("Sales", "000214", "Alan", "Kay", "alan.kay@contoso.com"),
    Employee("Sales", "000230", "Frances", "Allen", "frances.allen@contoso.com"),
    Employee("Sales", "000245", "Donald", "Jones", "donald.jones@contoso.com"),
    Employee("Sales", "000262", "Margaret", "Hamilton", "margaret.hamilton@contoso.com"),
    Employee("Marketing", "000301", "John", "Backus", "john.backus@contoso.com"),
    Employee("Marketing", "000318", "Radia", "Perlman", "radia.perlman@contoso.com"),
]
