FAMILY = "F4"
DESCRIPTION = "time.thread_time() read from a helper thread and from the calling thread."
CLASS = "Source"
CODE = r'''
import time, threading

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = [time.thread_time(), (lambda box: (threading.Thread(target=lambda: box.append(time.thread_time_ns())).start(), __import__('time').sleep(0.01), box)[2])([])][0:2]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
