/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * source.h: dispatch sources, which turn events — a timer, a readable or writable
 * descriptor, a signal, a process's exit, a change to a file, data the program merges
 * itself — into calls of an event handler on a queue.
 *
 * A source is created inactive: set its handlers (and, for a timer, its schedule), then
 * start it with dispatch_activate() or dispatch_resume(). Events that arrive before the
 * handler runs are coalesced into the value dispatch_source_get_data() returns inside the
 * handler (added, or-ed or replaced, depending on the type). The handlers run on the
 * source's target queue, never on the library's event thread, and the event handler never
 * runs concurrently with itself. dispatch_suspend() holds events back (they coalesce);
 * dispatch_source_cancel() stops the source: the cancel handler then runs exactly once,
 * after the last event handler has returned — the moment a descriptor the source watched
 * may be closed. The library never closes a caller's descriptor. Releasing the last
 * reference of an active source cancels it without running its cancel handler.
 *
 * Out of resources. A source whose registration needs a resource it cannot get when it is
 * activated — a process source's pidfd, a vnode source's inotify instance or watch, failing
 * with EMFILE, ENFILE, ENOMEM or ENOSPC — is cancelled by the library, every kind alike:
 * its cancel handler runs (on its target queue, as for dispatch_source_cancel()), its event
 * handler never does, and dispatch_source_testcancel() returns non-zero from then on. With
 * GRANDCENTRAL_DEBUG set, a line `GrandCentral: debug: source: ...` names the call that
 * failed. (A source is not kept waiting for descriptors to be freed: nothing tells the
 * library when that happens.) Timer, signal, read and write sources need no descriptor of
 * their own: the event loop's descriptors are made when the library is loaded, so these
 * keep working at the descriptor limit.
 */
#ifndef __DISPATCH_SOURCE__
#define __DISPATCH_SOURCE__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/*!
 * @typedef dispatch_source_t
 * A source of events delivered to a queue.
 */
DISPATCH_SOURCE_DECL(dispatch_source);

/*!
 * @typedef dispatch_source_type_t
 * The kind of event a source watches; it says what the handle and the mask of
 * dispatch_source_create() mean. One of the DISPATCH_SOURCE_TYPE_* constants.
 */
typedef const struct dispatch_source_type_s *dispatch_source_type_t;

/*!
 * @const DISPATCH_SOURCE_TYPE_DATA_ADD
 * Data the program merges with dispatch_source_merge_data(), added up until the handler
 * runs. Handle and mask: 0. Merging 0 does nothing.
 */
#define DISPATCH_SOURCE_TYPE_DATA_ADD (&_dispatch_source_type_data_add)
DISPATCH_SOURCE_TYPE_DECL(data_add);

/*!
 * @const DISPATCH_SOURCE_TYPE_DATA_OR
 * Like DATA_ADD, but merged values are combined with bitwise or.
 */
#define DISPATCH_SOURCE_TYPE_DATA_OR (&_dispatch_source_type_data_or)
DISPATCH_SOURCE_TYPE_DECL(data_or);

/*!
 * @const DISPATCH_SOURCE_TYPE_DATA_REPLACE
 * Like DATA_ADD, but each merged value replaces the one not yet delivered. Merging 0 does
 * not fire the handler.
 */
#define DISPATCH_SOURCE_TYPE_DATA_REPLACE (&_dispatch_source_type_data_replace)
DISPATCH_SOURCE_TYPE_DECL(data_replace);

/*!
 * @const DISPATCH_SOURCE_TYPE_PROC
 * A process (handle: its pid, a child or not) and the events in the mask
 * (DISPATCH_PROC_*). On Linux only DISPATCH_PROC_EXIT is reported; FORK, EXEC and SIGNAL
 * are accepted in the mask and never reported (Linux tells no other process about them).
 * The data is the events seen. The source only watches: it never reaps a child, so the
 * program's own waitpid() still gets the exit status (a child that exited and was not
 * yet reaped counts as exited). A pid with no process behind it when the source is
 * activated reports DISPATCH_PROC_EXIT at once, as libdispatch does on Darwin (the
 * toolchain's libdispatch has no process sources on Linux).
 */
