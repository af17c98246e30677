/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * private.h: the few calls of libdispatch's private API that programs written for
 * Linux use. Not included by <dispatch/dispatch.h>; include it after, or instead of it.
 */
#ifndef __DISPATCH_PRIVATE__
#define __DISPATCH_PRIVATE__

#include <dispatch/dispatch.h>

/* Flag for dispatch_get_global_queue(): a global queue that starts a new thread for
 * its work rather than wait when all pool threads are busy. */
#define DISPATCH_QUEUE_OVERCOMMIT 0x2ull

/* Special widths for dispatch_queue_set_width(). */
#define DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS (-1)       /* CPUs this process may use now */
#define DISPATCH_QUEUE_WIDTH_MAX_PHYSICAL_CPUS (-2) /* physical cores */
#define DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS (-3)  /* logical CPUs */

/*!
 * @function dispatch_queue_set_width
 * Limits how many work items of a concurrent queue may run at once: a positive count,
 * or one of the DISPATCH_QUEUE_WIDTH_* values, resolved on this machine when the call is
 * made. Meant for concurrent queues the caller created.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_queue_set_width(dispatch_queue_t queue, long width);

/*!
 * @function dispatch_queue_attr_make_with_overcommit
 * Returns `attr` with the overcommit property set or cleared: an overcommitting queue
 * gets a thread of its own when the pool is busy, rather than waiting for one.
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
dispatch_queue_attr_t
dispatch_queue_attr_make_with_overcommit(dispatch_queue_attr_t attr, bool overcommit);

#endif /* __DISPATCH_PRIVATE__ */
