/**
 * The seccomp profile of every machine process and every session in it (runc applies the
 * container's filter to `runc exec` too). An allowlist in the manner of Docker's default
 * profile: a syscall not named here fails with EPERM, so a syscall the kernel adds later
 * is refused until someone decides otherwise.
 *
 * Left out, on purpose (the kernel would check most of them against capabilities a machine
 * does not hold, but each is attack surface that ordinary programs never need):
 * - namespaces and mounts: mount, umount2, pivot_root, unshare, setns and the new mount
 *   API (open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr);
 * - kernel modules, kexec and reboot;
 * - the kernel keyring (add_key, request_key, keyctl: not namespaced);
 * - bpf, perf_event_open, userfaultfd, io_uring_* (frequent sources of kernel exploits);
 * - clocks and swap (settimeofday, clock_settime, clock_adjtime, swapon, swapoff), acct,
 *   quotas, syslog, ioperm and iopl;
 * - file handles (name_to_handle_at, open_by_handle_at: the classic container breakout),
 *   cross-process memory (process_vm_readv/writev, kcmp), page migration, fanotify_init,
 *   memfd_secret, and obsolete or unimplemented calls.
 * Three are allowed with conditions below: clone without namespace flags, clone3 refused
 * with ENOSYS so that libc falls back to clone, and personality with the usual values.
 */

/** The OCI runtime-spec seccomp object (the parts used). */
export interface SeccompProfile {
  defaultAction: 'SCMP_ACT_ERRNO';
  defaultErrnoRet: number;
  architectures: string[];
  syscalls: {
    names: string[];
    action: 'SCMP_ACT_ALLOW' | 'SCMP_ACT_ERRNO';
    errnoRet?: number;
    args?: { index: number; value: number; valueTwo?: number; op: string }[];
  }[];
}

const EPERM = 1;
const ENOSYS = 38;

/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET. */
const CLONE_NAMESPACE_FLAGS = 0x7e020000;

/** Execution domains programs set: Linux, 32-bit addresses, no randomization, query. */
const PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

/** Syscalls allowed unconditionally (names libseccomp does not know on an arch are skipped). */
// prettier-ignore
export const ALLOWED_SYSCALLS: readonly string[] = [
  'accept', 'accept4', 'access', 'adjtimex', 'alarm', 'arch_prctl', 'bind', 'brk', 'cachestat',
  'capget', 'capset', 'chdir', 'chmod', 'chown', 'chroot', 'clock_getres', 'clock_gettime',
  'clock_nanosleep', 'close', 'close_range', 'connect', 'copy_file_range', 'creat', 'dup',
  'dup2', 'dup3', 'epoll_create', 'epoll_create1', 'epoll_ctl', 'epoll_pwait', 'epoll_pwait2',
  'epoll_wait', 'eventfd', 'eventfd2', 'execve', 'execveat', 'exit', 'exit_group', 'faccessat',
  'faccessat2', 'fadvise64', 'fallocate', 'fanotify_mark', 'fchdir', 'fchmod', 'fchmodat',
  'fchmodat2', 'fchown', 'fchownat', 'fcntl', 'fdatasync', 'fgetxattr', 'flistxattr', 'flock',
  'fork', 'fremovexattr', 'fsetxattr', 'fstat', 'fstatfs', 'fsync', 'ftruncate', 'futex',
  'futex_requeue', 'futex_wait', 'futex_waitv', 'futex_wake', 'futimesat', 'get_mempolicy',
  'get_robust_list', 'get_thread_area', 'getcpu', 'getcwd', 'getdents', 'getdents64', 'getegid',
  'geteuid', 'getgid', 'getgroups', 'getitimer', 'getpeername', 'getpgid', 'getpgrp', 'getpid',
  'getppid', 'getpriority', 'getrandom', 'getresgid', 'getresuid', 'getrlimit', 'getrusage',
  'getsid', 'getsockname', 'getsockopt', 'gettid', 'gettimeofday', 'getuid', 'getxattr',
  'getxattrat', 'inotify_add_watch', 'inotify_init', 'inotify_init1', 'inotify_rm_watch',
  'io_cancel', 'io_destroy', 'io_getevents', 'io_pgetevents', 'io_setup', 'io_submit', 'ioctl',
  'ioprio_get', 'ioprio_set', 'kill', 'landlock_add_rule', 'landlock_create_ruleset',
  'landlock_restrict_self', 'lchown', 'lgetxattr', 'link', 'linkat', 'listen', 'listmount',
  'listxattr', 'listxattrat', 'llistxattr', 'lremovexattr', 'lseek', 'lsetxattr',
  'lsm_get_self_attr', 'lsm_list_modules', 'lstat', 'madvise', 'map_shadow_stack', 'mbind',
  'membarrier', 'memfd_create', 'mincore', 'mkdir', 'mkdirat', 'mknod', 'mknodat', 'mlock',
  'mlock2', 'mlockall', 'mmap', 'modify_ldt', 'mprotect', 'mq_getsetattr', 'mq_notify',
  'mq_open', 'mq_timedreceive', 'mq_timedsend', 'mq_unlink', 'mremap', 'mseal', 'msgctl',
  'msgget', 'msgrcv', 'msgsnd', 'msync', 'munlock', 'munlockall', 'munmap', 'nanosleep',
  'newfstatat', 'open', 'openat', 'openat2', 'pause', 'pidfd_getfd', 'pidfd_open',
  'pidfd_send_signal', 'pipe', 'pipe2', 'pkey_alloc', 'pkey_free', 'pkey_mprotect', 'poll',
  'ppoll', 'prctl', 'pread64', 'preadv', 'preadv2', 'prlimit64', 'process_madvise',
  'process_mrelease', 'pselect6', 'ptrace', 'pwrite64', 'pwritev', 'pwritev2', 'read',
  'readahead', 'readlink', 'readlinkat', 'readv', 'recvfrom', 'recvmmsg', 'recvmsg',
  'remap_file_pages', 'removexattr', 'removexattrat', 'rename', 'renameat', 'renameat2',
  'restart_syscall', 'rmdir', 'rseq', 'rt_sigaction', 'rt_sigpending', 'rt_sigprocmask',
  'rt_sigqueueinfo', 'rt_sigreturn', 'rt_sigsuspend', 'rt_sigtimedwait', 'rt_tgsigqueueinfo',
  'sched_get_priority_max', 'sched_get_priority_min', 'sched_getaffinity', 'sched_getattr',
  'sched_getparam', 'sched_getscheduler', 'sched_rr_get_interval', 'sched_setaffinity',
  'sched_setattr', 'sched_setparam', 'sched_setscheduler', 'sched_yield', 'seccomp', 'select',
  'semctl', 'semget', 'semop', 'semtimedop', 'sendfile', 'sendmmsg', 'sendmsg', 'sendto',
  'set_mempolicy', 'set_mempolicy_home_node', 'set_robust_list', 'set_thread_area',
  'set_tid_address', 'setdomainname', 'setfsgid', 'setfsuid', 'setgid', 'setgroups',
  'sethostname', 'setitimer', 'setpgid', 'setpriority', 'setregid', 'setresgid', 'setresuid',
  'setreuid', 'setrlimit', 'setsid', 'setsockopt', 'setuid', 'setxattr', 'setxattrat', 'shmat',
  'shmctl', 'shmdt', 'shmget', 'shutdown', 'sigaltstack', 'signalfd', 'signalfd4', 'socket',
  'socketpair', 'splice', 'stat', 'statfs', 'statmount', 'statx', 'symlink', 'symlinkat', 'sync',
  'sync_file_range', 'syncfs', 'sysinfo', 'tee', 'tgkill', 'time', 'timer_create',
  'timer_delete', 'timer_getoverrun', 'timer_gettime', 'timer_settime', 'timerfd_create',
  'timerfd_gettime', 'timerfd_settime', 'times', 'tkill', 'truncate', 'umask', 'uname', 'unlink',
  'unlinkat', 'uretprobe', 'utime', 'utimensat', 'utimes', 'vfork', 'vhangup', 'vmsplice',
  'wait4', 'waitid', 'write', 'writev',

];