#define DISPATCH_SOURCE_TYPE_PROC (&_dispatch_source_type_proc)
DISPATCH_SOURCE_TYPE_DECL(proc);

/*!
 * @const DISPATCH_SOURCE_TYPE_READ
 * A descriptor (the handle) with data to read. Mask: 0. The data is the number of bytes
 * that can be read (0 at end of file or on an error: read(2) tells which); for a regular
 * file, which is always readable, the bytes from the file position to the end of the file;
 * for a listening socket, the connections waiting to be accepted (the exact count for TCP;
 * 1 for other families, where Linux cannot tell; libdispatch on Linux reports 1 for all).
 * The handler runs again after it returns for as long as the descriptor stays readable.
 */
#define DISPATCH_SOURCE_TYPE_READ (&_dispatch_source_type_read)
DISPATCH_SOURCE_TYPE_DECL(read);

/*!
 * @const DISPATCH_SOURCE_TYPE_SIGNAL
 * A signal (the handle: 1 to 64) delivered to the process. Mask: 0. The data is the number
 * of times the signal was received since the handler last ran (signals the kernel itself
 * merges while one is pending count once).
 *
 * What a program may rely on: the source receives the signal whether or not the program
 * blocked it (except a raise() in a thread that blocks it: that stays pending there), and from
 * the return of dispatch_activate() until the last source for the signal is cancelled its
 * default action (ending the process, for most) does not happen. A handler the program
 * installed with sigaction() before creating the source keeps being called alongside the
 * source for a signal sent to a thread (raise(), pthread_kill()); one sent to the process
 * (kill()) may be taken by the library's thread before a thread of the program runs the
 * handler, and is then only counted. When the last source for a signal is cancelled, the
 * program's own disposition is restored. A disposition the program sets *after* activating
 * a source replaces the library's: with SIG_IGN the kernel then discards the signal and the
 * source sees nothing (set SIG_IGN first, as on Darwin, if that is the intent).
 *
 * Which signals the library's threads block: as libdispatch's, every thread the library
 * starts blocks the asynchronous signals (all but SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV,
 * SIGSYS, SIGPIPE and SIGPROF) on top of the mask the program had when it loaded the
 * library, so a program's handler for a signal sent to the process runs on one of the
 * program's threads, never in the middle of a work item. Unlike libdispatch, a worker leaves
 * unblocked a signal that a source watches (from its next work item on; at once on a worker
 * that activates the source), so a raise() from a work item reaches the source and runs the
 * program's handler in that work item, as raise() does; an instance sent to the process that
 * a worker takes is counted and its program handler runs on the main thread instead. The
 * event thread blocks every signal. Processes spawned from a work item (posix_spawn, fork,
 * system) inherit the worker's mask: pass POSIX_SPAWN_SETSIGMASK to give them another.
 */
#define DISPATCH_SOURCE_TYPE_SIGNAL (&_dispatch_source_type_signal)
DISPATCH_SOURCE_TYPE_DECL(signal);

/*!
 * @const DISPATCH_SOURCE_TYPE_TIMER
 * A timer, scheduled with dispatch_source_set_timer(). Handle: 0 (see
 * dispatch_source_create). Mask: 0 or DISPATCH_TIMER_STRICT. The data is the number of fires since the handler last ran.
 */
#define DISPATCH_SOURCE_TYPE_TIMER (&_dispatch_source_type_timer)
DISPATCH_SOURCE_TYPE_DECL(timer);

