"""Running a generation, independent of any socket.

The worker task, the process's ticker and writer, live state and settled blocks,
persistence, Stop, and the sweep for workers that died.
"""
