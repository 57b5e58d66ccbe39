"""Hotel: rooms, guests, reservations, check-in/out, housekeeping and loyalty."""


class HotelFrontDesk:
    """A hotel property-management system."""

    def __init__(self, config=None):
        config = config or {}
        self.rooms = config.get("rooms", {})
        self.guests = config.get("guests", {})
        self.reservations = config.get("reservations", {})
        self.reservation_counter = config.get("reservation_counter", 0)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_rooms(self):
        """List rooms with type, rate and status."""
        return {"success": True, "data": self.rooms}

    def get_room(self, room_id: str):
        """Get one room.

        Args:
            room_id (str): The room number.
        """
        if room_id not in self.rooms:
            return self._fail(f"Room {room_id} not found")
        return {"success": True, "data": self.rooms[room_id]}

    def get_guest(self, guest_id: str):
        """Get a guest profile.

        Args:
            guest_id (str): The guest id.
        """
        if guest_id not in self.guests:
            return self._fail(f"Guest {guest_id} not found")
        return {"success": True, "data": self.guests[guest_id]}

    def reserve_rooms(self, guest_id: str, room_ids: list, nights: int):
        """Reserve several vacant rooms for a guest; each room is held and gets its own reservation,
        the stay is charged to the guest's folio.

        Args:
            guest_id (str): The guest id.
            room_ids (list): Rooms to reserve.
            nights (int): Number of nights (1-14).
        """
        guest = self.guests.get(guest_id)
        if guest is None:
            return self._fail(f"Guest {guest_id} not found")
        if not isinstance(nights, int) or not 1 <= nights <= 14:
            return self._fail("nights must be between 1 and 14")
        if not room_ids or len(set(room_ids)) != len(room_ids):
            return self._fail("room_ids must be a non-empty list without duplicates")
        for rid in room_ids:
            room = self.rooms.get(rid)
            if room is None:
                return self._fail(f"Room {rid} not found")
            if room["status"] != "vacant":
                return self._fail(f"Room {rid} is {room['status']}")
        refs = []
        for rid in room_ids:
            self.rooms[rid]["status"] = "held"
            self.reservation_counter += 1
            ref = f"R{self.reservation_counter:04d}"
            self.reservations[ref] = {"guest_id": guest_id, "room_id": rid, "nights": nights, "status": "reserved"}
            refs.append(ref)
        guest["folio"] = round(guest["folio"] + sum(self.rooms[r]["rate"] for r in room_ids) * nights, 2)
        return {"success": True, "data": {"reservations": refs}}

    def check_in(self, reservation_id: str):
        """Check a reservation in: the room becomes occupied by the guest.

        Args:
            reservation_id (str): The reservation id.
        """
        res = self.reservations.get(reservation_id)
        if res is None:
            return self._fail(f"Reservation {reservation_id} not found")
        if res["status"] != "reserved":
            return self._fail(f"Reservation {reservation_id} is {res['status']}")
        room, guest = self.rooms[res["room_id"]], self.guests[res["guest_id"]]
        room["status"] = "occupied"
        room["guest_id"] = res["guest_id"]
        res["status"] = "checked_in"
        guest["stays"] += 1
        return {"success": True, "data": res}

    def check_out(self, reservation_id: str):
        """Check out: the folio is settled from the guest's card, loyalty points are earned and the
        room goes to housekeeping.

        Args:
            reservation_id (str): The reservation id.
        """
        res = self.reservations.get(reservation_id)
        if res is None:
            return self._fail(f"Reservation {reservation_id} not found")
        if res["status"] != "checked_in":
            return self._fail(f"Reservation {reservation_id} is {res['status']}")
        room, guest = self.rooms[res["room_id"]], self.guests[res["guest_id"]]
        amount = room["rate"] * res["nights"]
        guest["points"] += int(amount // 10)
        guest["folio"] = round(max(0, guest["folio"] - amount), 2)
        guest["lifetime_spend"] = round(guest["lifetime_spend"] + amount, 2)
        room["status"] = "dirty"
        room["guest_id"] = None
        res["status"] = "checked_out"
        return {"success": True, "data": {"charged": amount}}

    def cancel_reservation(self, reservation_id: str):
        """Cancel a reservation that has not checked in; the room is released and the folio credited.

        Args:
            reservation_id (str): The reservation id.
        """
        res = self.reservations.get(reservation_id)
        if res is None:
            return self._fail(f"Reservation {reservation_id} not found")
        if res["status"] != "reserved":
            return self._fail(f"Reservation {reservation_id} is {res['status']}")
        room, guest = self.rooms[res["room_id"]], self.guests[res["guest_id"]]
        room["status"] = "vacant"
        guest["folio"] = round(max(0, guest["folio"] - room["rate"] * res["nights"]), 2)
        res["status"] = "cancelled"
        return {"success": True, "data": res}

    def clean_rooms(self, room_ids: list):
        """Housekeeping: dirty rooms become vacant and their cleaning count goes up.

        Args:
            room_ids (list): Rooms cleaned.
        """
        if not room_ids:
            return self._fail("No rooms given")
        for rid in room_ids:
            if rid not in self.rooms:
                return self._fail(f"Room {rid} not found")
            if self.rooms[rid]["status"] != "dirty":
                return self._fail(f"Room {rid} is {self.rooms[rid]['status']}, not dirty")
        for rid in set(room_ids):
            self.rooms[rid]["status"] = "vacant"
            self.rooms[rid]["cleanings"] += 1
        return {"success": True, "data": {"cleaned": sorted(set(room_ids))}}

    def set_rate(self, room_id: str, rate: float):
        """Set a room's nightly rate.

        Args:
            room_id (str): The room number.
            rate (float): New rate (20-2000).
        """
        if room_id not in self.rooms:
            return self._fail(f"Room {room_id} not found")
        if not isinstance(rate, (int, float)) or not 20 <= rate <= 2000:
            return self._fail("rate must be between 20 and 2000")
        self.rooms[room_id]["rate"] = rate
        return {"success": True, "data": self.rooms[room_id]}

    def redeem_points(self, guest_id: str, points: int):
        """Redeem loyalty points against the folio (10 points = 1).

        Args:
            guest_id (str): The guest id.
            points (int): Points to redeem, a positive multiple of 10.
        """
        guest = self.guests.get(guest_id)
        if guest is None:
            return self._fail(f"Guest {guest_id} not found")
        if not isinstance(points, int) or points <= 0 or points % 10 or points > guest["points"]:
            return self._fail(f"points must be a positive multiple of 10, at most {guest['points']}")
        guest["points"] -= points
        guest["folio"] = round(max(0, guest["folio"] - points // 10), 2)
        return {"success": True, "data": guest}

    def upgrade_room(self, reservation_id: str, new_room_id: str):
        """Move a reservation that has not checked in to a vacant room with a higher rate; the folio
        is charged the difference.

        Args:
            reservation_id (str): The reservation id.
            new_room_id (str): The vacant room to move to.
        """
        res = self.reservations.get(reservation_id)
        if res is None or res["status"] != "reserved":
            return self._fail(f"Reservation {reservation_id} is not an open reservation")
        new = self.rooms.get(new_room_id)
        if new is None or new["status"] != "vacant":
            return self._fail(f"Room {new_room_id} is not vacant")
        old = self.rooms[res["room_id"]]
        if new["rate"] <= old["rate"]:
            return self._fail(f"Room {new_room_id} is not an upgrade over {res['room_id']}")
        guest = self.guests[res["guest_id"]]
        old["status"] = "vacant"
        new["status"] = "held"
        guest["folio"] = round(guest["folio"] + (new["rate"] - old["rate"]) * res["nights"], 2)
        res["room_id"] = new_room_id
        res["upgraded"] = True
        return {"success": True, "data": res}

    def extend_stay(self, reservation_id: str, nights: int):
        """Add nights to a reservation; the folio is charged.

        Args:
            reservation_id (str): The reservation id.
            nights (int): Extra nights (1-7).
        """
        res = self.reservations.get(reservation_id)
        if res is None or res["status"] not in ("reserved", "checked_in"):
            return self._fail(f"Reservation {reservation_id} cannot be extended")
        if not isinstance(nights, int) or not 1 <= nights <= 7:
            return self._fail("nights must be between 1 and 7")
        res["nights"] += nights
        guest = self.guests[res["guest_id"]]
        guest["folio"] = round(guest["folio"] + self.rooms[res["room_id"]]["rate"] * nights, 2)
        return {"success": True, "data": res}