/** The calls left out on purpose (see above); a test checks none of them slipped in. */
// prettier-ignore
export const REFUSED_SYSCALLS: readonly string[] = [
  'mount', 'umount2', 'pivot_root', 'unshare', 'setns', 'open_tree', 'move_mount', 'fsopen',
  'fsconfig', 'fsmount', 'fspick', 'mount_setattr', 'init_module', 'finit_module',
  'delete_module', 'kexec_load', 'kexec_file_load', 'reboot', 'add_key', 'request_key',
  'keyctl', 'bpf', 'perf_event_open', 'userfaultfd', 'io_uring_setup', 'io_uring_enter',
  'io_uring_register', 'settimeofday', 'clock_settime', 'clock_adjtime', 'swapon', 'swapoff',
  'acct', 'quotactl', 'syslog', 'ioperm', 'iopl', 'name_to_handle_at', 'open_by_handle_at',
  'process_vm_readv', 'process_vm_writev', 'kcmp', 'move_pages', 'migrate_pages',
  'fanotify_init', 'memfd_secret',
];

/** The seccomp architectures of this host: the native one and its compat ABIs. */
function architectures(arch: string): string[] {
  if (arch === 'x64') return ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'];
  if (arch === 'arm64') return ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'];
  throw new Error(`no seccomp profile for architecture ${arch}`);
}

/** The profile for a host of architecture `arch` (Node's `process.arch`). */
export function seccompProfile(arch: string = process.arch): SeccompProfile {
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: EPERM,
    architectures: architectures(arch),
    syscalls: [
      { names: [...ALLOWED_SYSCALLS], action: 'SCMP_ACT_ALLOW' },
      {
        names: ['clone'],
        action: 'SCMP_ACT_ALLOW',
        // The flags are clone's first argument on x86-64 and arm64 alike.
        args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }],
      },
      // clone3 passes its flags in memory, out of seccomp's sight: refuse it as absent.
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
      ...PERSONALITIES.map((value) => ({
        names: ['personality'],
        action: 'SCMP_ACT_ALLOW' as const,
        args: [{ index: 0, value, op: 'SCMP_CMP_EQ' }],
      })),
    ],
  };
}
