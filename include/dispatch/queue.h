/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * queue.h: queues, and the calls that submit work to them.
 *
 * A queue runs the work items submitted to it on the library's thread pool. A serial
 * queue runs one item at a time in submission order; a concurrent queue starts items in
 * submission order and may run many at once, except that a barrier item runs alone.
 * Every queue forwards its work to a target queue, ending at one of the global
 * (root) queues, one per quality-of-service class. The main queue runs its work on the
 * program's main thread, once that thread calls dispatch_main().
 *
 * Every call that takes a block has a `_f` twin taking a function and a context pointer;
 * the block forms exist only when the compiler supports blocks (clang -fblocks).
 */
#ifndef __DISPATCH_QUEUE__
#define __DISPATCH_QUEUE__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/* MARK: - Types */

/*!
 * @typedef dispatch_queue_t
 * A queue of work items. The more specific types below are the same pointer, named
 * after what kind of queue a call returns; in C++ they convert to dispatch_queue_t.
 */
DISPATCH_DECL(dispatch_queue);
/* One of the global (root) queues returned by dispatch_get_global_queue(). */
DISPATCH_DECL_SUBCLASS(dispatch_queue_global, dispatch_queue);
/* A queue that runs one work item at a time. */
DISPATCH_DECL_SUBCLASS(dispatch_queue_serial, dispatch_queue);
/* The main queue, a serial queue drained by the main thread. */
DISPATCH_DECL_SUBCLASS(dispatch_queue_main, dispatch_queue_serial);
/* A queue that may run several work items at once. */
DISPATCH_DECL_SUBCLASS(dispatch_queue_concurrent, dispatch_queue);

/*!
 * @typedef dispatch_queue_attr_t
 * Describes a queue to create: serial or concurrent, initially active or not, its QoS.
 * Attribute objects are immutable and never need releasing.
 */
DISPATCH_DECL(dispatch_queue_attr);

/* MARK: - Quality of service
 *
 * Linux has no <sys/qos.h>, so qos_class_t and its values are declared here, with
 * the values of Apple's header. */
#if defined(__has_include)
#if __has_include(<sys/qos.h>)
#include <sys/qos.h>
#define __DISPATCH_HAVE_SYS_QOS 1
#endif
#endif
#ifndef __DISPATCH_HAVE_SYS_QOS
/*!
 * @typedef qos_class_t
 * How urgent work is, from the user's point of view. Higher classes are served first.
 */
DISPATCH_ENUM(qos_class, unsigned int,
	/* Work the user is interacting with, such as drawing a frame. */
	QOS_CLASS_USER_INTERACTIVE = 0x21,
	/* Work the user asked for and is waiting on. */
	QOS_CLASS_USER_INITIATED = 0x19,
	/* The class of work that does not say otherwise. */
	QOS_CLASS_DEFAULT = 0x15,
	/* Long-running work whose progress the user may follow. */
	QOS_CLASS_UTILITY = 0x11,
	/* Work the user does not see, such as indexing or backups. */
	QOS_CLASS_BACKGROUND = 0x09,
	/* No class given: inherit one from the context. */
	QOS_CLASS_UNSPECIFIED = 0x00,
);
/* The lowest relative priority within a class; 0 is the highest. */
#define QOS_MIN_RELATIVE_PRIORITY (-15)
#endif

/*!
 * @typedef dispatch_qos_class_t
 * The QoS class type dispatch calls take.
 */
typedef qos_class_t dispatch_qos_class_t;

/* MARK: - Submitting work */

