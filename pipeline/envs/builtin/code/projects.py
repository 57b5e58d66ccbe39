"""Project tracking: tasks, assignees, sprints and velocity."""


class ProjectTracker:
    """An issue tracker with sprints: completing work updates tasks, assignees' load and the
    sprint's burned points."""

    def __init__(self, config=None):
        config = config or {}
        self.tasks = config.get("tasks", {})
        self.members = config.get("members", {})
        self.sprints = config.get("sprints", {})
        self.task_counter = config.get("task_counter", 0)

    def _fail(self, message):
        return {"success": False, "error": message}

    def list_tasks(self):
        """List every task with status, assignee and points."""
        return {"success": True, "data": self.tasks}

    def get_task(self, task_id: str):
        """Get one task.

        Args:
            task_id (str): The task key.
        """
        if task_id not in self.tasks:
            return self._fail(f"Task {task_id} not found")
        return {"success": True, "data": self.tasks[task_id]}

    def get_member(self, member_id: str):
        """Get a team member's load and completed points.

        Args:
            member_id (str): The member id.
        """
        if member_id not in self.members:
            return self._fail(f"Member {member_id} not found")
        return {"success": True, "data": self.members[member_id]}

    def create_task(self, title: str, points: int):
        """Create a backlog task.

        Args:
            title (str): Task title (non-empty).
            points (int): Story points (1, 2, 3, 5, 8 or 13).
        """
        if not isinstance(title, str) or not title.strip():
            return self._fail("title must be a non-empty string")
        if points not in (1, 2, 3, 5, 8, 13):
            return self._fail("points must be one of 1, 2, 3, 5, 8, 13")
        self.task_counter += 1
        key = f"PRJ-{self.task_counter}"
        self.tasks[key] = {"title": title, "points": points, "status": "backlog", "assignee": None, "sprint": None}
        return {"success": True, "data": {"task_id": key}}

    def assign_task(self, task_id: str, member_id: str):
        """Assign a task; the member's load includes its points (capacity applies).

        Args:
            task_id (str): The task key.
            member_id (str): The member id.
        """
        task, member = self.tasks.get(task_id), self.members.get(member_id)
        if task is None:
            return self._fail(f"Task {task_id} not found")
        if member is None:
            return self._fail(f"Member {member_id} not found")
        if task["status"] == "done":
            return self._fail(f"Task {task_id} is done")
        if task["assignee"] == member_id:
            return self._fail(f"Task {task_id} is already assigned to {member_id}")
        if member["load"] + task["points"] > member["capacity"]:
            return self._fail(f"{member_id} is at capacity ({member['load']}/{member['capacity']})")
        if task["assignee"]:
            self.members[task["assignee"]]["load"] -= task["points"]
        member["load"] += task["points"]
        task["assignee"] = member_id
        return {"success": True, "data": task}

    def start_sprint(self, sprint_id: str, task_ids: list):
        """Start a planned sprint with the given backlog tasks: each task moves into the sprint.

        Args:
            sprint_id (str): The sprint id.
            task_ids (list): Backlog tasks to include.
        """
        sprint = self.sprints.get(sprint_id)
        if sprint is None:
            return self._fail(f"Sprint {sprint_id} not found")
        if sprint["status"] != "planned":
            return self._fail(f"Sprint {sprint_id} is {sprint['status']}")
        if not task_ids or len(set(task_ids)) != len(task_ids):
            return self._fail("task_ids must be a non-empty list without duplicates")
        for tid in task_ids:
            if tid not in self.tasks or self.tasks[tid]["status"] != "backlog":
                return self._fail(f"Task {tid} is not in the backlog")
        for tid in task_ids:
            self.tasks[tid]["status"] = "in_sprint"
            self.tasks[tid]["sprint"] = sprint_id
        sprint["status"] = "active"
        sprint["committed"] = sum(self.tasks[t]["points"] for t in task_ids)
        return {"success": True, "data": sprint}

    def complete_tasks(self, task_ids: list):
        """Mark assigned sprint tasks done: the assignee's load drops and completed points rise, the
        sprint burns the points.

        Args:
            task_ids (list): Tasks completed.
        """
        if not task_ids or len(set(task_ids)) != len(task_ids):
            return self._fail("task_ids must be a non-empty list without duplicates")
        for tid in task_ids:
            task = self.tasks.get(tid)
            if task is None:
                return self._fail(f"Task {tid} not found")
            if task["status"] != "in_sprint" or not task["assignee"]:
                return self._fail(f"Task {tid} must be assigned and in an active sprint")
        for tid in task_ids:
            task = self.tasks[tid]
            member = self.members[task["assignee"]]
            task["status"] = "done"
            member["load"] -= task["points"]
            member["completed"] += task["points"]
            self.sprints[task["sprint"]]["burned"] += task["points"]
        return {"success": True, "data": {"completed": task_ids}}

    def reassign_all(self, from_member_id: str, to_member_id: str):
        """Hand every open task of one member over to another (capacity applies).

        Args:
            from_member_id (str): Member giving up the tasks.
            to_member_id (str): Member taking them over.
        """
        src, dst = self.members.get(from_member_id), self.members.get(to_member_id)
        if src is None or dst is None or from_member_id == to_member_id:
            return self._fail("Two different existing members are required")
        moving = [t for t, task in self.tasks.items() if task["assignee"] == from_member_id and task["status"] != "done"]
        if not moving:
            return self._fail(f"{from_member_id} has no open tasks")
        points = sum(self.tasks[t]["points"] for t in moving)
        if dst["load"] + points > dst["capacity"]:
            return self._fail(f"{to_member_id} cannot take {points} more points")
        for t in moving:
            self.tasks[t]["assignee"] = to_member_id
        src["load"] -= points
        dst["load"] += points
        return {"success": True, "data": {"moved": moving}}

    def update_status(self, task_id: str, status: str):
        """Move a task between backlog and blocked.

        Args:
            task_id (str): The task key.
            status (str): One of backlog or blocked.
        """
        task = self.tasks.get(task_id)
        if task is None:
            return self._fail(f"Task {task_id} not found")
        if status not in ("backlog", "blocked") or task["status"] not in ("backlog", "blocked"):
            return self._fail(f"Cannot move {task_id} from {task['status']} to {status}")
        if task["status"] == status:
            return self._fail(f"Task {task_id} is already {status}")
        task["status"] = status
        return {"success": True, "data": task}

    def close_sprint(self, sprint_id: str):
        """Close an active sprint: unfinished tasks return to the backlog, velocity is recorded.

        Args:
            sprint_id (str): The sprint id.
        """
        sprint = self.sprints.get(sprint_id)
        if sprint is None:
            return self._fail(f"Sprint {sprint_id} not found")
        if sprint["status"] != "active":
            return self._fail(f"Sprint {sprint_id} is {sprint['status']}")
        for task in self.tasks.values():
            if task["sprint"] == sprint_id and task["status"] != "done":
                task["status"] = "backlog"
                task["sprint"] = None
        sprint["status"] = "closed"
        sprint["velocity"] = sprint["burned"]
        return {"success": True, "data": sprint}
