"""Warehouse: SKUs in bins, receiving, picking and transfers."""


class Warehouse:
    """A warehouse management system with bin capacities, reservations and shipment records."""

    def __init__(self, config=None):
        config = config or {}
        self.items = config.get("items", {})
        self.bins = config.get("bins", {})
        self.shipments = config.get("shipments", {})
        self.shipment_counter = config.get("shipment_counter", 0)

    def _fail(self, message):
        return {"success": False, "error": message}

    def _record(self, kind, lines):
        self.shipment_counter += 1
        ref = f"{kind[:2].upper()}{self.shipment_counter:05d}"
        self.shipments[ref] = {"kind": kind, "lines": lines}
        return ref

    def inventory_report(self):
        """Quantities, reservations and locations of every SKU."""
        return {"success": True, "data": self.items}

    def get_item(self, sku: str):
        """Get one SKU.

        Args:
            sku (str): The SKU code.
        """
        if sku not in self.items:
            return self._fail(f"SKU {sku} not found")
        return {"success": True, "data": self.items[sku]}

    def get_bin(self, bin_id: str):
        """Get a bin's capacity and usage.

        Args:
            bin_id (str): The bin id.
        """
        if bin_id not in self.bins:
            return self._fail(f"Bin {bin_id} not found")
        return {"success": True, "data": self.bins[bin_id]}

    def receive(self, skus: list, quantity: int):
        """Receive the same quantity of several SKUs into their bins and record the receipt.

        Args:
            skus (list): SKUs received.
            quantity (int): Units per SKU (1-200).
        """
        if not isinstance(quantity, int) or not 1 <= quantity <= 200:
            return self._fail("quantity must be between 1 and 200")
        if not skus or len(set(skus)) != len(skus):
            return self._fail("skus must be a non-empty list without duplicates")
        for sku in skus:
            if sku not in self.items:
                return self._fail(f"SKU {sku} not found")
            b = self.bins[self.items[sku]["bin"]]
            if b["used"] + quantity > b["capacity"]:
                return self._fail(f"Bin {self.items[sku]['bin']} cannot take {quantity} more units")
        for sku in skus:
            self.items[sku]["qty"] += quantity
            self.bins[self.items[sku]["bin"]]["used"] += quantity
        ref = self._record("receipt", {s: quantity for s in skus})
        return {"success": True, "data": {"receipt": ref}}

    def reserve(self, sku: str, quantity: int):
        """Reserve units of a SKU for an upcoming order.

        Args:
            sku (str): The SKU code.
            quantity (int): Units to reserve.
        """
        item = self.items.get(sku)
        if item is None:
            return self._fail(f"SKU {sku} not found")
        if not isinstance(quantity, int) or quantity < 1 or item["qty"] - item["reserved"] < quantity:
            return self._fail(f"Only {item['qty'] - item['reserved']} units of {sku} available")
        item["reserved"] += quantity
        return {"success": True, "data": item}

    def pick_order(self, skus: list):
        """Pick one unit of each SKU for an outbound order: quantity and bin usage go down, the
        shipment is recorded.

        Args:
            skus (list): SKUs to pick, one unit each.
        """
        if not skus or len(set(skus)) != len(skus):
            return self._fail("skus must be a non-empty list without duplicates")
        for sku in skus:
            if sku not in self.items:
                return self._fail(f"SKU {sku} not found")
            if self.items[sku]["qty"] < 1:
                return self._fail(f"SKU {sku} is out of stock")
        for sku in skus:
            item = self.items[sku]
            item["qty"] -= 1
            item["reserved"] = max(0, item["reserved"] - 1)
            self.bins[item["bin"]]["used"] -= 1
        ref = self._record("shipment", {s: 1 for s in skus})
        return {"success": True, "data": {"shipment": ref}}

    def move_item(self, sku: str, bin_id: str):
        """Move all units of a SKU to another bin.

        Args:
            sku (str): The SKU code.
            bin_id (str): Destination bin.
        """
        item = self.items.get(sku)
        if item is None:
            return self._fail(f"SKU {sku} not found")
        dest = self.bins.get(bin_id)
        if dest is None:
            return self._fail(f"Bin {bin_id} not found")
        if item["bin"] == bin_id:
            return self._fail(f"SKU {sku} is already in {bin_id}")
        if dest["used"] + item["qty"] > dest["capacity"]:
            return self._fail(f"Bin {bin_id} lacks room for {item['qty']} units")
        self.bins[item["bin"]]["used"] -= item["qty"]
        dest["used"] += item["qty"]
        item["bin"] = bin_id
        item["moves"] += 1
        return {"success": True, "data": item}

    def adjust_stock(self, sku: str, qty: int):
        """Correct a SKU's counted quantity after a cycle count.

        Args:
            sku (str): The SKU code.
            qty (int): The counted quantity (>= reserved).
        """
        item = self.items.get(sku)
        if item is None:
            return self._fail(f"SKU {sku} not found")
        if not isinstance(qty, int) or qty < item["reserved"]:
            return self._fail(f"Counted quantity cannot be below the {item['reserved']} reserved units")
        self.bins[item["bin"]]["used"] += qty - item["qty"]
        item["qty"] = qty
        return {"success": True, "data": item}

    def decommission_bin(self, bin_id: str, target_bin: str):
        """Empty a bin into another one and close it: every SKU in it moves.

        Args:
            bin_id (str): Bin to close.
            target_bin (str): Bin receiving its SKUs.
        """
        src, dest = self.bins.get(bin_id), self.bins.get(target_bin)
        if src is None or dest is None or bin_id == target_bin:
            return self._fail("Two different existing bins are required")
        if not src["open"]:
            return self._fail(f"Bin {bin_id} is already closed")
        if dest["used"] + src["used"] > dest["capacity"]:
            return self._fail(f"Bin {target_bin} cannot hold {src['used']} more units")
        for item in self.items.values():
            if item["bin"] == bin_id:
                item["bin"] = target_bin
                item["moves"] += 1
        dest["used"] += src["used"]
        src["used"] = 0
        src["open"] = False
        return {"success": True, "data": {"closed": bin_id}}
