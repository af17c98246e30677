// CGrandCentral: the few things the engine needs from C that Swift cannot express
// directly: the futex syscall (variadic `syscall`), thread-local storage with a fast
// access model, raw atomics on C-laid-out nodes, and thread creation with a controlled
// signal mask. It declares no dispatch_* or _dispatch_* symbols (DESIGN.md, layout): the C
// ABI's data symbols are the handle layer's (GrandCentralExports/include).
#ifndef CGRANDCENTRAL_H
#define CGRANDCENTRAL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - Futex

/// Waits while `*word == expected`. `timeout_ns < 0` waits forever; otherwise it is a
/// relative timeout. Returns 0 when woken (or the value differed), ETIMEDOUT on timeout,
/// EINTR on a signal.
int gc_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
/// Wakes at most `count` threads waiting on `word`; returns how many were woken.
int gc_futex_wake(uint32_t *word, int count);

// MARK: - Clocks (nanoseconds)

uint64_t gc_uptime_ns(void);      // CLOCK_MONOTONIC
uint64_t gc_walltime_ns(void);    // CLOCK_REALTIME

// MARK: - Threads

/// Starts a detached thread running `body(argument)`. The new thread starts with every
/// signal blocked and restores the process's initial mask (captured at load) itself,
/// so no signal lands in the window, and the mask it passes on to processes it spawns
/// is the program's own, not an all-blocked one. Returns 0 or an errno.
int gc_thread_create(void (*body)(void *), void *argument, const char *name);

// MARK: - Fork (fork.c)

/// Reports a thread start (gc_thread_create calls it): a client bug while starting threads
/// is prohibited; otherwise the process is multithreaded from now on.
void gc_note_thread_start(void);
/// Whether the library has started a thread in this process (since the last fork).
bool gc_is_multithreaded(void);
/// Whether this process is the child of a fork taken while the parent was multithreaded.
bool gc_is_fork_child_of_multithreaded(void);
/// _dispatch_prohibit_transition_to_multithreaded: a client bug if threads already exist.
void gc_prohibit_multithreaded(bool prohibit);
/// Sets the engine's reset for the child of a fork (Runtime/Fork.swift), which the
/// pthread_atfork child handler calls when the parent was multithreaded.
void gc_fork_set_child_hook(void (*hook)(void));
/// The child handler, run by hand (dispatch_atfork_child).
void gc_fork_child_now(void);
/// The kernel thread id of the caller (cached per thread, forgotten in a forked child).
int32_t gc_thread_id(void);
/// The process id (cached, forgotten in a forked child).
int32_t gc_process_id(void);
/// The nice value of the calling thread (getpriority of its thread id).
int32_t gc_thread_nice(void);
/// The CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), in nanoseconds.
uint64_t gc_thread_cpu_ns(void);
/// Sets the calling thread's nice value (setpriority of its thread id). Returns 0 or an
/// errno (EACCES: lowering it needs CAP_SYS_NICE or RLIMIT_NICE).
int gc_thread_set_nice(int32_t nice);
/// The lowest nice value a thread of this process may set, as the kernel rules it: -20
/// with CAP_SYS_NICE in the effective set, else 20 - RLIMIT_NICE's soft limit (20 with the
/// usual limit of 0: no thread may lower its nice value at all; raising is always allowed).
int32_t gc_nice_floor(void);
/// Names thread `tid` of this process (what `top -H`, `ps -L` and gdb show), truncated to
/// the kernel's 15 characters. What `pthread_setname_np` does for another thread (writes
/// /proc/self/task/<tid>/comm), by thread id, so a thread that has exited is an ENOENT,
/// not a use of a dead `pthread_t`. Returns 0 or an errno.
int gc_thread_set_name(int32_t tid, const char *name);
/// True when the kernel reports thread `tid` of this process as running or runnable
/// ('R' in /proc/self/task/<tid>/stat). Used by the starvation monitor only.
bool gc_thread_is_runnable(int32_t tid);
/// True when thread `tid` of this process sleeps waiting for a lock: a futex wait the
/// way glibc's mutexes and malloc's arena locks wait (FUTEX_WAIT for the value 2, their
/// "locked, with waiters" state) or a priority-inheritance lock (FUTEX_LOCK_PI, as Swift's
/// Mutex). Condition variables and semaphores (FUTEX_WAIT_BITSET), other futex waits and
/// other system calls are not lock waits. Read from /proc/self/task/<tid>/syscall; used by
/// the starvation monitor only.
int gc_thread_in_lock_wait(int32_t tid);
/// CPUs this process may use: the affinity mask, further limited by a cgroup v2/v1 CPU quota.
int gc_active_cpu_count(void);
/// CPUs online (logical) and an estimate of physical cores.
int gc_logical_cpu_count(void);
int gc_physical_cpu_count(void);

