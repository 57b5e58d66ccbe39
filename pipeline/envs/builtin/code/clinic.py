"""Clinic: doctors' slots, patients, appointments, procedures and supplies."""


class ClinicScheduler:
    """A clinic front desk: books appointments into doctors' free slots, records visits with their
    procedures (consuming supplies and billing the patient)."""

    def __init__(self, config=None):
        config = config or {}
        self.doctors = config.get("doctors", {})
        self.patients = config.get("patients", {})
        self.appointments = config.get("appointments", {})
        self.supplies = config.get("supplies", {})
        self.procedures = config.get("procedures", {})
        self.appointment_counter = config.get("appointment_counter", 0)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_doctors(self):
        """List doctors with their specialty and free slots."""
        return {"success": True, "data": self.doctors}

    def list_procedures(self):
        """List billable procedures and the supplies each uses."""
        return {"success": True, "data": self.procedures}

    def get_patient(self, patient_id: str):
        """Get a patient's record.

        Args:
            patient_id (str): The patient id.
        """
        if patient_id not in self.patients:
            return self._fail(f"Patient {patient_id} not found")
        return {"success": True, "data": self.patients[patient_id]}

    def get_appointment(self, appointment_id: str):
        """Get an appointment.

        Args:
            appointment_id (str): The appointment id.
        """
        if appointment_id not in self.appointments:
            return self._fail(f"Appointment {appointment_id} not found")
        return {"success": True, "data": self.appointments[appointment_id]}

    def book_appointment(self, patient_id: str, doctor_id: str, slot: str):
        """Book a free slot of a doctor for a patient (the booking fee is billed).

        Args:
            patient_id (str): The patient id.
            doctor_id (str): The doctor id.
            slot (str): One of the doctor's free slots, e.g. "09:00".
        """
        patient, doctor = self.patients.get(patient_id), self.doctors.get(doctor_id)
        if patient is None:
            return self._fail(f"Patient {patient_id} not found")
        if doctor is None:
            return self._fail(f"Doctor {doctor_id} not found")
        if slot not in doctor["free_slots"]:
            return self._fail(f"Slot {slot} is not free for {doctor_id}; free: {doctor['free_slots']}")
        if patient["balance"] > patient["credit_limit"]:
            return self._fail(f"Patient {patient_id} has an unpaid balance of {patient['balance']}")
        self.appointment_counter += 1
        appointment_id = f"A{self.appointment_counter:04d}"
        doctor["free_slots"] = [s for s in doctor["free_slots"] if s != slot]
        doctor["booked"] += 1
        patient["balance"] += doctor["fee"]
        self.appointments[appointment_id] = {"patient_id": patient_id, "doctor_id": doctor_id, "slot": slot,
                                             "status": "booked", "procedures": []}
        return {"success": True, "data": {"appointment_id": appointment_id}}

    def cancel_appointment(self, appointment_id: str):
        """Cancel a booked appointment: frees the slot and refunds the fee.

        Args:
            appointment_id (str): The appointment id.
        """
        appt = self.appointments.get(appointment_id)
        if appt is None:
            return self._fail(f"Appointment {appointment_id} not found")
        if appt["status"] != "booked":
            return self._fail(f"Appointment {appointment_id} is {appt['status']}")
        doctor, patient = self.doctors[appt["doctor_id"]], self.patients[appt["patient_id"]]
        doctor["free_slots"] = sorted(doctor["free_slots"] + [appt["slot"]])
        doctor["booked"] -= 1
        patient["balance"] -= doctor["fee"]
        appt["status"] = "cancelled"
        return {"success": True, "data": appt}

    def complete_visit(self, appointment_id: str, procedure_ids: list):
        """Record a visit with the procedures performed: each procedure consumes its supply and is
        billed; the patient's visit count and the doctor's completed count go up.

        Args:
            appointment_id (str): The appointment id.
            procedure_ids (list): Procedures performed during the visit.
        """
        appt = self.appointments.get(appointment_id)
        if appt is None:
            return self._fail(f"Appointment {appointment_id} not found")
        if appt["status"] != "booked":
            return self._fail(f"Appointment {appointment_id} is {appt['status']}")
        if len(set(procedure_ids)) != len(procedure_ids):
            return self._fail("Duplicate procedures")
        for proc in procedure_ids:
            if proc not in self.procedures:
                return self._fail(f"Unknown procedure {proc}")
            if self.supplies[self.procedures[proc]["supply"]] < 1:
                return self._fail(f"Out of supply {self.procedures[proc]['supply']} for {proc}")
        patient, doctor = self.patients[appt["patient_id"]], self.doctors[appt["doctor_id"]]
        for proc in procedure_ids:
            self.supplies[self.procedures[proc]["supply"]] -= 1
        patient["balance"] += sum(self.procedures[p]["price"] for p in procedure_ids)
        patient["visits"] += 1
        doctor["completed"] += 1
        appt["status"] = "completed"
        appt["procedures"] = list(procedure_ids)
        return {"success": True, "data": appt}

    def record_payment(self, patient_id: str, amount: float):
        """Record a payment against a patient's balance.

        Args:
            patient_id (str): The patient id.
            amount (float): Amount paid, positive and at most the balance.
        """
        patient = self.patients.get(patient_id)
        if patient is None:
            return self._fail(f"Patient {patient_id} not found")
        if not isinstance(amount, (int, float)) or amount <= 0 or amount > patient["balance"]:
            return self._fail(f"Payment must be in (0, {patient['balance']}]")
        patient["balance"] = round(patient["balance"] - amount, 2)
        patient["payments"] += 1
        return {"success": True, "data": patient}

    def restock_supplies(self, supply_names: list, quantity: int):
        """Add the same quantity to several supplies.

        Args:
            supply_names (list): Supplies to restock.
            quantity (int): Units added to each (1-100).
        """
        if not isinstance(quantity, int) or not 1 <= quantity <= 100:
            return self._fail("quantity must be between 1 and 100")
        unknown = [s for s in supply_names if s not in self.supplies]
        if unknown or not supply_names:
            return self._fail(f"Unknown supplies: {unknown}")
        for name in set(supply_names):
            self.supplies[name] += quantity
        return {"success": True, "data": self.supplies}

    def close_schedule(self, doctor_id: str, slots: list):
        """Remove free slots from a doctor's schedule (e.g. for leave).

        Args:
            doctor_id (str): The doctor id.
            slots (list): Slots to close.
        """
        doctor = self.doctors.get(doctor_id)
        if doctor is None:
            return self._fail(f"Doctor {doctor_id} not found")
        missing = [s for s in slots if s not in doctor["free_slots"]]
        if missing or not slots:
            return self._fail(f"Slots not free: {missing}")
        doctor["free_slots"] = [s for s in doctor["free_slots"] if s not in slots]
        return {"success": True, "data": doctor}