/*!
 * @const DISPATCH_SOURCE_TYPE_VNODE
 * Changes to a file (handle: an open descriptor of it) in the mask (DISPATCH_VNODE_*),
 * watched with inotify. The data is the events seen. Activation returns once the file is
 * watched. DELETE is reported when the last link goes (even while a descriptor keeps the
 * file alive), LINK when the link count changes, EXTEND with a WRITE that grew the file;
 * on a directory, WRITE when entries are created, removed or renamed. FUNLOCK is accepted
 * and never reported. A descriptor that cannot be watched (closed, invalid) gives a
 * source that never fires; its cancel handler still runs. Keep the descriptor open until
 * the cancel handler has run.
 */
#define DISPATCH_SOURCE_TYPE_VNODE (&_dispatch_source_type_vnode)
DISPATCH_SOURCE_TYPE_DECL(vnode);

/*!
 * @const DISPATCH_SOURCE_TYPE_WRITE
 * A descriptor (the handle) with buffer space to write into. Mask: 0. The data is an
 * estimate of the space (1 when it cannot be told).
 */
#define DISPATCH_SOURCE_TYPE_WRITE (&_dispatch_source_type_write)
DISPATCH_SOURCE_TYPE_DECL(write);

/*! @typedef dispatch_source_proc_flags_t  Events of a process source. */
typedef unsigned long dispatch_source_proc_flags_t;
/*! The process exited. */
#define DISPATCH_PROC_EXIT 0x80000000
/*! The process forked (not reported on Linux). */
#define DISPATCH_PROC_FORK 0x40000000
/*! The process called exec (not reported on Linux). */
#define DISPATCH_PROC_EXEC 0x20000000
/*! The process received a signal (not reported on Linux). */
#define DISPATCH_PROC_SIGNAL 0x08000000

/*! @typedef dispatch_source_vnode_flags_t  Events of a vnode source. */
typedef unsigned long dispatch_source_vnode_flags_t;
/*! The file was deleted (its last link removed). */
#define DISPATCH_VNODE_DELETE 0x1
/*! The file's contents were written. */
#define DISPATCH_VNODE_WRITE 0x2
/*! The file grew. */
#define DISPATCH_VNODE_EXTEND 0x4
/*! The file's metadata (permissions, owner, times) changed. */
#define DISPATCH_VNODE_ATTRIB 0x8
/*! The file's link count changed. */
#define DISPATCH_VNODE_LINK 0x10
/*! The file was renamed or moved. */
#define DISPATCH_VNODE_RENAME 0x20
/*! The file system holding the file was unmounted. */
#define DISPATCH_VNODE_REVOKE 0x40
/*! A lock on the file was released (not reported on Linux). */
#define DISPATCH_VNODE_FUNLOCK 0x100

/*! @typedef dispatch_source_timer_flags_t  Flags of a timer source (its mask). */
typedef unsigned long dispatch_source_timer_flags_t;
/*! Fire as close to the deadline as possible: the leeway is not widened. */
#define DISPATCH_TIMER_STRICT 0x1


/*!
 * @function dispatch_source_create
 * Creates an inactive source of `type` on `handle` with `mask`, whose handlers run on
 * `queue` (NULL: the default-priority global queue). Returns NULL when the type does not
 * accept the handle or the mask, by this table (libdispatch's rules on Linux, checked
 * against it; PROC and VNODE, which it lacks there, follow the same pattern):
 *
 *   type                  handle accepted              mask accepted
 *   DATA_ADD, DATA_OR,    0                            0
 *     DATA_REPLACE
 *   READ, WRITE           0 ... INT_MAX (a descriptor;  0
 *                         not checked for being open)
 *   SIGNAL                1 ... 64                     0
 *   TIMER                 0 ... 3 (1, 2, 3 are         0, DISPATCH_TIMER_STRICT, 0x2
 *                         libdispatch's private clock  (libdispatch's private
 *                         ids; here they act as 0:     BACKGROUND, no effect), 0x3
 *                         the start time picks the
 *                         clock)
 *   PROC                  1 ... INT_MAX (a pid)        any of DISPATCH_PROC_*
 *   VNODE                 0 ... INT_MAX (a descriptor) any of DISPATCH_VNODE_*
 *
 * Any other handle or mask bit gives NULL (so does a type that is not a source type).
 */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_source_t
