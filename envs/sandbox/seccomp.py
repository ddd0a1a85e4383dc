"""A seccomp filter for sandboxed commands: deny the system calls a task never needs and an escape might.

The filter is a classic BPF program, built here as bytes (no libseccomp needed) and handed to bwrap with
`--seccomp FD`, which installs it after setting up the sandbox and before the command runs. Denied calls
fail with EPERM, so a program that probes for them sees an ordinary error. Denied: debugging other
processes (ptrace, process_vm_*), kernel modules and kexec, mounts and namespaces (mount, umount2,
pivot_root, unshare, setns, the new mount API), the kernel keyring, bpf, perf events, userfaultfd,
io_uring (a second system-call path seccomp cannot see into), handle-based opens, syslog, swap, reboot,
accounting and quotas. Calls of another ABI (x32, i386 through int 0x80) are denied whole: a filter
written for x86_64 numbers must not be bypassed by another numbering.

Only x86_64 has a filter (`program()` is None elsewhere): the numbers below are that architecture's.
"""
from __future__ import annotations

import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
EPERM = 1
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000

# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED = {
    "ptrace": 101, "syslog": 103, "pivot_root": 155, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}

# Classic BPF opcodes.
LD_W_ABS = 0x20  # A <- 32-bit word at offset k of struct seccomp_data
JEQ_K = 0x15  # if A == k jump jt else jf
JGE_K = 0x35  # if A >= k jump jt else jf
RET_K = 0x06
NR_OFFSET, ARCH_OFFSET = 0, 4


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter as bwrap reads it (packed struct sock_filter entries), or None off x86_64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    numbers = sorted(DENIED.values())
    deny = len(numbers) + 6  # the deny instruction's index: 5 of set-up, one test per number, then allow
    insns = [
        _insn(LD_W_ABS, 0, 0, ARCH_OFFSET),
        _insn(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _insn(RET_K, 0, 0, RET_KILL_PROCESS),
        _insn(LD_W_ABS, 0, 0, NR_OFFSET),
        _insn(JGE_K, deny - 5, 0, X32_SYSCALL_BIT),
    ]
    for i, number in enumerate(numbers):
        here = 5 + i
        insns.append(_insn(JEQ_K, deny - here - 1, 0, number))
    insns.append(_insn(RET_K, 0, 0, RET_ALLOW))
    insns.append(_insn(RET_K, 0, 0, RET_ERRNO | EPERM))
    assert len(insns) == deny + 1
    return b"".join(insns)
