"""{{name}}: a custom wazoo recipe in Python. `wazoo run {{name}} PATH [--timeout-ms N]` waits
until the znode PATH exists and prints its data.

Every `wazoo:zk` call blocks this guest while the host awaits ZooKeeper, so a recipe reads as
straight-line code. `wazoo_guest` (beside this file) gives the calls typed errors
(`zk.NoNode`, `zk.Timeout`, ...) and the helpers recipes share. Nothing may call the host at
import time: componentize-py runs the import while it builds the component.
"""

from componentize_py_types import Err

import wit_world
import wazoo_guest as zk


class WitWorld(wit_world.WitWorld):
    def run(self, args):
        try:
            path, timeout_ms = _parse(args)
        except ValueError as e:
            raise Err(str(e))
        try:
            return _wait_for(path, timeout_ms)
        except zk.Timeout:
            raise Err(f"{path}: still absent when the timeout passed")
        except zk.ZkError as e:
            raise Err(f"{path}: {e}")


def _wait_for(path, timeout_ms):
    zk.check_path(path)
    while True:
        # Read and arm a watch in one call: a creation between the two cannot be missed.
        stat, watcher = zk.exists_watch(path)
        with watcher:
            if stat is not None:
                try:
                    data, _ = zk.get_data(path)
                    return data.decode("utf-8", "replace")
                except zk.NoNode:
                    continue  # deleted again in between: wait for the next creation
            event = zk.watch_wait(watcher, timeout_ms)
            if event.kind in (zk.EventKind.SESSION_EXPIRED, zk.EventKind.SESSION_CLOSED):
                raise zk.SessionExpired()


def _parse(args):
    path, timeout_ms = None, None
    args = list(args)
    while args:
        arg = args.pop(0)
        if arg == "--timeout-ms":
            if not args:
                raise ValueError("--timeout-ms needs a number")
            try:
                timeout_ms = int(args.pop(0))
            except ValueError:
                raise ValueError("--timeout-ms: not a number") from None
        elif path is None:
            path = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}")
    if path is None:
        raise ValueError("usage: {{name}} PATH [--timeout-ms N]")
    return path, timeout_ms
