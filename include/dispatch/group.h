/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * group.h: groups, which count outstanding work so that a thread can wait for all of
 * it, or have a block submitted when it has all finished.
 */
#ifndef __DISPATCH_GROUP__
#define __DISPATCH_GROUP__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/*!
 * @typedef dispatch_group_t
 * A count of work items in flight. The group is "empty" when the count is zero.
 */
DISPATCH_DECL(dispatch_group);

/*!
 * @function dispatch_group_create
 * Creates an empty group. Release it with dispatch_release().
 */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_group_t
dispatch_group_create(void);

#ifdef __BLOCKS__
/*!
 * @function dispatch_group_async
 * Submits a block to the queue as part of the group: the group counts it from now
 * until the block has returned.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_group_async(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block);
#endif

/*!
 * @function dispatch_group_async_f
 * dispatch_group_async() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL2 DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_group_async_f(dispatch_group_t group, dispatch_queue_t queue, void *context,
		dispatch_function_t work);

/*!
 * @function dispatch_group_wait
 * Waits until the group is empty or the deadline passes. Returns 0 if the group became
 * empty, non-zero on timeout.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
intptr_t
dispatch_group_wait(dispatch_group_t group, dispatch_time_t timeout);

#ifdef __BLOCKS__
/*!
 * @function dispatch_group_notify
 * Submits the block to the queue once the group is empty (at once if it already is).
 * Several notifications may be pending; each fires once.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_group_notify(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block);
#endif

/*!
 * @function dispatch_group_notify_f
 * dispatch_group_notify() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL2 DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_group_notify_f(dispatch_group_t group, dispatch_queue_t queue, void *context,
		dispatch_function_t work);

/*!
 * @function dispatch_group_enter
 * Counts one more unit of outstanding work in the group, for work not submitted with
 * dispatch_group_async(). Balance it with dispatch_group_leave().
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_group_enter(dispatch_group_t group);

/*!
 * @function dispatch_group_leave
 * Marks one unit of outstanding work done. Leaving more often than entering is a client
 * bug and aborts.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_group_leave(dispatch_group_t group);

#endif /* __DISPATCH_GROUP__ */