#ifdef __BLOCKS__
/*!
 * @function dispatch_async
 * Submits a block to run on the queue and returns at once. The block is copied, and
 * released after it has run.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_async(dispatch_queue_t queue, dispatch_block_t block);
#endif

/*!
 * @function dispatch_async_f
 * Submits work(context) to run on the queue and returns at once.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_async_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_sync
 * Submits a block to the queue and returns once it has run. Calling this on the serial
 * queue that is running the caller deadlocks; the library aborts with a message instead
 * when it can tell.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_sync(dispatch_queue_t queue, DISPATCH_NOESCAPE dispatch_block_t block);
#endif

/*!
 * @function dispatch_sync_f
 * Submits work(context) to the queue and returns once it has run. The work usually
 * runs on the calling thread.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_sync_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_async_and_wait
 * Submits a block to the queue and waits until it has run, like dispatch_sync(), but
 * the block runs the way asynchronous work does (on the queue's threads if needed),
 * which matters for queues bound to a thread such as the main queue.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_async_and_wait(dispatch_queue_t queue, DISPATCH_NOESCAPE dispatch_block_t block);
#endif

/*!
 * @function dispatch_async_and_wait_f
 * dispatch_async_and_wait() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_async_and_wait_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_barrier_async
 * Submits a block that runs alone: on a concurrent queue it starts once everything
 * submitted before it has finished, and nothing submitted after it starts until it has
 * finished. On a serial queue it is the same as dispatch_async().
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_barrier_async(dispatch_queue_t queue, dispatch_block_t block);
#endif

/*!
 * @function dispatch_barrier_async_f
 * dispatch_barrier_async() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_barrier_async_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_barrier_sync
 * Submits a barrier block (see dispatch_barrier_async()) and returns once it has run.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_barrier_sync(dispatch_queue_t queue, DISPATCH_NOESCAPE dispatch_block_t block);
#endif

/*!
 * @function dispatch_barrier_sync_f
 * dispatch_barrier_sync() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_barrier_sync_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_barrier_async_and_wait
 * Submits a barrier block and waits for it, with the execution rules of
 * dispatch_async_and_wait().
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_barrier_async_and_wait(dispatch_queue_t queue,
		DISPATCH_NOESCAPE dispatch_block_t block);
#endif

/*!
 * @function dispatch_barrier_async_and_wait_f
 * dispatch_barrier_async_and_wait() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_barrier_async_and_wait_f(dispatch_queue_t queue, void *context,
		dispatch_function_t work);

#ifdef __BLOCKS__
/*!
 * @function dispatch_after
 * Submits a block to the queue once the deadline `when` has passed. With
 * DISPATCH_TIME_NOW it behaves like dispatch_async(); DISPATCH_TIME_FOREVER is not a
 * valid deadline.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_after(dispatch_time_t when, dispatch_queue_t queue, dispatch_block_t block);
#endif

/*!
 * @function dispatch_after_f
 * dispatch_after() with a function and context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_after_f(dispatch_time_t when, dispatch_queue_t queue, void *context,
		dispatch_function_t work);

/* Pass as the queue of dispatch_apply() to let the library pick where the iterations
 * run (the global queue of the caller's QoS). */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define DISPATCH_APPLY_AUTO (static_cast<dispatch_queue_t>(nullptr))
#elif defined(__cplusplus)
#define DISPATCH_APPLY_AUTO (static_cast<dispatch_queue_t>(0))
#else
#define DISPATCH_APPLY_AUTO ((dispatch_queue_t)0)
#endif

#ifdef __BLOCKS__
/*!
 * @function dispatch_apply
 * Calls block(i) for every i in [0, iterations), in parallel where the queue allows,
 * and returns when all calls have finished. The calling thread takes part.
 */
DISPATCH_EXPORT DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_apply(size_t iterations, dispatch_queue_t queue,
		DISPATCH_NOESCAPE void (^block)(size_t iteration));
#endif

/*!
 * @function dispatch_apply_f
 * dispatch_apply() calling work(context, i).
 */
DISPATCH_EXPORT DISPATCH_NONNULL4 DISPATCH_NOTHROW
void
dispatch_apply_f(size_t iterations, dispatch_queue_t queue, void *context,
		void (*work)(void *context, size_t iteration));

/* MARK: - Well-known queues */

/*!
 * @function dispatch_get_current_queue
 * Returns the queue running the caller (a global queue outside any queue). Deprecated:
 * the answer is ambiguous with target queues; use dispatch_queue_set_specific() and
 * dispatch_get_specific() to identify a context, or dispatch_assert_queue() to check one.
 */
DISPATCH_EXPORT DISPATCH_PURE DISPATCH_WARN_RESULT DISPATCH_NOTHROW
DISPATCH_DEPRECATED("ambiguous with target queues: use dispatch_get_specific() or dispatch_assert_queue()")
dispatch_queue_t
dispatch_get_current_queue(void);

/* The main queue object. Its address is the main queue's handle; use
 * dispatch_get_main_queue() rather than naming it. */
DISPATCH_EXPORT struct dispatch_queue_s _dispatch_main_q;

/*!
 * @function dispatch_get_main_queue
 * Returns the main queue: a serial queue whose work runs on the main thread once it
 * calls dispatch_main(). It needs no retain or release.
 */
DISPATCH_INLINE DISPATCH_ALWAYS_INLINE DISPATCH_CONST DISPATCH_NOTHROW
dispatch_queue_main_t
dispatch_get_main_queue(void)
{
	return DISPATCH_GLOBAL_OBJECT(dispatch_queue_main_t, _dispatch_main_q);
}

