"""Seeded scenario generators for the builtin pack: many distinct initial configs and tasks per
environment, in EnvScaler's scenario format."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

FIRST = (
    "Ada Ben Chen Dana Eli Fatima Gus Hana Ivan Jun Kofi Lena Mia Noor Omar "
    "Pia Quinn Ravi Sara Tomas Uma Vik Wen Yara Zoe"
).split()
LAST = ["Okafor", "Silva", "Kim", "Novak", "Haddad", "Ito", "Berg", "Costa", "Diaz", "Fischer", "Gupta", "Lund"]
PRODUCTS = (
    "kettle,headphones,desk lamp,yoga mat,backpack,coffee grinder,monitor,keyboard,blender,sneakers,"
    "water bottle,notebook,umbrella,phone case,air fryer,tent"
).split(",")
CITIES = ["LIS", "MAD", "CDG", "FRA", "AMS", "JFK", "BOS", "SFO", "NRT", "SIN"]
SUBJECTS = ["MATH", "CS", "BIO", "CHEM", "HIST", "ECON", "PHYS", "ART"]
TITLES = (
    "Dune,Beloved,Ulysses,Emma,Middlemarch,Kindred,Solaris,Persuasion,Ficciones,Invisible Cities,"
    "The Dispossessed,Things Fall Apart,Pale Fire,The Leopard"
).split(",")


def _name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def retail(rng: random.Random) -> tuple[dict[str, Any], str]:
    products = {
        f"P{i:03d}": {
            "name": name,
            "price": round(rng.uniform(5, 120), 2),
            "stock": rng.randint(0, 40),
            "sold": rng.randint(0, 300),
        }
        for i, name in enumerate(rng.sample(PRODUCTS, rng.randint(8, 14)), 1)
    }
    customers = {
        f"C{i:03d}": {
            "name": _name(rng),
            "wallet": round(rng.uniform(0, 900), 2),
            "loyalty_points": rng.randint(0, 500),
            "tier": rng.choice(["basic", "silver", "gold"]),
            "orders": [],
        }
        for i in range(1, rng.randint(4, 8))
    }
    carts = {cid: {} for cid in customers}
    cid = rng.choice(sorted(customers))
    for pid in rng.sample(sorted(products), rng.randint(0, 3)):
        if products[pid]["stock"]:
            carts[cid][pid] = 1
    task = f"Help customer {cid} buy {rng.choice(PRODUCTS)}s and anything else on their list, then check out."
    return {
        "products": products,
        "customers": customers,
        "carts": carts,
        "orders": {},
        "order_counter": rng.randint(0, 50),
        "points_per_dollar": rng.choice([1, 2]),
    }, task


def airline(rng: random.Random) -> tuple[dict[str, Any], str]:
    flights = {}
    origins = rng.sample(CITIES, 3)
    for i in range(rng.randint(6, 10)):
        o = rng.choice(origins)
        flights[f"FX{100 + i}"] = {
            "origin": o,
            "destination": rng.choice([c for c in CITIES if c != o]),
            "seats_available": rng.randint(0, 12),
            "price": rng.choice([80, 120, 150, 210, 340]),
            "distance": rng.choice([300, 800, 1500, 5600]),
            "status": rng.choice(["scheduled"] * 4 + ["delayed"]),
        }
    passengers = {
        f"PX{i:03d}": {"name": _name(rng), "credit": rng.randint(0, 1500), "miles": rng.randint(0, 20000)}
        for i in range(1, rng.randint(6, 10))
    }
    bookings, counter = {}, 0
    for _ in range(rng.randint(2, 7)):
        fid, pid = rng.choice(sorted(flights)), rng.choice(sorted(passengers))
        counter += 1
        bookings[f"BK{counter:04d}"] = {
            "passenger_id": pid,
            "flight_id": fid,
            "seats": 1,
            "status": "confirmed",
            "changes": 0,
            "paid": flights[fid]["price"],
        }
    task = f"Passenger {rng.choice(sorted(passengers))} needs to travel from {origins[0]}; rebook or book as needed."
    return {
        "flights": flights,
        "passengers": passengers,
        "bookings": bookings,
        "booking_counter": counter,
        "change_fee": rng.choice([25, 50, 75]),
    }, task


def clinic(rng: random.Random) -> tuple[dict[str, Any], str]:
    slots = ["08:00", "08:30", "09:00", "09:30", "10:00", "10:30", "11:00", "13:00", "13:30", "14:00", "15:00", "16:00"]
    doctors = {
        f"D{i:02d}": {
            "name": "Dr. " + rng.choice(LAST),
            "specialty": rng.choice(["family", "cardio", "derma", "ortho"]),
            "fee": rng.choice([40, 60, 90]),
            "free_slots": sorted(rng.sample(slots, rng.randint(2, 8))),
            "booked": 0,
            "completed": rng.randint(0, 30),
        }
        for i in range(1, rng.randint(3, 6))
    }
    supplies = {
        s: rng.randint(0, 20) for s in ["gloves", "syringe", "bandage", "swab", "gauze", "suture", "cast", "vaccine"]
    }
    procedures = {
        f"PR{i}": {"name": n, "price": rng.choice([15, 30, 45, 80, 120]), "supply": s}
        for i, (n, s) in enumerate(
            zip(
                ["exam", "injection", "dressing", "test", "cleaning", "stitches", "splint", "vaccination"],
                list(supplies),
            ),
            1,
        )
    }
    patients = {
        f"PT{i:03d}": {
            "name": _name(rng),
            "balance": rng.choice([0, 0, 20, 150]),
            "credit_limit": 300,
            "visits": rng.randint(0, 12),
            "payments": 0,
        }
        for i in range(1, rng.randint(4, 9))
    }
    appointments, counter = {}, 0
    for did in rng.sample(sorted(doctors), min(2, len(doctors))):
        if doctors[did]["free_slots"]:
            slot = doctors[did]["free_slots"].pop(0)
            counter += 1
            doctors[did]["booked"] += 1
            appointments[f"A{counter:04d}"] = {
                "patient_id": rng.choice(sorted(patients)),
                "doctor_id": did,
                "slot": slot,
                "status": "booked",
                "procedures": [],
            }
    task = (
        f"Schedule patient {rng.choice(sorted(patients))} with a {rng.choice(['family', 'cardio'])} doctor and "
        "record today's visits."
    )
    return {
        "doctors": doctors,
        "patients": patients,
        "appointments": appointments,
        "supplies": supplies,
        "procedures": procedures,
        "appointment_counter": counter,
    }, task


def university(rng: random.Random) -> tuple[dict[str, Any], str]:
    courses = {}
    for subj in rng.sample(SUBJECTS, rng.randint(3, 5)):
        for level in (101, 201):
            cid = f"{subj}{level}"
            courses[cid] = {
                "id": cid,
                "credits": rng.choice([3, 4]),
                "capacity": rng.randint(3, 30),
                "enrolled": 0,
                "prerequisites": [f"{subj}101"] if level == 201 else [],
                "graded": 0,
            }
    students = {}
    for i in range(1, rng.randint(6, 12)):
        done = [c for c in courses if c.endswith("101") and rng.random() < 0.4]
        students[f"S{i:04d}"] = {
            "name": _name(rng),
            "credits": 0,
            "courses": [],
            "completed": done,
            "balance": rng.choice([0, 0, 600, 4200, 6000]),
            "hold": rng.random() < 0.2,
        }
    for st in students.values():
        for cid in rng.sample(sorted(c for c in courses if not courses[c]["prerequisites"]), rng.randint(0, 2)):
            if courses[cid]["enrolled"] < courses[cid]["capacity"] and not st["hold"]:
                st["courses"].append(cid)
                st["credits"] += courses[cid]["credits"]
                courses[cid]["enrolled"] += 1
    task = f"Register the cohort for {rng.choice(sorted(courses))} and post last term's grades."
    return {
        "courses": courses,
        "students": students,
        "transcripts": {},
        "max_credits": rng.choice([15, 18, 21]),
        "tuition_per_credit": rng.choice([250, 300, 420]),
    }, task


def warehouse(rng: random.Random) -> tuple[dict[str, Any], str]:
    bins = {
        f"B{z}{n}": {"capacity": rng.choice([200, 400, 800]), "used": 0, "open": True}
        for z in "ABC"[: rng.randint(2, 3)]
        for n in range(1, rng.randint(3, 5))
    }
    items = {}
    for i in range(1, rng.randint(8, 14)):
        b = rng.choice(sorted(bins))
        qty = rng.randint(0, 60)
        bins[b]["used"] += qty
        items[f"SKU-{i:04d}"] = {
            "name": rng.choice(PRODUCTS),
            "qty": qty,
            "reserved": rng.randint(0, qty // 3) if qty else 0,
            "bin": b,
            "moves": 0,
        }
    task = f"Receive today's inbound delivery and pick order for {rng.randint(2, 6)} SKUs."
    return {"items": items, "bins": bins, "shipments": {}, "shipment_counter": rng.randint(0, 900)}, task


def payroll(rng: random.Random) -> tuple[dict[str, Any], str]:
    employees = {
        f"E{i:03d}": {
            "name": _name(rng),
            "salary": rng.choice([42000, 55000, 68000, 90000, 120000]),
            "ytd_gross": 0,
            "ytd_tax": 0,
            "pto_hours": rng.randint(0, 120),
            "raises": 0,
            "status": rng.choice(["active"] * 6 + ["on_leave"]),
        }
        for i in range(1, rng.randint(6, 12))
    }
    company = {"cash": rng.choice([20000, 60000, 150000]), "total_paid": 0, "period": rng.randint(1, 11)}
    task = f"Run payroll for period {company['period']} and handle the pending bonus and raise requests."
    return {"employees": employees, "payslips": {}, "company": company, "tax_rate": rng.choice([0.18, 0.22, 0.3])}, task


def library(rng: random.Random) -> tuple[dict[str, Any], str]:
    books = {
        f"BK{i:03d}": {"title": t, "available": rng.randint(0, 3), "circulation": rng.randint(0, 80), "holds": []}
        for i, t in enumerate(rng.sample(TITLES, rng.randint(7, 12)), 1)
    }
    members = {
        f"M{i:03d}": {"name": _name(rng), "loans": [], "fines": rng.choice([0, 0, 2.5, 15]), "paid": 0}
        for i in range(1, rng.randint(4, 8))
    }
    loans, counter, today = {}, 0, rng.randint(50, 200)
    for _ in range(rng.randint(2, 8)):
        mid, bid = rng.choice(sorted(members)), rng.choice(sorted(books))
        counter += 1
        lid = f"L{counter:05d}"
        loans[lid] = {"book_id": bid, "member_id": mid, "due": today + rng.randint(-20, 20), "status": "out"}
        members[mid]["loans"].append(lid)
    hold_book = rng.choice(sorted(books))
    books[hold_book]["holds"] = [rng.choice(sorted(members))]
    task = f"Member {rng.choice(sorted(members))} returns their books and borrows {rng.randint(2, 5)} new ones."
    return {
        "books": books,
        "members": members,
        "loans": loans,
        "loan_counter": counter,
        "today": today,
        "max_loans": rng.choice([6, 8, 10]),
    }, task


def banking(rng: random.Random) -> tuple[dict[str, Any], str]:
    accounts = {}
    for i in range(1, rng.randint(8, 13)):
        accounts[f"AC{1000 + i}"] = {
            "owner": _name(rng),
            "type": "savings" if i % 2 else "checking",
            "balance": round(rng.uniform(0, 9000), 2),
            "status": rng.choice(["open"] * 8 + ["frozen"]),
            "sent_today": 0,
            "interest_earned": 0,
        }
    task = f"Pay the contractors from {rng.choice(sorted(accounts))} and apply this month's savings interest."
    return {
        "accounts": accounts,
        "transactions": {},
        "tx_counter": rng.randint(0, 5000),
        "daily_limit": rng.choice([3000, 5000, 10000]),
    }, task


def hotel(rng: random.Random) -> tuple[dict[str, Any], str]:
    rooms = {
        f"{floor}{n:02d}": {
            "type": rng.choice(["single", "double", "suite"]),
            "rate": rng.choice([90, 130, 180, 320]),
            "status": rng.choice(["vacant"] * 5 + ["dirty", "occupied"]),
            "guest_id": None,
            "cleanings": 0,
        }
        for floor in range(1, rng.randint(2, 4))
        for n in range(1, rng.randint(4, 7))
    }
    guests = {
        f"G{i:03d}": {
            "name": _name(rng),
            "folio": 0,
            "points": rng.choice([0, 120, 800]),
            "stays": rng.randint(0, 9),
            "lifetime_spend": 0,
        }
        for i in range(1, rng.randint(4, 8))
    }
    reservations, counter = {}, 0
    for rid in [r for r in sorted(rooms) if rooms[r]["status"] == "vacant"][: rng.randint(0, 3)]:
        counter += 1
        gid = rng.choice(sorted(guests))
        rooms[rid]["status"] = "held"
        reservations[f"R{counter:04d}"] = {
            "guest_id": gid,
            "room_id": rid,
            "nights": rng.randint(1, 5),
            "status": "reserved",
        }
        guests[gid]["folio"] += rooms[rid]["rate"] * reservations[f"R{counter:04d}"]["nights"]
    task = f"Check in the arriving party of guest {rng.choice(sorted(guests))} and turn over the dirty rooms."
    return {"rooms": rooms, "guests": guests, "reservations": reservations, "reservation_counter": counter}, task


def projects(rng: random.Random) -> tuple[dict[str, Any], str]:
    members = {
        f"U{i:02d}": {
            "name": _name(rng),
            "capacity": rng.choice([8, 13, 21]),
            "load": 0,
            "completed": rng.randint(0, 40),
        }
        for i in range(1, rng.randint(3, 6))
    }
    tasks = {}
    for i in range(1, rng.randint(8, 15)):
        tasks[f"PRJ-{i}"] = {
            "title": f"{rng.choice(['Fix', 'Build', 'Refactor', 'Document'])} {rng.choice(PRODUCTS)} "
            f"{rng.choice(['API', 'page', 'report', 'job'])}",
            "points": rng.choice([1, 2, 3, 5, 8]),
            "status": "backlog",
            "assignee": None,
            "sprint": None,
        }
    sprints = {
        "SP1": {"status": "active", "committed": 0, "burned": 0, "velocity": None},
        "SP2": {"status": "planned", "committed": 0, "burned": 0, "velocity": None},
    }
    for tid in rng.sample(sorted(tasks), rng.randint(2, 5)):
        mid = rng.choice(sorted(members))
        if members[mid]["load"] + tasks[tid]["points"] <= members[mid]["capacity"]:
            tasks[tid].update(status="in_sprint", sprint="SP1", assignee=mid)
            members[mid]["load"] += tasks[tid]["points"]
            sprints["SP1"]["committed"] += tasks[tid]["points"]
    task = "Plan sprint SP2 for the team and close out finished work in SP1."
    return {"tasks": tasks, "members": members, "sprints": sprints, "task_counter": len(tasks)}, task


GENERATORS: dict[str, Callable[[random.Random], tuple[dict[str, Any], str]]] = {
    g.__name__: g for g in (retail, airline, clinic, university, warehouse, payroll, library, banking, hotel, projects)
}


def _check(item: str, *lines: str) -> dict[str, str]:
    """One ``checklist_with_func`` item (EnvScaler's format): what it checks, and ``check_func(final_state)``, whose
    body is ``lines``, the last one returned."""
    *head, value = lines
    body = "".join(f"    {line}\n" for line in [*head, f"return {value}"])
    return {"check_item": item, "check_func": "def check_func(final_state):\n" + body}


def checklist(domain: str, config: dict[str, Any], task: str) -> list[dict[str, str]]:
    """The executable checks of a scenario's task: the state its goal names, read from the final state (the
    served reward is their mean). Derived from the task's own ids and the initial config, so the generators'
    draws (and the scenarios' bytes) are unchanged."""
    if domain == "retail":
        (cid,) = re.findall(r"C\d{3}", task)
        return [
            _check(f"customer {cid} has placed an order", f"len(final_state['customers']['{cid}']['orders']) > 0"),
            _check(f"customer {cid}'s cart is empty", f"not final_state['carts']['{cid}']"),
        ]
    if domain == "airline":
        (pid,) = re.findall(r"PX\d{3}", task)
        return [
            _check(
                f"passenger {pid} holds a confirmed booking",
                f"any(b['passenger_id'] == '{pid}' and b['status'] == 'confirmed'\n"
                "               for b in final_state['bookings'].values())",
            )
        ]
    if domain == "clinic":
        (pid,) = re.findall(r"PT\d{3}", task)
        before = sum(a["patient_id"] == pid for a in config["appointments"].values())
        return [
            _check(
                f"patient {pid} has a new appointment",
                f"mine = [a for a in final_state['appointments'].values() if a['patient_id'] == '{pid}']",
                f"len(mine) > {before}",
            )
        ]
    if domain == "university":
        (course,) = re.findall(r"[A-Z]+\d{3}", task)
        enrolled = config["courses"][course]["enrolled"]
        return [
            _check(
                f"more students enrolled in {course}", f"final_state['courses']['{course}']['enrolled'] > {enrolled}"
            ),
            _check("grades were posted", "len(final_state['transcripts']) > 0"),
        ]
    if domain == "warehouse":
        return [_check("an order was picked into a shipment", "len(final_state['shipments']) > 0")]
    if domain == "payroll":
        return [_check("payslips were issued", "len(final_state['payslips']) > 0")]
    if domain == "library":
        (mid,) = re.findall(r"M\d{3}", task)
        loans = len(config["members"][mid]["loans"])
        return [_check(f"member {mid} borrowed books", f"len(final_state['members']['{mid}']['loans']) > {loans}")]
    if domain == "banking":
        (acc,) = re.findall(r"AC\d{4}", task)
        return [
            _check(f"a payment left {acc}", f"any('{acc}' in str(t) for t in final_state['transactions'].values())")
        ]
    if domain == "hotel":
        (gid,) = re.findall(r"G\d{3}", task)
        return [
            _check(
                f"guest {gid} is checked in", f"any(r['guest_id'] == '{gid}' for r in final_state['rooms'].values())"
            )
        ]
    if domain == "projects":
        return [
            _check("sprint SP2 is active", "final_state['sprints'].get('SP2', {}).get('status') == 'active'"),
            _check(
                "finished SP1 work is closed",
                "tasks = final_state['tasks'].values()",
                "any(t['sprint'] == 'SP1' and t['status'] == 'done' for t in tasks)",
            ),
        ]
    return []
