"""University: course enrollment with capacity, waitlists, tuition and grading."""


class CourseEnrollment:
    """A registrar: students enroll in courses within capacity and credit limits; tuition is
    billed per credit; instructors post grades."""

    def __init__(self, config=None):
        config = config or {}
        self.courses = config.get("courses", {})
        self.students = config.get("students", {})
        self.transcripts = config.get("transcripts", {})
        self.max_credits = config.get("max_credits", 18)
        self.tuition_per_credit = config.get("tuition_per_credit", 300)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_courses(self):
        """List courses with capacity and enrollment."""
        return {"success": True, "data": self.courses}

    def get_course(self, course_id: str):
        """Get one course.

        Args:
            course_id (str): The course code.
        """
        if course_id not in self.courses:
            return self._fail(f"Course {course_id} not found")
        return {"success": True, "data": self.courses[course_id]}

    def get_student(self, student_id: str):
        """Get a student's record.

        Args:
            student_id (str): The student id.
        """
        if student_id not in self.students:
            return self._fail(f"Student {student_id} not found")
        return {"success": True, "data": self.students[student_id]}

    def _check(self, student_id, course):
        student = self.students.get(student_id)
        if student is None:
            return f"Student {student_id} not found"
        if student["hold"]:
            return f"Student {student_id} has a registration hold"
        if course["id"] in student["courses"]:
            return f"Student {student_id} is already enrolled in {course['id']}"
        if student["credits"] + course["credits"] > self.max_credits:
            return f"Student {student_id} would exceed {self.max_credits} credits"
        missing = [p for p in course["prerequisites"] if p not in student["completed"]]
        if missing:
            return f"Student {student_id} lacks prerequisites {missing}"
        return None

    def _enroll(self, student_id, course):
        student = self.students[student_id]
        student["courses"] = student["courses"] + [course["id"]]
        student["credits"] += course["credits"]
        student["balance"] += course["credits"] * self.tuition_per_credit
        course["enrolled"] += 1

    def enroll(self, student_id: str, course_id: str):
        """Enroll a student in a course (checks hold, prerequisites, capacity, credit limit).

        Args:
            student_id (str): The student id.
            course_id (str): The course code.
        """
        course = self.courses.get(course_id)
        if course is None:
            return self._fail(f"Course {course_id} not found")
        problem = self._check(student_id, course)
        if problem:
            return self._fail(problem)
        if course["enrolled"] >= course["capacity"]:
            return self._fail(f"Course {course_id} is full")
        self._enroll(student_id, course)
        return {"success": True, "data": {"student": self.students[student_id]}}

    def batch_enroll(self, course_id: str, student_ids: list):
        """Enroll several students in one course at once (all or nothing).

        Args:
            course_id (str): The course code.
            student_ids (list): Students to enroll.
        """
        course = self.courses.get(course_id)
        if course is None:
            return self._fail(f"Course {course_id} not found")
        if not student_ids or len(set(student_ids)) != len(student_ids):
            return self._fail("student_ids must be a non-empty list without duplicates")
        for sid in student_ids:
            problem = self._check(sid, course)
            if problem:
                return self._fail(problem)
        if course["enrolled"] + len(student_ids) > course["capacity"]:
            return self._fail(f"Course {course_id} has only {course['capacity'] - course['enrolled']} seats left")
        for sid in student_ids:
            self._enroll(sid, course)
        return {"success": True, "data": {"enrolled": student_ids}}

    def drop(self, student_id: str, course_id: str):
        """Drop a course: credits and enrollment go down, half the tuition is refunded.

        Args:
            student_id (str): The student id.
            course_id (str): The course code.
        """
        student, course = self.students.get(student_id), self.courses.get(course_id)
        if student is None or course is None:
            return self._fail("Unknown student or course")
        if course_id not in student["courses"]:
            return self._fail(f"Student {student_id} is not enrolled in {course_id}")
        student["courses"] = [c for c in student["courses"] if c != course_id]
        student["credits"] -= course["credits"]
        student["balance"] -= course["credits"] * self.tuition_per_credit // 2
        course["enrolled"] -= 1
        return {"success": True, "data": {"student": student}}

    def post_grades(self, course_id: str, student_ids: list, grade: str):
        """Post the same final grade for several students; students not enrolled in the course are
        skipped and reported. Each graded student gets a transcript entry, leaves the course and,
        unless failed, counts it as completed.

        Args:
            course_id (str): The course code.
            student_ids (list): Students to grade.
            grade (str): One of A, B, C, D, F.
        """
        course = self.courses.get(course_id)
        if course is None:
            return self._fail(f"Course {course_id} not found")
        if grade not in ("A", "B", "C", "D", "F"):
            return self._fail(f"Invalid grade {grade!r}")
        graded = sorted({s for s in student_ids if s in self.students and course_id in self.students[s]["courses"]})
        if not graded:
            return self._fail(f"None of {student_ids} is enrolled in {course_id}")
        for sid in graded:
            student = self.students[sid]
            student["courses"] = [c for c in student["courses"] if c != course_id]
            student["credits"] -= course["credits"]
            if grade != "F":
                student["completed"] = student["completed"] + [course_id]
            self.transcripts[f"{sid}:{course_id}"] = {"grade": grade, "credits": course["credits"]}
        course["graded"] += len(graded)
        course["enrolled"] -= len(graded)
        skipped = [s for s in student_ids if s not in graded]
        return {"success": True, "data": {"graded": graded, "skipped": skipped}}

    def withdraw(self, student_id: str):
        """Withdraw a student from every enrolled course (a quarter of the tuition is refunded).

        Args:
            student_id (str): The student id.
        """
        student = self.students.get(student_id)
        if student is None:
            return self._fail(f"Student {student_id} not found")
        if not student["courses"]:
            return self._fail(f"Student {student_id} is not enrolled in any course")
        for cid in student["courses"]:
            self.courses[cid]["enrolled"] -= 1
        student["balance"] -= student["credits"] * self.tuition_per_credit // 4
        student["credits"] = 0
        student["courses"] = []
        return {"success": True, "data": student}

    def swap_course(self, student_id: str, from_course_id: str, to_course_id: str):
        """Swap an enrolled course for another one in a single step (capacity, prerequisites and the
        credit limit apply; tuition is adjusted by the credit difference).

        Args:
            student_id (str): The student id.
            from_course_id (str): Course the student leaves.
            to_course_id (str): Course the student joins.
        """
        student = self.students.get(student_id)
        old, new = self.courses.get(from_course_id), self.courses.get(to_course_id)
        if student is None or old is None or new is None:
            return self._fail("Unknown student or course")
        if from_course_id not in student["courses"]:
            return self._fail(f"Student {student_id} is not enrolled in {from_course_id}")
        if to_course_id in student["courses"]:
            return self._fail(f"Student {student_id} is already enrolled in {to_course_id}")
        if new["enrolled"] >= new["capacity"]:
            return self._fail(f"Course {to_course_id} is full")
        missing = [p for p in new["prerequisites"] if p not in student["completed"]]
        if missing:
            return self._fail(f"Student {student_id} lacks prerequisites {missing}")
        if student["credits"] - old["credits"] + new["credits"] > self.max_credits:
            return self._fail(f"Student {student_id} would exceed {self.max_credits} credits")
        student["courses"] = [c for c in student["courses"] if c != from_course_id] + [to_course_id]
        student["credits"] += new["credits"] - old["credits"]
        student["balance"] += (new["credits"] - old["credits"]) * self.tuition_per_credit
        old["enrolled"] -= 1
        new["enrolled"] += 1
        return {"success": True, "data": student}

    def waive_fees(self, student_id: str, amount: int):
        """Waive part of a student's balance (scholarship).

        Args:
            student_id (str): The student id.
            amount (int): Amount waived, positive and at most the balance.
        """
        student = self.students.get(student_id)
        if student is None:
            return self._fail(f"Student {student_id} not found")
        if not isinstance(amount, (int, float)) or not 0 < amount <= student["balance"]:
            return self._fail(f"amount must be in (0, {student['balance']}]")
        student["balance"] -= amount
        student["waived"] = student.get("waived", 0) + amount
        return {"success": True, "data": student}

    def set_capacity(self, course_id: str, capacity: int):
        """Change a course's capacity (never below current enrollment).

        Args:
            course_id (str): The course code.
            capacity (int): New capacity.
        """
        course = self.courses.get(course_id)
        if course is None:
            return self._fail(f"Course {course_id} not found")
        if not isinstance(capacity, int) or capacity < course["enrolled"] or capacity > 300:
            return self._fail(f"Capacity must be between {course['enrolled']} and 300")
        course["capacity"] = capacity
        return {"success": True, "data": course}

    def clear_hold(self, student_id: str):
        """Clear a student's registration hold after the balance is settled (balance must be under 5000).

        Args:
            student_id (str): The student id.
        """
        student = self.students.get(student_id)
        if student is None:
            return self._fail(f"Student {student_id} not found")
        if not student["hold"]:
            return self._fail(f"Student {student_id} has no hold")
        if student["balance"] >= 5000:
            return self._fail(f"Balance {student['balance']} must be under 5000")
        student["hold"] = False
        return {"success": True, "data": student}
