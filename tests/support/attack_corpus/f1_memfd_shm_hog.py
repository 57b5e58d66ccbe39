FAMILY = "F1"
DESCRIPTION = "Holds memory outside RLIMIT_AS: memfd_create files and a /dev/shm file, far beyond the child's memory limit, kept by a reused child."
CLASS = "Hog"
CODE = r'''
import os

HELD = []

class Hog:
    def __init__(self, init_config=None):
        self.held = 0

    def hog(self, mib: int):
        """Fill memfds (and /dev/shm) with `mib` MiB."""
        chunk = b"\xab" * (1 << 20)
        total = 0
        for i in range(mib // 48 + 1):
            fd = os.memfd_create(f"hog{i}")
            HELD.append(fd)
            for _ in range(48):
                if total >= mib << 20:
                    break
                try:
                    os.write(fd, chunk)
                except OSError:
                    break
                total += 1 << 20
        d = os.open("/dev/shm", os.O_RDONLY | os.O_DIRECTORY)
        try:
            fd = os.open("hog", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d)
            for _ in range(32):
                os.write(fd, chunk)
                total += 1 << 20
            HELD.append(fd)
        except OSError:
            pass
        self.held = total
        return {"success": True, "data": {"held": total}}
'''
ACTIONS = [("hog", {"mib": 640})]


def check(results, limits):
    out = []
    for r in results:
        for s in r["steps"]:
            if s["tool"] == "hog" and s["outcome"] != "error" and s["observation_json"]:
                import json
                held = json.loads(s["observation_json"])["data"]["held"]
                if held > limits.memory_mb << 20:
                    out.append(f"{r['trajectory_id']}: held {held >> 20} MiB in memfd//dev/shm against a {limits.memory_mb} MiB limit")
    return out
