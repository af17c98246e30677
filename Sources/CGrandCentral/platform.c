// Platform layer: every raw OS call the engine makes that Swift cannot make itself.
#define _GNU_SOURCE 1  // SCHED_IDLE, SCHED_BATCH
#include "CGrandCentral.h"
#include "CGrandCentralSignal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread gc_thread_t gc_thread_storage;

static pthread_key_t gc_cache_key;
static pthread_once_t gc_cache_key_once = PTHREAD_ONCE_INIT;

static void gc_cache_cleanup(void *unused) {
    (void)unused;
    gc_continuation_release(gc_thread_storage.cache);
    gc_thread_storage.cache = NULL;
    gc_thread_storage.cache_count = 0;
    // A later thread-exit destructor may recycle nodes again: let it register again.
    gc_thread_storage.flags &= ~1u;
}

static void gc_cache_key_create(void) { pthread_key_create(&gc_cache_key, gc_cache_cleanup); }

#define GC_THREAD_FLAG_CACHE_CLEANUP 1u

void gc_thread_register_cache_cleanup(void) {
    if (gc_thread_storage.flags & GC_THREAD_FLAG_CACHE_CLEANUP) return;
    gc_thread_storage.flags |= GC_THREAD_FLAG_CACHE_CLEANUP;
    pthread_once(&gc_cache_key_once, gc_cache_key_create);
    pthread_setspecific(gc_cache_key, (void *)1);
}

int gc_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
    if (rc == 0) return 0;
    if (errno == EAGAIN) return 0;
    return errno;
}

int gc_futex_wake(uint32_t *word, int count) {
    long rc = syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
    return rc < 0 ? 0 : (int)rc;
}

uint64_t gc_uptime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gc_walltime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// gettid and getpid are system calls (glibc caches neither), and the engine asks for them
// on paths that run per item: every source handler records its thread, a dispatch_sync
// that waits checks for the main thread. Both are cached, the thread id per thread and the
// process id per process. A forked child's one thread (the one that called fork) has new
// ids: a pthread_atfork child handler, registered before the first id is cached, forgets
// both there. (A child made by a raw clone(2) without CLONE_VM is not seen; libdispatch's
// cached thread id has the same limit.)
static __thread int32_t gc_cached_tid __attribute__((tls_model("initial-exec")));
static _Atomic int32_t gc_cached_pid;
static pthread_once_t gc_id_once = PTHREAD_ONCE_INIT;

static void gc_id_forget(void) {
    gc_cached_tid = 0;
    atomic_store_explicit(&gc_cached_pid, 0, memory_order_relaxed);
}

static void gc_id_register(void) { pthread_atfork(NULL, NULL, gc_id_forget); }

int32_t gc_thread_id(void) {
    int32_t tid = gc_cached_tid;
    if (__builtin_expect(tid == 0, 0)) {
        pthread_once(&gc_id_once, gc_id_register);
        tid = (int32_t)syscall(SYS_gettid);
        gc_cached_tid = tid;
    }
    return tid;
}

int32_t gc_process_id(void) {
    // Relaxed: every thread that stores it stores the same value, the one getpid returns.
    int32_t pid = atomic_load_explicit(&gc_cached_pid, memory_order_relaxed);
    if (__builtin_expect(pid == 0, 0)) {
        pthread_once(&gc_id_once, gc_id_register);
        pid = (int32_t)syscall(SYS_getpid);
        atomic_store_explicit(&gc_cached_pid, pid, memory_order_relaxed);
    }
    return pid;
}

int32_t gc_thread_nice(void) {
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)gc_thread_id());
    return errno == 0 ? (int32_t)nice : 0;
}

uint64_t gc_thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int gc_thread_set_nice(int32_t nice) {
    return setpriority(PRIO_PROCESS, (id_t)gc_thread_id(), nice) == 0 ? 0 : errno;
}

int32_t gc_nice_floor(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &header, data) == 0 && (data[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32)))) {
        return -20;
    }
    struct rlimit limit;
    if (getrlimit(RLIMIT_NICE, &limit) != 0) return 20;
    // RLIMIT_NICE r allows nice values down to 20 - r (r is 1..40 for nice 19..-20).
    rlim_t r = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 40 ? 40 : limit.rlim_cur;
    return 20 - (int32_t)r;
}

struct gc_thread_start {
    void (*body)(void *);
    void *argument;
    char name[16];
};

