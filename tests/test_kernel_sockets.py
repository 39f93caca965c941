"""The notebooks' kernels under pytest bind socket files of their own, never TCP ports
(kernel_sockets.py: two kernels started at once could draw the same port, and CI failed)."""
import os
import pathlib

import pytest
from kernel_sockets import folder

nbval_kernel = pytest.importorskip("nbval.kernel")
zmq = pytest.importorskip("zmq")
NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.skipif(os.name != "posix" or not zmq.has("ipc"), reason="no ipc transport here: kernels keep TCP")
def test_two_kernels_at_once_bind_socket_files_in_folders_of_their_own():
    kernels = [nbval_kernel.RunningKernel(nbval_kernel.CURRENT_ENV_KERNEL_NAME, cwd=str(NOTEBOOKS))
               for _ in range(2)]
    try:
        infos = [kernel.km.get_connection_info() for kernel in kernels]
        assert [info["transport"] for info in infos] == ["ipc", "ipc"]
        folders = [os.path.dirname(info["ip"]) for info in infos]
        assert all(os.path.dirname(one) == folder() for one in folders) and folders[0] != folders[1]
        for number, kernel in enumerate(kernels):  # the client (here) and the kernel (in notebooks/) meet
            reply = kernel.kc.execute_interactive(f"import os; print(6 * 7 + {number}, os.getcwd())", timeout=30)
            assert reply["content"]["status"] == "ok"
    finally:
        for kernel in kernels:
            kernel.stop()
