"""Running a generation, independent of any socket.

The worker task and the tool loop between its rounds, the process's ticker and writer, live
state and settled blocks, persistence, Stop, and the sweep for workers that died.
"""
