"""Corpora whose write tools succeed only with arguments that fit together (issue 41), in EnvScaler's released
format, written the way third-party corpora are, not around this project:

- :func:`shop_corpus` — a customer-service desk (users with *their* payment methods and addresses, orders with
  statuses and *their* items, products with variants). Its write tools are valid only as combinations: a pending
  (or delivered) order, item ids *of that order*, replacements that are variants *of the same product*, a payment
  method *of the order's user*; a return is confirmed with the code that ``request_return`` answered (the state
  does not hold it). The largest state change of one valid call is an exchange of three items paid by a gift card:
  |Δ| 8 (:data:`SHOP_MAX_DELTA`); every |Δ| from 6 up needs such a combination (an address change reaches 5).
  Refusals are EnvScaler's ``{"success": False, "error": ...}``. An order's lines are keyed by line id, so a swap
  changes 2 fields per line (|Δ| counts changed dict paths; a list is one value).
- :func:`garage_corpus` — a parking garage that keys its spots by id in a mapping whose values are ``None`` while
  free (``{"A1": None, ...}``); it refuses with ``DENIED: ...`` texts, which no rule knows either. A valid ``park``,
  ``pay`` or ``leave`` changes 2 fields.
- :func:`reading_room_corpus` — a reading room that refuses as ``{'result': 'refused', 'why': 'already lent'}``,
  a convention no outcome rule knows; mixed with an environment whose refusals the default rule knows.
"""

from __future__ import annotations

import random
from typing import Any

from tests.support.user_corpora import _fn, env_item

#: the largest |Δ| one valid call of the shop makes (an exchange of 3 items paid by gift card)
SHOP_MAX_DELTA = 8
#: the shop's tools that change state
SHOP_WRITE_TOOLS = (
    "cancel_pending_order",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "exchange_delivered_order_items",
    "request_return",
    "confirm_return",
    "update_user_address",
)

