"""What the scripts driven by tests/tests/python_client.rs share: lines out, and questions to the
test, which acts on ZooKeeper directly (not through the daemon) and answers on stdin.

    say(*words)        a line for the test to check
    ask("zk-create", path, data)   create a node (persistent); answers "ok"
    ask("zk-set", path, data)      set a node's data; "ok"
    ask("zk-delete", path)         delete a node; "ok"
    ask("zk-exists", path)         "yes" or "no"
    ask("zk-gone", path)           waits until the node is gone (a release sent unwaited); "gone"
    ask("zk-children", path)       the children's names, sorted, space-separated ("-" for none)
"""
import sys


def say(*words):
    print(*words, flush=True)


def ask(*words):
    print("ask", *words, flush=True)
    answer = sys.stdin.readline()
    if not answer:
        raise SystemExit("the test closed stdin")
    return answer.strip()


def children(path):
    answer = ask("zk-children", path)
    return [] if answer == "-" else answer.split(" ")
