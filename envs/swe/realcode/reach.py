"""A program run in a sandbox on a pristine package: which package functions each graded case calls.

Standard library only. Reads {"package", "timeout", "cases": [harness case]} on stdin and prints one JSON
list: per case, the [file, qualified name without `<locals>`] pairs its expression reached. Mining
mutates only functions some case reaches and reruns only those cases, since no other case can change.
"""
import json
import os
import signal
import sys


class CaseTimeout(BaseException):
    """A case ran past its time."""


def main():
    spec = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    sys.path.insert(0, os.getcwd())
    root = os.path.join(os.getcwd(), spec["package"]) + os.sep

    def on_alarm(signum, frame):
        raise CaseTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    reached = []
    for case in spec["cases"]:
        seen = set()

        def profile(frame, event, arg):
            code = frame.f_code
            if event == "call" and code.co_filename.startswith(root):
                seen.add((os.path.relpath(code.co_filename), code.co_qualname.replace(".<locals>", "")))

        namespace = {}
        signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
        try:
            for statement in case["setup"]:
                exec(statement, namespace)
            sys.setprofile(profile)
            try:
                eval(case["expr"], namespace)
            finally:
                sys.setprofile(None)
        except BaseException:
            pass
        signal.setitimer(signal.ITIMER_REAL, 0)
        reached.append(sorted(seen))
    out.write(json.dumps(reached))
    out.flush()


if __name__ == "__main__":
    main()