/// Library threads do not inherit the scheduling of the thread that happened to create
/// them (a program that nices its main thread to 19 or puts it under SCHED_IDLE would
/// otherwise get workers and an event thread that run only when nothing else wants the
/// CPU, and timers that fire late): each starts by taking SCHED_OTHER (from SCHED_IDLE or
/// SCHED_BATCH; a real-time policy is the program's deliberate choice and is kept) at nice
/// 0, the default QoS class's priority; from there a worker takes the nice value of each
/// item's class and the event thread its own (ThreadPriority.swift). Raising a priority
/// (nice 19 back to 0) needs CAP_SYS_NICE or RLIMIT_NICE; without them the thread keeps
/// what it inherited.
static void gc_thread_reset_priority(void) {
    int policy = sched_getscheduler(0);
    if (policy == SCHED_IDLE || policy == SCHED_BATCH) {
        struct sched_param param = { .sched_priority = 0 };
        sched_setscheduler(0, SCHED_OTHER, &param);
    }
    if (policy != SCHED_FIFO && policy != SCHED_RR) setpriority(PRIO_PROCESS, (id_t)gc_thread_id(), 0);
}

static void *gc_thread_trampoline(void *raw) {
    struct gc_thread_start start = *(struct gc_thread_start *)raw;
    free(raw);
    gc_thread_reset_priority();
    gc_signal_enter_library_thread();
    if (start.name[0]) pthread_setname_np(pthread_self(), start.name);
    start.body(start.argument);
    return NULL;
}

int gc_thread_create(void (*body)(void *), void *argument, const char *name) {
    gc_note_thread_start();   // fork.c: the process becomes (or is) multithreaded
    struct gc_thread_start *start = malloc(sizeof *start);
    if (!start) return ENOMEM;
    start->body = body;
    start->argument = argument;
    start->name[0] = 0;
    if (name) {
        strncpy(start->name, name, sizeof start->name - 1);
        start->name[sizeof start->name - 1] = 0;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, gc_thread_trampoline, start);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) free(start);
    return rc;
}

int gc_thread_set_name(int32_t tid, const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    if (tid == gc_thread_id()) return pthread_setname_np(pthread_self(), truncated);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t n = strlen(truncated);
    ssize_t w = write(fd, truncated, n);
    int rc = w == (ssize_t)n ? 0 : errno;
    close(fd);
    return rc;
}

bool gc_thread_is_runnable(int32_t tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *paren = strrchr(buf, ')');  // the command name may contain spaces and parentheses
    if (!paren || paren[1] != ' ') return false;
    return paren[2] == 'R';
}

int gc_thread_in_lock_wait(int32_t tid) {
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    // "<nr> <arg1> <arg2> <arg3> ...", arguments in hex; "running" when not in a syscall.
    char *end;
    long nr = strtol(buf, &end, 10);
    if (end == buf || nr != SYS_futex) return 0;
    strtoull(end, &end, 16);                        // the futex word's address
    unsigned long op = strtoul(end, &end, 16) & FUTEX_CMD_MASK;
    unsigned long val = strtoul(end, &end, 16);
    if (op == FUTEX_LOCK_PI) return 1;               // PI mutexes (Swift's Mutex)
#ifdef FUTEX_LOCK_PI2
    if (op == FUTEX_LOCK_PI2) return 1;
#endif
    return op == FUTEX_WAIT && val == 2;             // glibc's contended lowlevellock
}

// Reads a cgroup CPU quota, in CPUs rounded up, or 0 when there is none.
static int gc_cgroup_cpu_limit(void) {
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");  // cgroup v2: "max 100000" or "200000 100000"
    if (f) {
        char quota[32] = {0};
        long long period = 0;
        int n = fscanf(f, "%31s %lld", quota, &period);
        fclose(f);
        if (n == 2 && strcmp(quota, "max") != 0 && period > 0) {
            long long q = atoll(quota);
            if (q > 0) return (int)((q + period - 1) / period);
        }
        return 0;
    }
    long long q = -1, p = 0;
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");  // cgroup v1
    if (f) { if (fscanf(f, "%lld", &q) != 1) q = -1; fclose(f); }
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    if (f) { if (fscanf(f, "%lld", &p) != 1) p = 0; fclose(f); }
    if (q > 0 && p > 0) return (int)((q + p - 1) / p);
    return 0;
}

int gc_active_cpu_count(void) {
    int count = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) count = CPU_COUNT(&set);
    if (count <= 0) count = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int limit = gc_cgroup_cpu_limit();
    if (limit > 0 && limit < count) count = limit;
    return count > 0 ? count : 1;
}

int gc_logical_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int gc_physical_cpu_count(void) {
    // Count distinct (physical id, core id) pairs; fall back to the logical count.
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return gc_logical_cpu_count();
    char line[256];
    int phys = -1, seen = 0;
    int pairs[1024][2];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
        else if (sscanf(line, "core id : %d", &v) == 1) {
            int dup = 0;
            for (int i = 0; i < seen; i++)
                if (pairs[i][0] == phys && pairs[i][1] == v) { dup = 1; break; }
            if (!dup && seen < 1024) { pairs[seen][0] = phys; pairs[seen][1] = v; seen++; }
        }
    }
    fclose(f);
    return seen > 0 ? seen : gc_logical_cpu_count();
}