// MARK: - Continuations
//
// A continuation is the fixed-size node every submitted work item travels in. It is
// 64 bytes, one cache line, recycled through a per-thread cache (see ContinuationCache).
// `next` is the intrusive link of the MPSC list a queue keeps; it is written by the
// producer that linked the node (release) and read by the thread that owns the drain
// (acquire). Every other field is written before the node is published and read only
// by the thread that runs it (the two exceptions, `slot.sync_loan` and `waiter_word`, are
// a parked dispatch_sync caller's and its waker's; QueueSync.swift).
//
// No field holds a reference count. `group` and `owner` are unretained: what keeps their
// objects alive is a self-reference each takes while it has work in flight (a group while
// its count is non-zero, a concurrent queue while it has width in use), so a node in
// flight needs no retain of its own.

/// The node's one word whose meaning depends on what the node is doing. Exactly one
/// meaning is live at a time, each under its own name; which one is told by the path
/// the node is on (its `flags`, or its place in the depot).
typedef union gc_continuation_slot_u {
    /// dispatch_after, until its timer fires: the queue to push the node onto, retained
    /// (After.swift: taken when armed, released once the node is pushed).
    void *after_queue;
    /// The first node of a batch in the ContinuationDepot: the next batch's first node, or
    /// NULL. Guarded by the depot's lock.
    struct gc_continuation_s *next_batch;
    /// A `syncWaiter` node lent to its caller (SyncLoan): the lender's SyncLoan, on the
    /// lender's stack. Stored before the release store of `waiter_word` that wakes the
    /// caller, read after its acquire load.
    void *sync_loan;
} gc_continuation_slot_t;

typedef struct gc_continuation_s {
    struct gc_continuation_s *next;
    void (*function)(void *);
    void *context;
    uintptr_t flags;      // ContinuationFlags (Swift)
    void *group;          // groupMember: the DispatchGroup to leave after running, unretained
                          // (the group's self-reference keeps it alive); else NULL
    void *owner;          // redirected: the concurrent queue whose width the item holds while it
                          // runs, unretained (the queue's self-reference keeps it alive); else NULL
    gc_continuation_slot_t slot;
    uintptr_t waiter_word;// syncWaiter/syncHandoff: the futex word (low 32 bits) the sync caller
                          // sleeps on, 0 until it may go on
} gc_continuation_t;

