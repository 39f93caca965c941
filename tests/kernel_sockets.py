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
import os
import shutil
import tempfile

_FOLDER = []  # this process's folder of kernel folders, once a kernel has needed one


def folder():
    """This process's folder of kernel folders, made when first needed."""
    if not _FOLDER:
        _FOLDER.append(tempfile.mkdtemp(prefix="mha-kernels-"))
    return _FOLDER[0]


def remove_folder():
    """Remove this process's folder, if it has one (conftest's pytest_unconfigure: a pytest-xdist
    worker ends without running atexit hooks)."""
    while _FOLDER:
        shutil.rmtree(_FOLDER.pop(), ignore_errors=True)


def over_socket_files(manager_class):
    """A subclass of manager_class whose kernels bind socket files in a new folder under folder()
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
            return os.path.join(tempfile.mkdtemp(prefix="k", dir=folder()), "s")

    return SocketFileKernelManager