dispatch_source_create(dispatch_source_type_t type, uintptr_t handle, uintptr_t mask,
		dispatch_queue_t queue);

#ifdef __BLOCKS__
/*!
 * @function dispatch_source_set_event_handler
 * Sets the block that runs, on the target queue, for the source's events (NULL: none).
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_event_handler(dispatch_source_t source, dispatch_block_t handler);
#endif

/*!
 * @function dispatch_source_set_event_handler_f
 * dispatch_source_set_event_handler() with a function, called with the source's context
 * (dispatch_get_context(), read at each call).
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_event_handler_f(dispatch_source_t source, dispatch_function_t handler);

#ifdef __BLOCKS__
/*!
 * @function dispatch_source_set_cancel_handler
 * Sets the block that runs once after the source is cancelled and its last event handler
 * has returned.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_cancel_handler(dispatch_source_t source, dispatch_block_t handler);
#endif

/*!
 * @function dispatch_source_set_cancel_handler_f
 * dispatch_source_set_cancel_handler() with a function, called with the source's context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_cancel_handler_f(dispatch_source_t source, dispatch_function_t handler);

/*!
 * @function dispatch_source_cancel
 * Cancels the source: no event handler starts after this; the cancel handler follows once
 * the source has stopped watching (and is not suspended). Cancelling twice does nothing.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_cancel(dispatch_source_t source);

/*!
 * @function dispatch_source_testcancel
 * Non-zero once the source has been cancelled.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
intptr_t
dispatch_source_testcancel(dispatch_source_t source);

/*!
 * @function dispatch_source_get_handle
 * The handle the source was created with (descriptor, pid, signal number).
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
uintptr_t
dispatch_source_get_handle(dispatch_source_t source);

/*!
 * @function dispatch_source_get_mask
 * The mask the source was created with.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
uintptr_t
dispatch_source_get_mask(dispatch_source_t source);

/*!
 * @function dispatch_source_get_data
 * Inside the event handler, the data of the events it runs for (see the types); outside
 * it, the data of the last delivery.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
uintptr_t
dispatch_source_get_data(dispatch_source_t source);

/*!
 * @function dispatch_source_merge_data
 * Merges `value` into a DATA_ADD, DATA_OR or DATA_REPLACE source and fires it (0 merges
 * nothing). Any thread; cheap enough to call at a high rate. A non-zero value merged
 * into a source of another type is a client bug (it aborts); 0 is ignored.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_merge_data(dispatch_source_t source, uintptr_t value);

/*!
 * @function dispatch_source_set_timer
 * Schedules a timer source: first fire at `start` (DISPATCH_TIME_NOW, a dispatch_time(), a
 * dispatch_walltime() — which follows the wall clock — or DISPATCH_TIME_FOREVER: never),
 * then every `interval` nanoseconds (DISPATCH_TIME_FOREVER: once), each fire no earlier
 * than due and, when other timers allow, up to `leeway` later. Fire k is due at
 * start + k * interval: lateness does not accumulate. Setting it again replaces the
 * schedule.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_timer(dispatch_source_t source, dispatch_time_t start, uint64_t interval,
		uint64_t leeway);

#ifdef __BLOCKS__
/*!
 * @function dispatch_source_set_registration_handler
 * Sets the block that runs once on the target queue when the activated source starts
 * watching, before its first event handler.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_registration_handler(dispatch_source_t source, dispatch_block_t handler);
#endif

/*!
 * @function dispatch_source_set_registration_handler_f
 * dispatch_source_set_registration_handler() with a function, called with the source's
 * context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_source_set_registration_handler_f(dispatch_source_t source, dispatch_function_t handler);


#endif /* __DISPATCH_SOURCE__ */