SHOP_CODE = '''
from typing import Dict, List, TypedDict


class Address(TypedDict):
    address1: str
    city: str
    state: str
    zip: str
    country: str


class ShopDesk:
    """Customer service of an online shop."""

    def __init__(self, init_config: dict = None):
        init_config = init_config or {}
        self.users: Dict[str, dict] = init_config.get("users", {})
        self.orders: Dict[str, dict] = init_config.get("orders", {})
        self.products: Dict[str, dict] = init_config.get("products", {})
        self.return_requests: Dict[str, dict] = init_config.get("return_requests", {})

    def _no(self, why):
        return {"success": False, "error": why}

    def find_user_id_by_email(self, email: str) -> dict:
        """Find a user's id by email."""
        for uid, user in self.users.items():
            if user["email"] == email:
                return {"success": True, "data": uid}
        return self._no("user not found")

    def get_user_details(self, user_id: str) -> dict:
        """A user's profile, payment methods and orders."""
        if user_id not in self.users:
            return self._no("user not found")
        return {"success": True, "data": self.users[user_id]}

    def get_order_details(self, order_id: str) -> dict:
        """An order."""
        if order_id not in self.orders:
            return self._no("order not found")
        return {"success": True, "data": self.orders[order_id]}

    def get_product_details(self, product_id: str) -> dict:
        """A product and its variants."""
        if product_id not in self.products:
            return self._no("product not found")
        return {"success": True, "data": self.products[product_id]}

    def _order(self, order_id, status):
        if order_id not in self.orders:
            return None, self._no("order not found")
        if self.orders[order_id]["status"] != status:
            return None, self._no(f"order is not {status}")
        return self.orders[order_id], None

    def _method(self, order, payment_method_id):
        methods = self.users[order["user_id"]]["payment_methods"]
        if payment_method_id not in methods:
            return None, self._no("payment method not found for this user")
        return methods[payment_method_id], None

    def _swap(self, order, item_ids, new_item_ids):
        """(items of the order to change, new variants), or a refusal."""
        if not item_ids or len(item_ids) != len(new_item_ids):
            return None, self._no("item_ids and new_item_ids must be non-empty and of equal length")
        if len(set(item_ids)) != len(item_ids):
            return None, self._no("item_ids must be distinct")
        lines = {line["item_id"]: line for line in order["items"].values()}
        pairs = []
        for old, new in zip(item_ids, new_item_ids):
            if old not in lines:
                return None, self._no(f"item {old} not found in this order")
            variants = self.products[lines[old]["product_id"]]["variants"]
            if new not in variants:
                return None, self._no(f"new item {new} is not a variant of the same product")
            if new == old:
                return None, self._no("new item must differ from the old one")
            if not variants[new]["available"]:
                return None, self._no(f"new item {new} is not available")
            pairs.append((lines[old], new, variants[new]["price"]))
        return pairs, None

    def _charge(self, method, amount):
        if method["source"] == "gift_card":
            if method["balance"] < amount:
                return self._no("insufficient gift card balance")
            method["balance"] = round(method["balance"] - amount, 2)
        return None

    def cancel_pending_order(self, order_id: str, reason: str) -> dict:
        """Cancel a pending order; the payment is refunded."""
        order, no = self._order(order_id, "pending")
        if no:
            return no
        if reason not in ("no longer needed", "ordered by mistake"):
            return self._no("reason must be 'no longer needed' or 'ordered by mistake'")
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["refunded"] = round(sum(line["price"] for line in order["items"].values()), 2)
        return {"success": True, "data": order}

    def modify_pending_order_address(
        self, order_id: str, address1: str, city: str, state: str, zip: str, country: str
    ) -> dict:
        """Change the shipping address of a pending order."""
        order, no = self._order(order_id, "pending")
        if no:
            return no
        order["address"] = {"address1": address1, "city": city, "state": state, "zip": zip, "country": country}
        return {"success": True, "data": order}

    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict:
        """Pay a pending order with another payment method of its user."""
        order, no = self._order(order_id, "pending")
        if no:
            return no
        method, no = self._method(order, payment_method_id)
        if no:
            return no
        if payment_method_id == order["payment_method_id"]:
            return self._no("the order is paid with this payment method already")
        order["payment_method_id"] = payment_method_id
        return {"success": True, "data": order}

    def modify_pending_order_items(
        self, order_id: str, item_ids: List[str], new_item_ids: List[str], payment_method_id: str
    ) -> dict:
        """Swap items of a pending order for other variants of the same products."""
        order, no = self._order(order_id, "pending")
        if no:
            return no
        method, no = self._method(order, payment_method_id)
        if no:
            return no
        pairs, no = self._swap(order, item_ids, new_item_ids)
        if no:
            return no
        if no := self._charge(method, sum(max(0, p - line["price"]) for line, _, p in pairs)):
            return no
        for line, new, price in pairs:
            line["item_id"], line["price"] = new, price
        return {"success": True, "data": order}

    def exchange_delivered_order_items(
        self, order_id: str, item_ids: List[str], new_item_ids: List[str], payment_method_id: str
    ) -> dict:
        """Exchange items of a delivered order for other variants of the same products."""
        order, no = self._order(order_id, "delivered")
        if no:
            return no
        method, no = self._method(order, payment_method_id)
        if no:
            return no
        pairs, no = self._swap(order, item_ids, new_item_ids)
        if no:
            return no
        if no := self._charge(method, sum(max(0, p - line["price"]) for line, _, p in pairs)):
            return no
        for line, new, price in pairs:
            line["item_id"], line["price"] = new, price
        order["status"] = "exchange requested"
        return {"success": True, "data": order}

    def request_return(self, order_id: str, item_ids: List[str]) -> dict:
        """Ask to return items of a delivered order; answers the return code to confirm it with."""
        order, no = self._order(order_id, "delivered")
        if no:
            return no
        ours = {line["item_id"] for line in order["items"].values()}
        if not item_ids or any(i not in ours for i in item_ids):
            return self._no("item not found in this order")
        number = len(self.return_requests) + 1
        self.return_requests[order_id] = {"items": list(item_ids), "number": number}
        return {"success": True, "data": {"return_code": f"RET-{number}-{order_id}"}}

    def confirm_return(self, return_code: str, payment_method_id: str) -> dict:
        """Confirm a requested return; the refund goes to a payment method of the order's user."""
        parts = return_code.split("-", 2)
        if len(parts) != 3 or parts[0] != "RET" or parts[2] not in self.return_requests:
            return self._no("return code not found")
        request = self.return_requests[parts[2]]
        if str(request["number"]) != parts[1]:
            return self._no("return code not found")
        order = self.orders[parts[2]]
        method, no = self._method(order, payment_method_id)
        if no:
            return no
        order["status"] = "return requested"
        order["returned_items"] = request["items"]
        order["refund_method_id"] = payment_method_id
        del self.return_requests[parts[2]]
        return {"success": True, "data": order}

    def update_user_address(
        self, user_id: str, address1: str, city: str, state: str, zip: str, country: str
    ) -> dict:
        """Change a user's default address."""
        if user_id not in self.users:
            return self._no("user not found")
        self.users[user_id]["address"] = {"address1": address1, "city": city, "state": state, "zip": zip,
                                          "country": country}
        return {"success": True, "data": self.users[user_id]}
'''