static const char *const gc_alloc_messages[] = {
    [GC_ALLOC_CONTINUATION] = "GrandCentral: out of memory: work-item nodes\n",
    [GC_ALLOC_APPLY_STATE] = "GrandCentral: out of memory: dispatch_apply states\n",
};

/// gc_alloc, and with `alignment` non-zero the same for an aligned block.
static void *gc_alloc_aligned(size_t alignment, size_t size, gc_alloc_what_t what) {
    // 1 + 2 + 4 + ... + 64 ms, then 64 ms until about 1 s has passed: long enough for a
    // peak (another thread's large buffer freed, the kernel reclaiming cache) to pass.
    long slept_ms = 0, wait_ms = 1;
    for (;;) {
        void *p = NULL;
        if (alignment == 0) p = malloc(size);
        else if (posix_memalign(&p, alignment, size) != 0) p = NULL;
        if (p) return p;
        if (slept_ms >= 1000) break;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = wait_ms * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        slept_ms += wait_ms;
        if (wait_ms < 64) wait_ms *= 2;
    }
    gc_write_stderr(gc_alloc_messages[what]);
    // The default action, not a handler that would need memory to report (the Swift
    // runtime's backtracer catches SIGABRT).
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigaction(SIGABRT, &default_action, NULL);
    abort();
}

void *gc_alloc(size_t size, gc_alloc_what_t what) { return gc_alloc_aligned(0, size, what); }

// Work-item slabs (CGrandCentral.h). The header line's first word counts the slab's nodes
// not yet released; it is written plainly when the slab is made (the nodes reach other
// threads only through the queues' release/acquire publication) and then only by atomic
// subtraction, acquiring and releasing: every use of a node, on any thread, happens before
// the subtraction that releases it, so the thread whose subtraction reaches zero sees all
// of them before it frees the slab.
#define GC_SLAB_BYTES 4096
#define GC_SLAB_LINES 63

_Static_assert(sizeof(gc_continuation_t) == 64, "a work-item node is one cache line");
_Static_assert(GC_CONTINUATION_SLAB_NODES == GC_SLAB_LINES - 1, "a header line, then the nodes");

static inline uintptr_t *gc_slab_of(gc_continuation_t *node) {
    return (uintptr_t *)((uintptr_t)node & ~(uintptr_t)(GC_SLAB_BYTES - 1));
}

gc_continuation_t *gc_continuation_slab_new(void) {
    char *slab = gc_alloc_aligned(GC_SLAB_BYTES, GC_SLAB_LINES * sizeof(gc_continuation_t),
                                  GC_ALLOC_CONTINUATION);
    *(uintptr_t *)slab = GC_CONTINUATION_SLAB_NODES;
    gc_continuation_t *nodes = (gc_continuation_t *)(slab + sizeof(gc_continuation_t));
    for (int i = 0; i < GC_CONTINUATION_SLAB_NODES - 1; i++) nodes[i].next = &nodes[i + 1];
    nodes[GC_CONTINUATION_SLAB_NODES - 1].next = NULL;
    return nodes;
}

void gc_continuation_release(gc_continuation_t *chain) {
    while (chain) {
        // One subtraction per run of consecutive nodes from one slab (a batch drained in
        // order is mostly such runs). Each node's `next` is read before its slab's count
        // goes down: after that the slab may be gone.
        uintptr_t *slab = gc_slab_of(chain);
        uintptr_t run = 0;
        do {
            run++;
            chain = chain->next;
        } while (chain && gc_slab_of(chain) == slab);
        if (__atomic_sub_fetch(slab, run, __ATOMIC_ACQ_REL) == 0) free(slab);
    }
}

void gc_write_stderr(const char *line) {
    size_t len = strlen(line);
    while (len > 0) {
        ssize_t n = write(2, line, len);
        if (n <= 0) { if (n < 0 && errno == EINTR) continue; break; }
        line += n;
        len -= (size_t)n;
    }
}

void gc_client_bug(const char *function, const char *what) {
    char buf[512];
    snprintf(buf, sizeof buf, "GrandCentral: BUG IN CLIENT: %s: %s\n", function, what);
    gc_write_stderr(buf);
    // A trap, as libdispatch's client crashes are: SIGILL on x86-64 (ud2), SIGTRAP on
    // arm64 (brk), so crash handlers and harnesses see the signal they see with libdispatch.
    __builtin_trap();
}