/* Priorities of the global queues, from before QoS classes; each maps to one class. */
#define DISPATCH_QUEUE_PRIORITY_HIGH 2             /* QOS_CLASS_USER_INITIATED */
#define DISPATCH_QUEUE_PRIORITY_DEFAULT 0          /* QOS_CLASS_DEFAULT */
#define DISPATCH_QUEUE_PRIORITY_LOW (-2)           /* QOS_CLASS_UTILITY */
#define DISPATCH_QUEUE_PRIORITY_BACKGROUND INT16_MIN /* QOS_CLASS_BACKGROUND */

typedef long dispatch_queue_priority_t;

/*!
 * @function dispatch_get_global_queue
 * Returns the global concurrent queue for a QoS class (QOS_CLASS_*) or a legacy
 * priority (DISPATCH_QUEUE_PRIORITY_*). `flags` is reserved: pass 0. Global queues need
 * no retain or release; suspending them has no effect. Returns NULL for an unknown
 * class or flag.
 */
DISPATCH_EXPORT DISPATCH_CONST DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_queue_global_t
dispatch_get_global_queue(intptr_t identifier, uintptr_t flags);

/* MARK: - Queue attributes */

/* Attribute for a serial queue (the default). */
#define DISPATCH_QUEUE_SERIAL NULL

/* The concurrent-queue attribute object. Use DISPATCH_QUEUE_CONCURRENT rather than
 * naming it. */
DISPATCH_EXPORT struct dispatch_queue_attr_s _dispatch_queue_attr_concurrent;

/* Attribute for a concurrent queue. */
#define DISPATCH_QUEUE_CONCURRENT \
		DISPATCH_GLOBAL_OBJECT(dispatch_queue_attr_t, _dispatch_queue_attr_concurrent)

/* Attributes for queues that start inactive: work submitted to them waits until
 * dispatch_activate(). */
#define DISPATCH_QUEUE_SERIAL_INACTIVE \
		dispatch_queue_attr_make_initially_inactive(DISPATCH_QUEUE_SERIAL)
#define DISPATCH_QUEUE_CONCURRENT_INACTIVE \
		dispatch_queue_attr_make_initially_inactive(DISPATCH_QUEUE_CONCURRENT)

/*!
 * @function dispatch_queue_attr_make_initially_inactive
 * Returns `attr` (NULL means serial) with the "created inactive" property added. An
 * inactive queue runs nothing, and may still change its target queue, until
 * dispatch_activate().
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
dispatch_queue_attr_t
dispatch_queue_attr_make_initially_inactive(dispatch_queue_attr_t attr);

/*!
 * @typedef dispatch_autorelease_frequency_t
 * When a queue drains an autorelease pool around its work. Linux has no autorelease
 * pools; the setting is accepted and has no effect.
 */
DISPATCH_ENUM(dispatch_autorelease_frequency, unsigned long,
	/* Take the setting from the target queue (the default). */
	DISPATCH_AUTORELEASE_FREQUENCY_INHERIT = 0,
	/* A pool around each work item. */
	DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM = 1,
	/* No pool. */
	DISPATCH_AUTORELEASE_FREQUENCY_NEVER = 2,
);

/*!
 * @function dispatch_queue_attr_make_with_autorelease_frequency
 * Returns `attr` with the autorelease frequency set; `attr` unchanged for an unknown
 * frequency (as libdispatch does).
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
dispatch_queue_attr_t
dispatch_queue_attr_make_with_autorelease_frequency(dispatch_queue_attr_t attr,
		dispatch_autorelease_frequency_t frequency);

/*!
 * @function dispatch_queue_attr_make_with_qos_class
 * Returns `attr` with a QoS class and a relative priority within it (from
 * QOS_MIN_RELATIVE_PRIORITY to 0). Returns `attr` unchanged if either is out of range (as
 * libdispatch does).
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
dispatch_queue_attr_t
dispatch_queue_attr_make_with_qos_class(dispatch_queue_attr_t attr,
		dispatch_qos_class_t qos_class, int relative_priority);

/* MARK: - Creating queues */

/* Pass as a target queue to mean "the default global queue for this queue's QoS". */
#define DISPATCH_TARGET_QUEUE_DEFAULT NULL

/*!
 * @function dispatch_queue_create_with_target
 * Creates a queue with a label (copied; may be NULL), attributes (NULL for serial) and
 * a target queue (NULL for the default). Release it with dispatch_release().
 */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_queue_t
