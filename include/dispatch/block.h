/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * block.h: work-item blocks ("dispatch block objects").
 *
 * dispatch_block_create() wraps a block in a new block that can also be waited on,
 * observed, and cancelled, and that carries flags (for example "run as a barrier")
 * which the submitting calls honour. The result is an ordinary heap block: call it,
 * submit it with dispatch_async() and friends, copy it with Block_copy() and give it
 * back with Block_release().
 *
 * Rules, as in libdispatch: a work-item block may run any number of times, or it may be
 * waited on once and run once; any other mix (waiting twice, running again after a
 * wait completed, waiting after it ran twice) is a client bug and aborts. Passing a
 * block that dispatch_block_create() did not make to the wait, notify, cancel and
 * testcancel calls is also a client bug.
 *
 * Blocks only: everything here needs a compiler with blocks (clang -fblocks).
 */
#ifndef __DISPATCH_BLOCK__
#define __DISPATCH_BLOCK__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

#ifdef __BLOCKS__

/*!
 * @typedef dispatch_block_flags_t
 * Options for dispatch_block_create(). They may be combined with `|`.
 */
DISPATCH_OPTIONS(dispatch_block_flags, unsigned long,
	/* Run as a barrier when submitted to a concurrent queue (see
	 * dispatch_barrier_async()). Has no effect when called directly or run by
	 * dispatch_sync() onto a serial queue. */
	DISPATCH_BLOCK_BARRIER = 0x1,
	/* Do not take on the submitting thread's execution context (QoS, activity).
	 * Accepted; GrandCentral keeps no such context. */
	DISPATCH_BLOCK_DETACHED = 0x2,
	/* Take the execution context of the thread calling dispatch_block_create()
	 * rather than of the one submitting it. Accepted, no effect on Linux. */
	DISPATCH_BLOCK_ASSIGN_CURRENT = 0x4,
	/* Carry no QoS class: run at the QoS of the queue. */
	DISPATCH_BLOCK_NO_QOS_CLASS = 0x8,
	/* Prefer the queue's QoS over the block's own. */
	DISPATCH_BLOCK_INHERIT_QOS_CLASS = 0x10,
	/* Prefer the block's QoS over the queue's. */
	DISPATCH_BLOCK_ENFORCE_QOS_CLASS = 0x20,
);

/*!
 * @function dispatch_block_create
 * Returns a new work-item block that runs `block` (copied) unless cancelled first.
 * Returns NULL if `flags` contains an unknown bit. Release the result with
 * Block_release().
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_RETURNS_RETAINED_BLOCK DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_block_t
dispatch_block_create(dispatch_block_flags_t flags, dispatch_block_t block);

/*!
 * @function dispatch_block_create_with_qos_class
 * dispatch_block_create() with a QoS class and a relative priority in
 * [QOS_MIN_RELATIVE_PRIORITY, 0] for the block. Returns NULL if the class, the priority
 * or the flags are invalid.
 */
DISPATCH_EXPORT DISPATCH_NONNULL4 DISPATCH_RETURNS_RETAINED_BLOCK DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_block_t
dispatch_block_create_with_qos_class(dispatch_block_flags_t flags,
		dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t block);

/*!
 * @function dispatch_block_perform
 * Runs the block now, on the calling thread, as a work item with the given flags would
 * run; cheaper than creating, calling and releasing one. Unknown flags are a client bug.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NOTHROW
void
dispatch_block_perform(dispatch_block_flags_t flags, DISPATCH_NOESCAPE dispatch_block_t block);

/*!
 * @function dispatch_block_wait
 * Waits until the work-item block has finished (run, or been cancelled and then
 * dequeued or released), or until the deadline. Returns 0 if it finished, non-zero on
 * timeout; after a timeout the block may be waited on again.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
intptr_t
dispatch_block_wait(dispatch_block_t block, dispatch_time_t timeout);

/*!
 * @function dispatch_block_notify
 * Submits `notification_block` to `queue` once the work-item block has finished (at
 * once if it already has).
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_block_notify(dispatch_block_t block, dispatch_queue_t queue,
		dispatch_block_t notification_block);

/*!
 * @function dispatch_block_cancel
 * Cancels the work-item block: if it has not started, it will not run its body; when
 * it is next invoked (or released) it finishes at once, so waiters and notifications
 * still fire. A block already running is not interrupted.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_block_cancel(dispatch_block_t block);

/*!
 * @function dispatch_block_testcancel
 * Returns non-zero if the work-item block has been cancelled, 0 otherwise.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
intptr_t
dispatch_block_testcancel(dispatch_block_t block);

#endif /* __BLOCKS__ */

#endif /* __DISPATCH_BLOCK__ */