_S = {"type": "string"}
_LIST = {"type": "array", "items": {"type": "string"}}
_ADDRESS = {k: _S for k in ("address1", "city", "state", "zip", "country")}

SHOP_TOOLS = [
    _fn("find_user_id_by_email", "Find a user's id by email.", {"email": _S}, ["email"]),
    _fn("get_user_details", "A user's profile.", {"user_id": _S}, ["user_id"]),
    _fn("get_order_details", "An order.", {"order_id": _S}, ["order_id"]),
    _fn("get_product_details", "A product.", {"product_id": _S}, ["product_id"]),
    _fn(
        "cancel_pending_order",
        "Cancel a pending order.",
        {"order_id": _S, "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}},
        ["order_id", "reason"],
    ),
    _fn(
        "modify_pending_order_address",
        "Change a pending order's address.",
        {"order_id": _S, **_ADDRESS},
        ["order_id", *_ADDRESS],
    ),
    _fn(
        "modify_pending_order_payment",
        "Pay a pending order with another method.",
        {"order_id": _S, "payment_method_id": _S},
        ["order_id", "payment_method_id"],
    ),
    _fn(
        "modify_pending_order_items",
        "Swap items of a pending order.",
        {"order_id": _S, "item_ids": _LIST, "new_item_ids": _LIST, "payment_method_id": _S},
        ["order_id", "item_ids", "new_item_ids", "payment_method_id"],
    ),
    _fn(
        "exchange_delivered_order_items",
        "Exchange items of a delivered order.",
        {"order_id": _S, "item_ids": _LIST, "new_item_ids": _LIST, "payment_method_id": _S},
        ["order_id", "item_ids", "new_item_ids", "payment_method_id"],
    ),
    _fn(
        "request_return",
        "Ask to return items of a delivered order.",
        {"order_id": _S, "item_ids": _LIST},
        ["order_id", "item_ids"],
    ),
    _fn(
        "confirm_return",
        "Confirm a return with its code.",
        {"return_code": _S, "payment_method_id": _S},
        ["return_code", "payment_method_id"],
    ),
    _fn("update_user_address", "Change a user's address.", {"user_id": _S, **_ADDRESS}, ["user_id", *_ADDRESS]),
]

_CITIES = [
    ("Austin", "TX", "USA"),
    ("Lyon", "ARA", "France"),
    ("Osaka", "OS", "Japan"),
    ("Porto", "PT-13", "Portugal"),
    ("Quito", "P", "Ecuador"),
    ("Tartu", "TA", "Estonia"),
]
_PRODUCTS = ["shirt", "lamp", "kettle", "backpack", "headphones", "boots", "tent", "watch"]


def _address(rng: random.Random, k: int) -> dict[str, str]:
    city, state, country = _CITIES[k % len(_CITIES)]
    return {
        "address1": f"{rng.randint(1, 999)} {rng.choice(['Oak', 'Elm', 'Pine', 'Main'])} St",
        "city": city,
        "state": state,
        "zip": f"{rng.randint(10000, 99999)}",
        "country": country,
    }


def shop_state(seed: int, n_users: int = 6) -> dict[str, Any]:
    """One scenario's state: a few KB of users, orders and products (ids differ between scenarios)."""
    rng = random.Random(seed)
    products: dict[str, Any] = {}
    for p, name in enumerate(_PRODUCTS):
        pid = f"P{seed}{p:02d}"
        variants = {
            f"I{seed}{p:02d}{v}": {"options": {"size": s}, "available": rng.random() < 0.8, "price": 10.0 + 5 * v + p}
            for v, s in enumerate(["S", "M", "L", "XL"])
        }
        products[pid] = {"name": name, "product_id": pid, "variants": variants}
    users: dict[str, Any] = {}
    orders: dict[str, Any] = {}
    for u in range(n_users):
        uid = f"user_{seed}_{u}"
        methods = {
            f"card_{seed}{u}": {"source": "credit_card", "last_four": f"{rng.randint(1000, 9999)}"},
            f"gift_{seed}{u}": {"source": "gift_card", "balance": float(rng.choice([20, 80, 150]))},
        }
        if u % 2:
            methods[f"paypal_{seed}{u}"] = {"source": "paypal"}
        users[uid] = {
            "name": f"user {u}",
            "email": f"u{u}.s{seed}@mail.test",
            "address": _address(rng, u),
            "payment_methods": methods,
            "orders": [],
        }
        for o in range(3):
            oid = f"#W{seed}{u}{o}"
            items = {}  # order lines by line id: a swap of one changes its item id and its price
            for n, p in enumerate(rng.sample(range(len(_PRODUCTS)), 3)):
                pid = f"P{seed}{p:02d}"
                iid = rng.choice(sorted(products[pid]["variants"]))
                items[f"L{n + 1}"] = {
                    "item_id": iid,
                    "product_id": pid,
                    "price": products[pid]["variants"][iid]["price"],
                }
            orders[oid] = {
                "order_id": oid,
                "user_id": uid,
                "status": ["pending", "delivered", "cancelled"][(u + o) % 3],
                "address": dict(users[uid]["address"]),
                "items": items,
                "payment_method_id": sorted(methods)[0],
            }
            users[uid]["orders"].append(oid)
    return {"users": users, "orders": orders, "products": products, "return_requests": {}}


def shop_corpus(scenarios: int = 30) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The shop as one environment with ``scenarios`` scenarios (each its own users, orders and products)."""
    items = {"shop": env_item("ShopDesk", SHOP_CODE, SHOP_TOOLS)}
    rows = [
        {
            "task_id": f"shop-{k}",
            "env_id": "shop",
            "env_class_name": "ShopDesk",
            "init_config": shop_state(k),
            "task": "Help the customer with their order.",
        }
        for k in range(scenarios)
    ]
    return items, rows


GARAGE_CODE = '''
class Garage:
    """A parking garage: spots by id, tickets by plate."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.spots = init_config.get("spots", {})
        self.tickets = init_config.get("tickets", {})
        self.takings = init_config.get("takings", 0)

    def free_spots(self):
        """Spots nobody parks in."""
        return [spot for spot, plate in self.spots.items() if plate is None]

    def park(self, spot_id: str, plate: str):
        """Park a car in a free spot."""
        if spot_id not in self.spots:
            return f"DENIED: there is no spot {spot_id}"
        if self.spots[spot_id] is not None:
            return f"DENIED: spot {spot_id} is taken"
        if plate in self.tickets:
            return f"DENIED: {plate} is parked already"
        self.spots[spot_id] = plate
        self.tickets[plate] = {"spot": spot_id, "paid": False}
        return f"OK: {plate} parked in {spot_id}"

    def pay(self, plate: str):
        """Pay a car's ticket."""
        if plate not in self.tickets:
            return f"DENIED: no ticket for {plate}"
        if self.tickets[plate]["paid"]:
            return f"DENIED: {plate} has paid already"
        self.tickets[plate]["paid"] = True
        self.takings += 5
        return f"OK: {plate} paid"

    def leave(self, plate: str):
        """A paid car leaves."""
        if plate not in self.tickets:
            return f"DENIED: no ticket for {plate}"
        if not self.tickets[plate]["paid"]:
            return f"DENIED: {plate} has not paid"
        self.spots[self.tickets.pop(plate)["spot"]] = None
        return f"OK: {plate} left"
'''

GARAGE_TOOLS = [
    _fn("free_spots", "Spots nobody parks in.", {}, []),
    _fn("park", "Park a car.", {"spot_id": _S, "plate": _S}, ["spot_id", "plate"]),
    _fn("pay", "Pay a ticket.", {"plate": _S}, ["plate"]),
    _fn("leave", "A paid car leaves.", {"plate": _S}, ["plate"]),
]


def garage_state(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    spots: dict[str, Any] = {f"{row}{n}": None for row in "AB" for n in range(1, 5)}
    tickets = {}
    for spot in rng.sample(sorted(spots), 3):
        plate = f"{rng.choice(['KA', 'ZH', 'OL'])}-{rng.randint(100, 999)}"
        spots[spot] = plate
        tickets[plate] = {"spot": spot, "paid": rng.random() < 0.5}
    return {"spots": spots, "tickets": tickets, "takings": 0}


READING_ROOM_CODE = '''
class ReadingRoom:
    """Books lent to readers."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.books = init_config.get("books", {})
        self.readers = init_config.get("readers", {})

    def catalog(self):
        """Every book."""
        return {"result": "ok", "books": self.books}

    def lend(self, book_id: str, reader_id: str):
        """Lend a book to a reader."""
        if book_id not in self.books:
            return {"result": "refused", "why": "no such book"}
        if reader_id not in self.readers:
            return {"result": "refused", "why": "no such reader"}
        if self.books[book_id]["lent_to"] is not None:
            return {"result": "refused", "why": "already lent"}
        self.books[book_id]["lent_to"] = reader_id
        self.readers[reader_id]["loans"] += 1
        return {"result": "lent", "book_id": book_id}

    def give_back(self, book_id: str):
        """A lent book comes back."""
        if book_id not in self.books:
            return {"result": "refused", "why": "no such book"}
        reader = self.books[book_id]["lent_to"]
        if reader is None:
            return {"result": "refused", "why": "not lent"}
        self.books[book_id]["lent_to"] = None
        self.readers[reader]["loans"] -= 1
        return {"result": "back", "book_id": book_id}
'''

READING_ROOM_TOOLS = [
    _fn("catalog", "Every book.", {}, []),
    _fn("lend", "Lend a book.", {"book_id": _S, "reader_id": _S}, ["book_id", "reader_id"]),
    _fn("give_back", "A book comes back.", {"book_id": _S}, ["book_id"]),
]


def reading_room_state(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    readers = {f"R{k}": {"name": f"reader {k}", "loans": 0} for k in range(3)}
    books = {}
    for k in range(6):
        lent = rng.choice([None, None, *readers])
        books[f"B{seed}{k}"] = {"title": f"book {k}", "lent_to": lent}
        if lent:
            readers[lent]["loans"] += 1
    return {"books": books, "readers": readers}


def garage_corpus(scenarios: int = 10) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The garage alone (its refusals, ``DENIED: ...`` texts, are declared in :func:`garage_rule`)."""
    items = {"garage": env_item("Garage", GARAGE_CODE, GARAGE_TOOLS)}
    rows = [
        {
            "task_id": f"garage-{k}",
            "env_id": "garage",
            "env_class_name": "Garage",
            "init_config": garage_state(k),
            "task": "Run the garage.",
        }
        for k in range(scenarios)
    ]
    return items, rows


#: the garage's refusal convention, as a corpus declares it
GARAGE_RULE = {"failure_if": [{"text_starts_with": "DENIED"}], "extends_default": True}


def reading_room_corpus(scenarios: int = 10) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The reading room (refusals ``{'result': 'refused', ...}``, undeclared) beside an environment whose
    refusals the default rule knows (the shop's ``{"success": False, ...}``)."""
    items = {
        "reading_room": env_item("ReadingRoom", READING_ROOM_CODE, READING_ROOM_TOOLS),
        "shop": env_item("ShopDesk", SHOP_CODE, SHOP_TOOLS),
    }
    rows = [
        {
            "task_id": f"reading-{k}",
            "env_id": "reading_room",
            "env_class_name": "ReadingRoom",
            "init_config": reading_room_state(k),
            "task": "Lend books.",
        }
        for k in range(scenarios)
    ] + [
        {
            "task_id": f"shop-{k}",
            "env_id": "shop",
            "env_class_name": "ShopDesk",
            "init_config": shop_state(k, n_users=2),
            "task": "Help the customer.",
        }
        for k in range(scenarios)
    ]
    return items, rows


def desk_corpus(shop_scenarios: int = 30, garage_scenarios: int = 10) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The shop and the garage in one corpus file (its outcome rule: :data:`GARAGE_RULE`, which extends the
    default rule that knows the shop's refusals): 2 environments, many scenarios."""
    shop_items, shop_rows = shop_corpus(shop_scenarios)
    garage_items, garage_rows = garage_corpus(garage_scenarios)
    return {**shop_items, **garage_items}, shop_rows + garage_rows
