"""Retail store: catalog, carts, wallets, loyalty and orders."""


class RetailStore:
    """An online store. Customers fill carts and check out, paying from a wallet and earning
    loyalty points; stock is tracked per product."""

    def __init__(self, config=None):
        config = config or {}
        self.products = config.get("products", {})
        self.customers = config.get("customers", {})
        self.carts = config.get("carts", {})
        self.orders = config.get("orders", {})
        self.order_counter = config.get("order_counter", 0)
        self.points_per_dollar = config.get("points_per_dollar", 1)

    def _fail(self, message):
        return {"success": False, "error": message}

    def _new_order_id(self):
        self.order_counter += 1
        return f"O{self.order_counter:04d}"

    def list_products(self):
        """List every product with its price and stock."""
        return {"success": True, "data": {pid: {"name": p["name"], "price": p["price"], "stock": p["stock"]}
                                          for pid, p in self.products.items()}}

    def get_product(self, product_id: str):
        """Get one product.

        Args:
            product_id (str): The product id.
        """
        if product_id not in self.products:
            return self._fail(f"Product {product_id} not found")
        return {"success": True, "data": self.products[product_id]}

    def get_customer(self, customer_id: str):
        """Get a customer's wallet, loyalty points and order history.

        Args:
            customer_id (str): The customer id.
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        return {"success": True, "data": self.customers[customer_id]}

    def view_cart(self, customer_id: str):
        """Show the customer's cart.

        Args:
            customer_id (str): The customer id.
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        return {"success": True, "data": self.carts.get(customer_id, {})}

    def add_to_cart(self, customer_id: str, product_id: str, quantity: int = 1):
        """Add a quantity of a product to the customer's cart.

        Args:
            customer_id (str): The customer id.
            product_id (str): The product to add.
            quantity (int): How many units (1-10).
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        if product_id not in self.products:
            return self._fail(f"Product {product_id} not found")
        if not isinstance(quantity, int) or quantity < 1 or quantity > 10:
            return self._fail("Quantity must be an integer between 1 and 10")
        cart = self.carts.setdefault(customer_id, {})
        if cart.get(product_id, 0) + quantity > self.products[product_id]["stock"]:
            return self._fail(f"Only {self.products[product_id]['stock']} units of {product_id} in stock")
        cart[product_id] = cart.get(product_id, 0) + quantity
        return {"success": True, "data": {"cart": cart}}

    def remove_from_cart(self, customer_id: str, product_id: str):
        """Remove a product line from the cart.

        Args:
            customer_id (str): The customer id.
            product_id (str): The product to remove.
        """
        cart = self.carts.get(customer_id)
        if not cart or product_id not in cart:
            return self._fail(f"Product {product_id} is not in the cart of {customer_id}")
        del cart[product_id]
        return {"success": True, "data": {"cart": cart}}

    def update_price(self, product_id: str, price: float):
        """Change a product's price.

        Args:
            product_id (str): The product id.
            price (float): New price, greater than 0.
        """
        if product_id not in self.products:
            return self._fail(f"Product {product_id} not found")
        if not isinstance(price, (int, float)) or price <= 0:
            return self._fail("Price must be positive")
        self.products[product_id]["price"] = round(float(price), 2)
        return {"success": True, "data": self.products[product_id]}

    def restock(self, product_id: str, quantity: int):
        """Add units to a product's stock.

        Args:
            product_id (str): The product id.
            quantity (int): Units received (1-500).
        """
        if product_id not in self.products:
            return self._fail(f"Product {product_id} not found")
        if not isinstance(quantity, int) or not 0 < quantity <= 500:
            return self._fail("Quantity must be between 1 and 500")
        self.products[product_id]["stock"] += quantity
        return {"success": True, "data": self.products[product_id]}

    def top_up_wallet(self, customer_id: str, amount: float):
        """Add money to a customer's wallet.

        Args:
            customer_id (str): The customer id.
            amount (float): Amount to add (0-1000].
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        if not isinstance(amount, (int, float)) or not 0 < amount <= 1000:
            return self._fail("Top-up amount must be in (0, 1000]")
        self.customers[customer_id]["wallet"] = round(self.customers[customer_id]["wallet"] + amount, 2)
        return {"success": True, "data": {"wallet": self.customers[customer_id]["wallet"]}}

    def _charge(self, customer_id, lines):
        customer = self.customers[customer_id]
        total = round(sum(self.products[pid]["price"] * qty for pid, qty in lines.items()), 2)
        if total > customer["wallet"]:
            return None, self._fail(f"Insufficient wallet balance: total {total}, wallet {customer['wallet']}")
        for pid, qty in lines.items():
            self.products[pid]["stock"] -= qty
            self.products[pid]["sold"] = self.products[pid].get("sold", 0) + qty
        order_id = self._new_order_id()
        self.orders[order_id] = {"customer_id": customer_id, "lines": dict(lines), "total": total, "status": "paid"}
        customer["wallet"] = round(customer["wallet"] - total, 2)
        customer["loyalty_points"] += int(total * self.points_per_dollar)
        customer["orders"] = customer["orders"] + [order_id]
        return order_id, None

    def checkout(self, customer_id: str):
        """Pay for the whole cart: updates stock and sales per product, creates the order, charges the
        wallet, awards loyalty points and empties the cart.

        Args:
            customer_id (str): The customer id.
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        cart = self.carts.get(customer_id) or {}
        if not cart:
            return self._fail("Cart is empty")
        for pid, qty in cart.items():
            if self.products[pid]["stock"] < qty:
                return self._fail(f"Not enough stock for {pid}")
        order_id, error = self._charge(customer_id, cart)
        if error:
            return error
        self.carts[customer_id] = {}
        return {"success": True, "data": {"order_id": order_id, "total": self.orders[order_id]["total"]}}

    def quick_buy(self, customer_id: str, product_ids: list):
        """Buy one unit of each listed product immediately, without using the cart.

        Args:
            customer_id (str): The customer id.
            product_ids (list): Products to buy, one unit each.
        """
        if customer_id not in self.customers:
            return self._fail(f"Customer {customer_id} not found")
        if not product_ids or len(set(product_ids)) != len(product_ids):
            return self._fail("product_ids must be a non-empty list without duplicates")
        for pid in product_ids:
            if pid not in self.products:
                return self._fail(f"Product {pid} not found")
            if self.products[pid]["stock"] < 1:
                return self._fail(f"{pid} is out of stock")
        order_id, error = self._charge(customer_id, {pid: 1 for pid in product_ids})
        if error:
            return error
        return {"success": True, "data": {"order_id": order_id, "total": self.orders[order_id]["total"]}}

    def return_order(self, order_id: str):
        """Return a paid order: restocks every line, refunds the wallet and removes the points.

        Args:
            order_id (str): The order id.
        """
        order = self.orders.get(order_id)
        if order is None:
            return self._fail(f"Order {order_id} not found")
        if order["status"] != "paid":
            return self._fail(f"Order {order_id} is {order['status']} and cannot be returned")
        for pid, qty in order["lines"].items():
            self.products[pid]["stock"] += qty
        customer = self.customers[order["customer_id"]]
        customer["wallet"] = round(customer["wallet"] + order["total"], 2)
        customer["loyalty_points"] = max(0, customer["loyalty_points"] - int(order["total"] * self.points_per_dollar))
        order["status"] = "returned"
        return {"success": True, "data": {"refunded": order["total"]}}

    def redeem_points(self, customer_id: str, points: int):
        """Turn loyalty points into wallet credit (20 points = 1.00).

        Args:
            customer_id (str): The customer id.
            points (int): Points to redeem, positive.
        """
        customer = self.customers.get(customer_id)
        if customer is None:
            return self._fail(f"Customer {customer_id} not found")
        if not isinstance(points, int) or points <= 0:
            return self._fail("points must be a positive integer")
        if points > customer["loyalty_points"]:
            return self._fail(f"Customer {customer_id} has only {customer['loyalty_points']} points")
        customer["loyalty_points"] -= points
        customer["wallet"] = round(customer["wallet"] + points / 20, 2)
        return {"success": True, "data": customer}

    def upgrade_tier(self, customer_id: str):
        """Upgrade a customer to the next tier for 200 points; the upgrade comes with a 10.00 wallet bonus.

        Args:
            customer_id (str): The customer id.
        """
        customer = self.customers.get(customer_id)
        if customer is None:
            return self._fail(f"Customer {customer_id} not found")
        order = ["basic", "silver", "gold"]
        if customer["tier"] == "gold":
            return self._fail("Customer is already gold")
        if customer["loyalty_points"] < 200:
            return self._fail(f"Upgrading needs 200 points, customer has {customer['loyalty_points']}")
        customer["tier"] = order[order.index(customer["tier"]) + 1]
        customer["loyalty_points"] -= 200
        customer["wallet"] = round(customer["wallet"] + 10, 2)
        return {"success": True, "data": customer}
