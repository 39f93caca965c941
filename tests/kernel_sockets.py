"""Jupyter kernels that talk over socket files, not TCP ports.

A kernel manager picks five free TCP ports, closes them, and hands their numbers to the kernel,
which binds them a moment later. In between, anything on the machine may take one: another
kernel started at the same moment by another pytest worker, or the source port of another
client's connection. The kernel then dies with ZMQ's "Address already in use", and its client
reports "Kernel died before replying to kernel_info" or "Kernel didn't respond in 60 seconds".
That says nothing about a notebook, and it has failed CI (33 cells of notebook 16 at once).

Over socket files (ZMQ's ipc transport) each kernel binds paths in a new folder of its own, so
no two kernels can meet. Where ipc is missing (Windows), kernels keep TCP.
"""
import atexit
import os
import shutil
import tempfile

FOLDER = tempfile.mkdtemp(prefix="mha-kernels-")  # one per test process, gone when it ends
atexit.register(shutil.rmtree, FOLDER, True)


def over_socket_files(manager_class):
    """A subclass of manager_class whose kernels bind socket files in a new folder under FOLDER
    (a short absolute path, the same for the kernel and its client, whatever their working folders);
    manager_class itself where ipc is missing."""
    import zmq
    from traitlets import default

    if os.name != "posix" or not zmq.has("ipc"):
        return manager_class

    class SocketFileKernelManager(manager_class):
        @default("transport")
        def _socket_files(self):
            return "ipc"

        @default("ip")
        def _a_folder_of_its_own(self):
            return os.path.join(tempfile.mkdtemp(prefix="k", dir=FOLDER), "s")

    return SocketFileKernelManager
