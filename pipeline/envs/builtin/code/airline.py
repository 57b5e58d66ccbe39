"""Airline: flights, passengers, bookings, rebooking and disruption handling."""


class AirlineBooking:
    """An airline reservation system with seat inventory, travel credit and frequent-flyer miles."""

    def __init__(self, config=None):
        config = config or {}
        self.flights = config.get("flights", {})
        self.passengers = config.get("passengers", {})
        self.bookings = config.get("bookings", {})
        self.booking_counter = config.get("booking_counter", 0)
        self.change_fee = config.get("change_fee", 50)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_flights(self):
        """List all flights with route, status and free seats."""
        return {"success": True, "data": self.flights}

    def get_flight(self, flight_id: str):
        """Get one flight.

        Args:
            flight_id (str): The flight number.
        """
        if flight_id not in self.flights:
            return self._fail(f"Flight {flight_id} not found")
        return {"success": True, "data": self.flights[flight_id]}

    def get_booking(self, booking_id: str):
        """Get one booking.

        Args:
            booking_id (str): The booking reference.
        """
        if booking_id not in self.bookings:
            return self._fail(f"Booking {booking_id} not found")
        return {"success": True, "data": self.bookings[booking_id]}

    def _book(self, passenger_id, flight_id, seats):
        flight, passenger = self.flights[flight_id], self.passengers[passenger_id]
        cost = flight["price"] * seats
        if passenger["credit"] < cost:
            return None, self._fail(f"Passenger {passenger_id} has {passenger['credit']} credit, needs {cost}")
        self.booking_counter += 1
        booking_id = f"BK{self.booking_counter:04d}"
        flight["seats_available"] -= seats
        passenger["credit"] -= cost
        passenger["miles"] += flight["distance"] * seats
        self.bookings[booking_id] = {"passenger_id": passenger_id, "flight_id": flight_id, "seats": seats,
                                     "status": "confirmed", "changes": 0, "paid": cost}
        return booking_id, None

    def book_flight(self, passenger_id: str, flight_id: str, seats: int = 1):
        """Book seats on a flight, paid from travel credit; earns miles.

        Args:
            passenger_id (str): The passenger id.
            flight_id (str): The flight number.
            seats (int): Number of seats (1-4).
        """
        if passenger_id not in self.passengers:
            return self._fail(f"Passenger {passenger_id} not found")
        flight = self.flights.get(flight_id)
        if flight is None:
            return self._fail(f"Flight {flight_id} not found")
        if flight["status"] != "scheduled":
            return self._fail(f"Flight {flight_id} is {flight['status']}")
        if not isinstance(seats, int) or not 1 <= seats <= 4:
            return self._fail("seats must be between 1 and 4")
        if flight["seats_available"] < seats:
            return self._fail(f"Only {flight['seats_available']} seats left on {flight_id}")
        booking_id, error = self._book(passenger_id, flight_id, seats)
        return error or {"success": True, "data": {"booking_id": booking_id}}

    def group_booking(self, flight_id: str, passenger_ids: list):
        """Book one seat for each passenger of a group on the same flight.

        Args:
            flight_id (str): The flight number.
            passenger_ids (list): Passenger ids of the group.
        """
        flight = self.flights.get(flight_id)
        if flight is None:
            return self._fail(f"Flight {flight_id} not found")
        if flight["status"] != "scheduled":
            return self._fail(f"Flight {flight_id} is {flight['status']}")
        if not passenger_ids or len(set(passenger_ids)) != len(passenger_ids):
            return self._fail("passenger_ids must be a non-empty list without duplicates")
        unknown = [p for p in passenger_ids if p not in self.passengers]
        if unknown:
            return self._fail(f"Unknown passengers: {unknown}")
        if flight["seats_available"] < len(passenger_ids):
            return self._fail(f"Only {flight['seats_available']} seats left on {flight_id}")
        poor = [p for p in passenger_ids if self.passengers[p]["credit"] < flight["price"]]
        if poor:
            return self._fail(f"Insufficient credit for {poor}")
        refs = [self._book(p, flight_id, 1)[0] for p in passenger_ids]
        return {"success": True, "data": {"bookings": refs}}

    def rebook(self, booking_id: str, new_flight_id: str):
        """Move a booking to another flight with the same origin, charging the change fee.

        Args:
            booking_id (str): The booking reference.
            new_flight_id (str): The flight to move to.
        """
        booking = self.bookings.get(booking_id)
        if booking is None:
            return self._fail(f"Booking {booking_id} not found")
        if booking["status"] != "confirmed":
            return self._fail(f"Booking {booking_id} is {booking['status']}")
        new = self.flights.get(new_flight_id)
        if new is None:
            return self._fail(f"Flight {new_flight_id} not found")
        old = self.flights[booking["flight_id"]]
        if new_flight_id == booking["flight_id"]:
            return self._fail("The booking is already on that flight")
        if new["origin"] != old["origin"] or new["status"] != "scheduled":
            return self._fail(f"Flight {new_flight_id} is not a valid alternative (origin/status)")
        if new["seats_available"] < booking["seats"]:
            return self._fail(f"Not enough seats on {new_flight_id}")
        passenger = self.passengers[booking["passenger_id"]]
        if passenger["credit"] < self.change_fee:
            return self._fail("Insufficient credit for the change fee")
        old["seats_available"] += booking["seats"]
        new["seats_available"] -= booking["seats"]
        booking["flight_id"] = new_flight_id
        booking["changes"] += 1
        passenger["credit"] -= self.change_fee
        return {"success": True, "data": booking}

    def cancel_booking(self, booking_id: str):
        """Cancel a booking, releasing seats and refunding credit (miles are taken back).

        Args:
            booking_id (str): The booking reference.
        """
        booking = self.bookings.get(booking_id)
        if booking is None:
            return self._fail(f"Booking {booking_id} not found")
        if booking["status"] != "confirmed":
            return self._fail(f"Booking {booking_id} is already {booking['status']}")
        flight, passenger = self.flights[booking["flight_id"]], self.passengers[booking["passenger_id"]]
        flight["seats_available"] += booking["seats"]
        passenger["credit"] += booking["paid"]
        passenger["miles"] = max(0, passenger["miles"] - flight["distance"] * booking["seats"])
        booking["status"] = "cancelled"
        return {"success": True, "data": {"refund": booking["paid"]}}

    def cancel_flight(self, flight_id: str):
        """Cancel a flight: every confirmed booking on it is cancelled and refunded.

        Args:
            flight_id (str): The flight number.
        """
        flight = self.flights.get(flight_id)
        if flight is None:
            return self._fail(f"Flight {flight_id} not found")
        if flight["status"] == "cancelled":
            return self._fail(f"Flight {flight_id} is already cancelled")
        flight["status"] = "cancelled"
        affected = [b for b, rec in self.bookings.items() if rec["flight_id"] == flight_id and rec["status"] == "confirmed"]
        for ref in affected:
            rec = self.bookings[ref]
            rec["status"] = "cancelled_by_airline"
            self.passengers[rec["passenger_id"]]["credit"] += rec["paid"]
        return {"success": True, "data": {"cancelled_bookings": affected}}

    def update_flight_status(self, flight_id: str, status: str):
        """Set a flight's operational status.

        Args:
            flight_id (str): The flight number.
            status (str): One of scheduled, delayed, boarding, departed.
        """
        if flight_id not in self.flights:
            return self._fail(f"Flight {flight_id} not found")
        if status not in ("scheduled", "delayed", "boarding", "departed"):
            return self._fail(f"Invalid status {status!r}")
        self.flights[flight_id]["status"] = status
        return {"success": True, "data": self.flights[flight_id]}

    def transfer_booking(self, booking_id: str, new_passenger_id: str):
        """Transfer a booking to another passenger: the new passenger pays and earns the miles, the
        original passenger is refunded and loses them.

        Args:
            booking_id (str): The booking reference.
            new_passenger_id (str): The passenger taking over the booking.
        """
        booking = self.bookings.get(booking_id)
        if booking is None:
            return self._fail(f"Booking {booking_id} not found")
        if booking["status"] != "confirmed":
            return self._fail(f"Booking {booking_id} is {booking['status']}")
        if new_passenger_id not in self.passengers:
            return self._fail(f"Passenger {new_passenger_id} not found")
        if new_passenger_id == booking["passenger_id"]:
            return self._fail("The booking already belongs to that passenger")
        new, old = self.passengers[new_passenger_id], self.passengers[booking["passenger_id"]]
        if new["credit"] < booking["paid"]:
            return self._fail(f"Passenger {new_passenger_id} cannot pay {booking['paid']}")
        earned = self.flights[booking["flight_id"]]["distance"] * booking["seats"]
        old["credit"] += booking["paid"]
        old["miles"] = max(0, old["miles"] - earned)
        new["credit"] -= booking["paid"]
        new["miles"] += earned
        booking["passenger_id"] = new_passenger_id
        booking["changes"] += 1
        return {"success": True, "data": booking}

    def redeem_miles(self, passenger_id: str, miles: int):
        """Convert miles into travel credit (100 miles = 1 credit).

        Args:
            passenger_id (str): The passenger id.
            miles (int): Miles to redeem, a positive multiple of 100.
        """
        passenger = self.passengers.get(passenger_id)
        if passenger is None:
            return self._fail(f"Passenger {passenger_id} not found")
        if not isinstance(miles, int) or miles <= 0 or miles % 100:
            return self._fail("miles must be a positive multiple of 100")
        if passenger["miles"] < miles:
            return self._fail(f"Passenger {passenger_id} has only {passenger['miles']} miles")
        passenger["miles"] -= miles
        passenger["credit"] += miles // 100
        return {"success": True, "data": passenger}
