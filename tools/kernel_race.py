"""Start Jupyter kernels from several processes at once; count the ones that never answer.

    python tools/kernel_race.py tcp 6 20     # 6 processes, 20 kernels each, over TCP ports
    python tools/kernel_race.py ipc 6 20     # the same over socket files (tests/kernel_sockets.py)

Over TCP a kernel is handed ports that were free a moment before, and sometimes one is taken by
then (see tests/kernel_sockets.py). On the 2-core machine, four runs of 120 kernels over TCP lost
3 kernels; four over socket files lost none. A measurement for maintainers, not a test: it takes
about 20 s a run and its count is a matter of luck.
"""

import multiprocessing
import pathlib
import subprocess
import sys
import time

TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"


def start_kernels(transport: str, count: int) -> list[str]:
    """Start, use and stop count kernels one after another; the errors of those that failed."""
    sys.path.insert(0, str(TESTS))
    from jupyter_client.manager import KernelManager
    from kernel_sockets import over_socket_files, remove_folder

    manager = over_socket_files(KernelManager) if transport == "ipc" else KernelManager
    failed = []
    for _ in range(count):
        km = manager(kernel_name="python3")
        try:
            km.start_kernel(stderr=subprocess.DEVNULL)
            kc = km.client()
            kc.start_channels()
            try:
                kc.wait_for_ready(timeout=30)
                assert kc.execute_interactive("x = 1", timeout=30)["content"]["status"] == "ok"
            finally:
                kc.stop_channels()
        except Exception as error:  # noqa: BLE001 -- any failure to start is what is counted
            failed.append(f"{type(error).__name__}: {str(error)[:60]}")
        finally:
            km.shutdown_kernel(now=True)
    remove_folder()
    return failed


def main() -> None:
    if len(sys.argv) != 4 or sys.argv[1] not in ("tcp", "ipc"):
        sys.exit("usage: python tools/kernel_race.py tcp|ipc PROCESSES KERNELS")
    transport, processes, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    start = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        failed = [f for batch in pool.starmap(start_kernels, [(transport, count)] * processes) for f in batch]
    print(f"{transport}: {processes * count} kernels, {len(failed)} failed in {time.monotonic() - start:.0f} s",
          *failed[:3], sep="\n  ")


if __name__ == "__main__":
    main()