dispatch_queue_create_with_target(const char *label, dispatch_queue_attr_t attr,
		dispatch_queue_t target);

/*!
 * @function dispatch_queue_create
 * Creates a queue with a label (copied; may be NULL) and attributes (NULL for serial),
 * targeting the default global queue. Release it with dispatch_release().
 */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_queue_t
dispatch_queue_create(const char *label, dispatch_queue_attr_t attr);

/* MARK: - Queue properties */

/* Pass to dispatch_queue_get_label() to ask about the queue running the caller. */
#define DISPATCH_CURRENT_QUEUE_LABEL NULL

/*!
 * @function dispatch_queue_get_label
 * Returns the label the queue was created with, or "" if it had none. The string lives
 * as long as the queue.
 */
DISPATCH_EXPORT DISPATCH_PURE DISPATCH_WARN_RESULT DISPATCH_NOTHROW
const char *
dispatch_queue_get_label(dispatch_queue_t queue);

/*!
 * @function dispatch_queue_get_qos_class
 * Returns the QoS class the queue was created with and, through
 * `relative_priority_ptr` if not NULL, its relative priority.
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_NONNULL1 DISPATCH_NOTHROW
dispatch_qos_class_t
dispatch_queue_get_qos_class(dispatch_queue_t queue, int *relative_priority_ptr);

/*!
 * @function dispatch_set_target_queue
 * Makes `queue` the target of `object`. A queue's or source's work then runs through that
 * queue; any other object (a group, a semaphore) only runs its finalizer there. NULL
 * restores the default global queue. A target cycle is a client bug.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_target_queue(dispatch_object_t object, dispatch_queue_t queue);
#if !defined(__cplusplus) && DISPATCH_GNU_ATTRIBUTES
/* See the end of object.h. */
#define dispatch_set_target_queue(object, queue) \
		(__extension__ dispatch_set_target_queue(object, queue))
#endif

/*!
 * @function dispatch_main
 * Hands the main thread to the library to run main-queue work; never returns. Call
 * it at the end of main() in programs that use the main queue.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW DISPATCH_NORETURN
void
dispatch_main(void);

/* MARK: - Queue-specific data */

/*!
 * @function dispatch_queue_set_specific
 * Stores `context` under `key` (compared by address) on the queue; the previous value's
 * destructor, if any, is called on it. A NULL context removes the key.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_queue_set_specific(dispatch_queue_t queue, const void *key, void *context,
		dispatch_function_t destructor);

/*!
 * @function dispatch_queue_get_specific
 * Returns the value stored under `key` on this queue itself, or NULL.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_PURE DISPATCH_WARN_RESULT DISPATCH_NOTHROW
void *
dispatch_queue_get_specific(dispatch_queue_t queue, const void *key);

/*!
 * @function dispatch_get_specific
 * Returns the value stored under `key` on the queue running the caller or, failing
 * that, on the first of its target queues that has one; NULL if none does.
 */
DISPATCH_EXPORT DISPATCH_PURE DISPATCH_WARN_RESULT DISPATCH_NOTHROW
void *
dispatch_get_specific(const void *key);

/* MARK: - Assertions */

/*!
 * @function dispatch_assert_queue
 * Aborts with a message unless the caller is running on `queue` (directly, or on a
 * queue that targets it).
 */
DISPATCH_EXPORT DISPATCH_NONNULL1
void
dispatch_assert_queue(dispatch_queue_t queue);

/*!
 * @function dispatch_assert_queue_barrier
 * Aborts with a message unless the caller is running on `queue` with nothing else on
 * it running: as a barrier, or on a serial queue.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1
void
dispatch_assert_queue_barrier(dispatch_queue_t queue);

/*!
 * @function dispatch_assert_queue_not
 * Aborts with a message if the caller is running on `queue`.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1
void
dispatch_assert_queue_not(dispatch_queue_t queue);

/* Variants checked only in builds without NDEBUG. */
#ifdef NDEBUG
#define dispatch_assert_queue_debug(q) ((void)(0 && (q)))
#define dispatch_assert_queue_barrier_debug(q) ((void)(0 && (q)))
#define dispatch_assert_queue_not_debug(q) ((void)(0 && (q)))
#else
#define dispatch_assert_queue_debug(q) dispatch_assert_queue(q)
#define dispatch_assert_queue_barrier_debug(q) dispatch_assert_queue_barrier(q)
#define dispatch_assert_queue_not_debug(q) dispatch_assert_queue_not(q)
#endif

#endif /* __DISPATCH_QUEUE__ */