static inline gc_continuation_t *gc_continuation_load_next(gc_continuation_t *c) {
    return __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
}
static inline void gc_continuation_store_next(gc_continuation_t *c, gc_continuation_t *n) {
    __atomic_store_n(&c->next, n, __ATOMIC_RELEASE);
}
/// Asks the CPU to bring `p`'s cache line in for writing, ahead of a write there.
static inline void gc_prefetch_for_write(const void *p) {
    __builtin_prefetch(p, 1, 3);
}
static inline void gc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// MARK: - Futex words
//
// A futex word must have a stable address the kernel can sleep on, so these live in
// memory the engine allocates, and are touched through these helpers.
static inline uint32_t gc_word_load(uint32_t *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
static inline void gc_word_store(uint32_t *w, uint32_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }
static inline uint32_t gc_word_add(uint32_t *w, uint32_t v) { return __atomic_fetch_add(w, v, __ATOMIC_ACQ_REL); }
/// Sequentially consistent forms, for Dekker-style handshakes (store, then load the other side).
static inline uint32_t gc_word_exchange_seq_cst(uint32_t *w, uint32_t v) { return __atomic_exchange_n(w, v, __ATOMIC_SEQ_CST); }
static inline uint32_t gc_word_load_seq_cst(uint32_t *w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }
static inline bool gc_word_cas(uint32_t *w, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(w, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// Pointer-sized words (dispatch_once predicates).
static inline uintptr_t gc_uword_load(uintptr_t *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
static inline uintptr_t gc_uword_exchange(uintptr_t *w, uintptr_t v) { return __atomic_exchange_n(w, v, __ATOMIC_ACQ_REL); }
static inline bool gc_uword_cas(uintptr_t *w, uintptr_t *expected, uintptr_t desired) {
    return __atomic_compare_exchange_n(w, expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// MARK: - Per-thread state
//
// Owned by its thread: only the thread itself reads or writes its gc_thread_t.

/// One entry of a thread's held-queue stack (HeldQueues in the engine): a queue the thread
/// is draining, running a redirected item of, or holds for a dispatch_sync. Frames live on
/// the stack of the function that entered the queue and are linked innermost first, so
/// the stack is as deep as the program nests and costs no allocation. `queue` is an
/// unretained queue pointer whose low bit is set when the thread holds the queue
/// exclusively (its drain lock) rather than one unit of its width.
typedef struct gc_held_frame_s {
    struct gc_held_frame_s *outer;
    void *queue;
} gc_held_frame_t;

typedef struct gc_thread_s {
    gc_continuation_t *cache;      // free continuations, linked through `next`
    uint32_t cache_count;
    uint32_t reserved;
    gc_held_frame_t *held;         // the innermost held queue's frame, or NULL
    void *worker;                  // the pool worker running on this thread, or NULL
    void *apply;                   // the dispatch_apply this thread is helping with, or NULL
    uint64_t flags;
} gc_thread_t;

extern __thread gc_thread_t gc_thread_storage
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

static inline gc_thread_t *gc_thread_self(void) { return &gc_thread_storage; }

/// Makes `frame` (on the caller's stack, already holding its queue) the innermost held
/// queue. Paired with gc_held_leave on the same frame, in stack order.
static inline void gc_held_enter(gc_held_frame_t *frame) {
    frame->outer = gc_thread_storage.held;
    gc_thread_storage.held = frame;
}
static inline void gc_held_leave(gc_held_frame_t *frame) { gc_thread_storage.held = frame->outer; }
/// Installs a chain of frames already linked among themselves (`innermost` … `outermost`,
/// through `outer`), on top of the current ones. Returns the previous innermost frame,
/// which gc_held_restore puts back.
static inline gc_held_frame_t *gc_held_enter_chain(gc_held_frame_t *innermost, gc_held_frame_t *outermost) {
    gc_held_frame_t *previous = gc_thread_storage.held;
    outermost->outer = previous;
    gc_thread_storage.held = innermost;
    return previous;
}
static inline void gc_held_restore(gc_held_frame_t *previous) { gc_thread_storage.held = previous; }
/// The innermost frame, or NULL outside any queue.
static inline gc_held_frame_t *gc_held_top(void) { return gc_thread_storage.held; }

/// Arranges (once per thread) for the thread's continuation cache to go back to its slabs when the
/// thread exits, so threads that come and go do not leak their caches.
void gc_thread_register_cache_cleanup(void);

// MARK: - Non-escaping Swift closures (closure.c)

/// Call a closure that gc_with_closure_void / gc_with_closure_index (closure.c, reached
/// from Swift through @_silgen_name) stored; `closure` is the pointer those pass to their
/// body. Valid only until that call returns.
void gc_closure_call_void(void *closure);
void gc_closure_call_index(void *closure, long index);
void gc_closure_call_range(void *closure, long start, long end);

// MARK: - Diagnostics

/// Writes "GrandCentral: BUG IN CLIENT: <function>: <what>\n" to stderr with one write(2)
/// and traps (SIGILL on x86-64, as libdispatch does).
__attribute__((noreturn)) void gc_client_bug(const char *function, const char *what);
/// 1 when `symbol` lies in the image (executable or shared library) this code was loaded
/// from, by dladdr: the drop-in finds its own dispatch_async_f under libdispatch's soname.
int gc_is_this_image(const void *symbol);
/// The path of the image that holds `symbol` (dladdr), or "?".
const char *gc_image_path(const void *symbol);
/// Writes one line to stderr.
void gc_write_stderr(const char *line);

// MARK: - Memory

/// What the library's own allocations are for, named in the out-of-memory message.
typedef enum {
    GC_ALLOC_CONTINUATION = 0,  // work-item nodes (the per-thread caches' and depot's supply)
    GC_ALLOC_APPLY_STATE,       // dispatch_apply's registry of states
} gc_alloc_what_t;
/// malloc for the library's own bookkeeping. A failure is taken as transient first, as
/// libdispatch does: retried after a short sleep (1 ms, doubling to 64 ms; about 1 s in
/// all). If memory stays gone, writes "GrandCentral: out of memory: <what>" to stderr with
/// write(2) from static strings (nothing allocated) and aborts (SIGABRT at its default
/// action: a handler such as the Swift backtracer would need memory). Never NULL.
void *gc_alloc(size_t size, gc_alloc_what_t what);

// MARK: - Work-item slabs (platform.c)
//
// Work-item nodes (gc_continuation_t) are carved from slabs rather than malloc'd one by
// one: a slab is a page-aligned block of 63 cache lines, a header line (the count of its
// nodes not yet released) and GC_CONTINUATION_SLAB_NODES nodes, one line each. A node's
// slab is its address rounded down to the page. The per-thread caches and the depot
// (Runtime/Continuation.swift) recycle nodes without touching the header; a node leaves
// them only through gc_continuation_release, and the slab goes back to malloc when its
// last node does. 63 lines, not 64: glibc's header for the next chunk then fits before the
// next page boundary, so consecutive slabs take 4 KiB each (64 lines would take 8).
// Costs, measured against malloc per node: a node is 64 bytes instead of malloc's 80; one
// malloc per 62 nodes; a release is one atomic per run of nodes from one slab instead of
// a free per node; nodes taken from a new slab are adjacent, so a backlog built from them
// is drained front to back through memory. The price: a slab is not reused until all 62
// of its nodes have been released, so a few long-lived nodes can keep up to 62 times their
// size (at most a page each) alive.
enum { GC_CONTINUATION_SLAB_NODES = 62 };
/// A new slab: its GC_CONTINUATION_SLAB_NODES nodes linked through `next` in address order
/// (the last one's `next` is NULL), all counted as handed out. Never NULL (gc_alloc's
/// retry, then the out-of-memory message).
gc_continuation_t *gc_continuation_slab_new(void);
/// Releases a chain of nodes (linked through `next`, NULL-terminated) to their slabs; a
/// slab whose last node comes back is freed. Any thread; the nodes must not be touched
/// afterwards.
void gc_continuation_release(gc_continuation_t *chain);

#ifdef __cplusplus
}
#endif
#endif
