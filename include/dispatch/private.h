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

/* MARK: Data (data objects beyond data.h) */

/* The destructor that does nothing: the data object uses the caller's buffer as it is,
 * neither copying nor freeing it; the buffer must outlive every object sharing it. */
#define DISPATCH_DATA_DESTRUCTOR_NONE (_dispatch_data_destructor_none)
DISPATCH_DATA_DESTRUCTOR_TYPE_DECL(none);
#define DISPATCH_DATA_DESTRUCTOR_NONE_F \
	(_dispatch_data_destructor_as_function(&_dispatch_data_destructor_none))

/*!
 * @function dispatch_data_create_alloc
 * Returns a new data object of `size` uninitialized bytes and stores their address in
 * `*buffer_ptr` (when not NULL), for the caller to fill before sharing the object. Size 0
 * returns dispatch_data_empty and stores NULL.
 */
DISPATCH_EXPORT DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_alloc(size_t size, void **buffer_ptr);

/* A data format for dispatch_data_create_with_transform(). */
typedef const struct dispatch_data_format_type_s *dispatch_data_format_type_t;

#define DISPATCH_DATA_FORMAT_TYPE_DECL(name) \
	DISPATCH_EXPORT const struct dispatch_data_format_type_s _dispatch_data_format_type_##name
/* Raw bytes. */
#define DISPATCH_DATA_FORMAT_TYPE_NONE (&_dispatch_data_format_type_none)
DISPATCH_DATA_FORMAT_TYPE_DECL(none);
/* RFC 4648 base32, base32 with the extended hex alphabet, base64; '=' padded. */
#define DISPATCH_DATA_FORMAT_TYPE_BASE32 (&_dispatch_data_format_type_base32)
DISPATCH_DATA_FORMAT_TYPE_DECL(base32);
#define DISPATCH_DATA_FORMAT_TYPE_BASE32HEX (&_dispatch_data_format_type_base32hex)
DISPATCH_DATA_FORMAT_TYPE_DECL(base32hex);
#define DISPATCH_DATA_FORMAT_TYPE_BASE64 (&_dispatch_data_format_type_base64)
DISPATCH_DATA_FORMAT_TYPE_DECL(base64);
/* UTF-8, UTF-16 little- and big-endian (written with a byte-order mark), and, as input
 * only, any of these told apart by a leading byte-order mark (none means UTF-8). */
#define DISPATCH_DATA_FORMAT_TYPE_UTF8 (&_dispatch_data_format_type_utf8)
DISPATCH_DATA_FORMAT_TYPE_DECL(utf8);
#define DISPATCH_DATA_FORMAT_TYPE_UTF16LE (&_dispatch_data_format_type_utf16le)
DISPATCH_DATA_FORMAT_TYPE_DECL(utf16le);
#define DISPATCH_DATA_FORMAT_TYPE_UTF16BE (&_dispatch_data_format_type_utf16be)
DISPATCH_DATA_FORMAT_TYPE_DECL(utf16be);
#define DISPATCH_DATA_FORMAT_TYPE_UTF_ANY (&_dispatch_data_format_type_utf_any)
DISPATCH_DATA_FORMAT_TYPE_DECL(utf_any);

/*!
 * @function dispatch_data_create_with_transform
 * Returns a new data object with the bytes of `data` converted from format `input` to
 * format `output`, or NULL when the input is not valid in its format or the two formats
 * cannot be converted into each other (binary formats — NONE and the base32/base64
 * encodings — convert only among themselves, text formats only among themselves;
 * UTF_ANY is an input format only). dispatch_data_create_with_transform(3).
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_with_transform(dispatch_data_t data, dispatch_data_format_type_t input,
		dispatch_data_format_type_t output);

/* MARK: Sources (sources beyond source.h) */

/* A timer every `handle` milliseconds (or, with DISPATCH_INTERVAL_UI_ANIMATION in the mask,
 * every `handle` frames of 1/60 s), armed when created, firing on multiples of the interval
 * of the uptime clock (every interval source of the same interval fires in phase); the
 * default leeway is half the interval (one frame for animation). dispatch_source_set_timer
 * on it takes start DISPATCH_TIME_NOW or DISPATCH_TIME_FOREVER, the interval in the
 * source's unit, and a leeway in thousandths of the interval (0...1000) or ~0 for the
 * default. dispatch_source_get_handle returns 1 and dispatch_source_get_mask the mask with
 * 0x10 added, as libdispatch's do. */
#define DISPATCH_SOURCE_TYPE_INTERVAL (&_dispatch_source_type_interval)
DISPATCH_SOURCE_TYPE_DECL(interval);
#define DISPATCH_INTERVAL_UI_ANIMATION 0x20

/*!
 * @function dispatch_source_cancel_and_wait
 * Cancels `source` and returns once the cancellation is complete: no handler of the
 * source is running or will run again. The source must have no cancel handler, must not
 * be suspended, and must not be the source whose handler is calling (each is a client bug);
 * an inactive source is cancelled and activated without waiting.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_cancel_and_wait(dispatch_source_t source);

/* What dispatch_source_get_extended_data() fills in: the data of the event being handled
 * (dispatch_source_get_data) and a status, which is 0 for every source type on Linux. */
typedef struct dispatch_source_extended_data_s {
	unsigned long data;
	unsigned long status;
} *dispatch_source_extended_data_t;

/*!
 * @function dispatch_source_get_extended_data
 * Stores the fields of struct dispatch_source_extended_data_s that fit in `size` bytes at
 * `data`, zeroes any bytes past the struct, and returns min(size, sizeof the struct).
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
size_t
dispatch_source_get_extended_data(dispatch_source_t source,
		dispatch_source_extended_data_t data, size_t size);

/*!
 * @function dispatch_source_set_mandatory_cancel_handler
 * Sets the cancel handler, like dispatch_source_set_cancel_handler(), and makes it
 * mandatory: releasing the source's last reference before cancelling it is a client bug,
 * and so are setting it on an active source and changing any handler after activation.
 */
#ifdef __BLOCKS__
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_set_mandatory_cancel_handler(dispatch_source_t source, dispatch_block_t handler);
#endif

/*!
 * @function dispatch_source_set_mandatory_cancel_handler_f
 * dispatch_source_set_mandatory_cancel_handler() with a function, called with the
 * source's context.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_set_mandatory_cancel_handler_f(dispatch_source_t source, dispatch_function_t handler);

/* MARK: Queues and QoS */

/*!
 * @function dispatch_queue_set_label_nocopy
 * Gives a queue created with a NULL label the string `label` as its label, without copying
 * it (it must outlive the queue). A queue created with a label owns a copy and refuses
 * (client bug); on the main and global queues the call does nothing.
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
void
dispatch_queue_set_label_nocopy(dispatch_queue_t queue, const char *label);

/*!
 * @function dispatch_set_qos_class
 * Sets the QoS class of an inactive queue or workloop (dispatch_queue_get_qos_class reports
 * it; a queue targeting a global queue moves to the global queue of that class). On an
 * active object, a client bug.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_qos_class(dispatch_object_t object, dispatch_qos_class_t qos_class, int relative_priority);

/*!
 * @function dispatch_set_qos_class_floor
 * The lowest QoS class the inactive queue's work runs at; since GrandCentral runs a queue's
 * work at the queue's class, the same as dispatch_set_qos_class().
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_qos_class_floor(dispatch_object_t object, dispatch_qos_class_t qos_class, int relative_priority);

/*!
 * @function dispatch_set_qos_class_fallback
 * The QoS class for work submitted to the inactive queue without one. Checked and accepted;
 * it changes nothing observable (as in libdispatch, the queue's reported class is unchanged).
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_qos_class_fallback(dispatch_object_t object, dispatch_qos_class_t qos_class);

/*!
 * @function dispatch_async_enforce_qos_class_f
 * dispatch_async_f() whose item runs at its own QoS class rather than the queue's; items
 * carry no QoS class in GrandCentral, so it is dispatch_async_f().
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_async_enforce_qos_class_f(dispatch_queue_t queue, void *context, dispatch_function_t work);

/* Vouchers are Darwin's; on Linux a voucher_t is never anything but NULL. */
typedef struct voucher_s *voucher_t;

/*!
 * @function dispatch_queue_create_with_accounting_override_voucher
 * A deprecated Darwin call; as in libdispatch's Linux build, calling it is a client bug.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
dispatch_queue_t
dispatch_queue_create_with_accounting_override_voucher(const char *label, dispatch_queue_attr_t attr,
		voucher_t voucher);

#ifdef __BLOCKS__
/*!
 * @function dispatch_block_create_with_voucher
 * dispatch_block_create(); the voucher is ignored (Linux has none).
 */
DISPATCH_EXPORT DISPATCH_NONNULL3 DISPATCH_RETURNS_RETAINED_BLOCK DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_block_t
dispatch_block_create_with_voucher(dispatch_block_flags_t flags, voucher_t voucher, dispatch_block_t block);

/*!
 * @function dispatch_block_create_with_voucher_and_qos_class
 * dispatch_block_create_with_qos_class(); the voucher is ignored (Linux has none).
 */
DISPATCH_EXPORT DISPATCH_NONNULL5 DISPATCH_RETURNS_RETAINED_BLOCK DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_block_t
dispatch_block_create_with_voucher_and_qos_class(dispatch_block_flags_t flags, voucher_t voucher,
		dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t block);
#endif

/* MARK: Workloops */

/* A workloop: a serial queue that is a context of its own, for its items and those of the
 * queues targeting it, usable as a target like any queue. As on libdispatch's Linux build,
 * items run in submission order (not by QoS). Every queue call accepts a workloop. */
typedef dispatch_queue_t dispatch_workloop_t;

/* Flags of dispatch_workloop_set_qos_class(_floor); accepted, no effect on Linux. */
typedef uint64_t dispatch_workloop_param_flags_t;
#define DISPATCH_WORKLOOP_NONE ((dispatch_workloop_param_flags_t)0x0)
#define DISPATCH_WORKLOOP_FIXED_PRIORITY ((dispatch_workloop_param_flags_t)0x1)

/*! @function dispatch_workloop_create  A new, active workloop. dispatch_workloop_create(3). */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_workloop_t
dispatch_workloop_create(const char *label);

/*! @function dispatch_workloop_create_inactive  A new workloop to configure, then dispatch_activate(). */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_workloop_t
dispatch_workloop_create_inactive(const char *label);

/*! @function dispatch_workloop_copy_current
 * The innermost workloop whose items (directly or through a queue targeting it) the calling
 * thread is running, retained; NULL when none. */
DISPATCH_EXPORT DISPATCH_RETURNS_RETAINED DISPATCH_NOTHROW
dispatch_workloop_t
dispatch_workloop_copy_current(void);

/*! @function dispatch_workloop_is_current  Whether the calling thread runs an item of `workloop`. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
bool
dispatch_workloop_is_current(dispatch_workloop_t workloop);

/*! @function dispatch_workloop_set_autorelease_frequency
 * Recorded on the inactive workloop; autorelease pools do not exist on Linux. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_workloop_set_autorelease_frequency(dispatch_workloop_t workloop, dispatch_autorelease_frequency_t frequency);

/*! @function dispatch_workloop_set_qos_class_floor
 * dispatch_set_qos_class_floor() on the inactive workloop; `flags` has no effect. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_workloop_set_qos_class_floor(dispatch_workloop_t workloop, dispatch_qos_class_t qos,
		int relative_priority, dispatch_workloop_param_flags_t flags);

/*! @function dispatch_workloop_set_qos_class
 * dispatch_workloop_set_qos_class_floor(workloop, qos, 0, flags). */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_workloop_set_qos_class(dispatch_workloop_t workloop, dispatch_qos_class_t qos,
		dispatch_workloop_param_flags_t flags);

/*! @function dispatch_workloop_set_cpupercent
 * Recorded on the inactive workloop; limiting a CPU share is a Darwin scheduler feature. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_workloop_set_cpupercent(dispatch_workloop_t workloop, uint8_t percent, uint32_t refillms);

/* MARK: Runtime hooks (for other runtimes and tools, rarely for programs) */

/* The autorelease-pool hooks a Foundation may set; GrandCentral never calls them (there
 * are no autorelease pools on Linux). */
DISPATCH_EXPORT void *(*_dispatch_begin_NSAutoReleasePool)(void);
DISPATCH_EXPORT void (*_dispatch_end_NSAutoReleasePool)(void *);

/* The invoke function of every block dispatch_block_create() makes: lets another runtime
 * recognise one. */
DISPATCH_EXPORT void *const _dispatch_block_special_invoke;

/* libdispatch's queue layout for debuggers. GrandCentral's queues are Swift objects, so
 * every offset and size in it is 0 ("not present"); the version is 6. */
struct dispatch_queue_offsets_s {
	const uint16_t dqo_version;
	const uint16_t dqo_label, dqo_label_size;
	const uint16_t dqo_flags, dqo_flags_size;
	const uint16_t dqo_serialnum, dqo_serialnum_size;
	const uint16_t dqo_width, dqo_width_size;
	const uint16_t dqo_running, dqo_running_size;
	const uint16_t dqo_suspend_cnt, dqo_suspend_cnt_size;
	const uint16_t dqo_target_queue, dqo_target_queue_size;
	const uint16_t dqo_priority, dqo_priority_size;
};
DISPATCH_EXPORT const struct dispatch_queue_offsets_s dispatch_queue_offsets;

/* libdispatch's log: printf-style, one line per call; off unless LIBDISPATCH_LOG=file
 * (/var/tmp/libdispatch.<pid>.log) or LIBDISPATCH_LOG=stderr. */
DISPATCH_EXPORT DISPATCH_NOTHROW __attribute__((__format__(__printf__, 1, 2)))
void
_dispatch_log(const char *message, ...);

/* Logs "BUG in libdispatch:  - <line> - 0x<value>" through _dispatch_log(). */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
_dispatch_bug(size_t line, long value);

/* libdispatch's I/O tuning knobs; accepted, no effect (GrandCentral's I/O has none). */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
_dispatch_iocntl(uint32_t parameter, uint64_t value);

/* Waits (spinning, then yielding) until *slot is non-NULL; returns it. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void *
_dispatch_wait_for_enqueuer(void **slot);

/* Darwin hooks that do nothing on Linux, as in libdispatch's Linux build. */
DISPATCH_EXPORT DISPATCH_NOTHROW void _dispatch_poll_for_events_4launchd(void);
DISPATCH_EXPORT DISPATCH_NOTHROW bool _dispatch_workloop_should_yield_4NW(void);

/* libdispatch's internal block constructor: dispatch_block_create(flags, block) with
 * flags outside the public set dropped; the voucher and priority are ignored. */
#ifdef __BLOCKS__
DISPATCH_EXPORT DISPATCH_NOTHROW
dispatch_block_t
_dispatch_block_create(dispatch_block_flags_t flags, voucher_t voucher, unsigned long priority,
		dispatch_block_t block);
#endif

/* The reference counting of libdispatch's object system (os/object_private.h). An object
 * from _os_object_alloc(cls, size) begins { const void *isa; int ref_cnt; int xref_cnt; },
 * counts starting at 0 (one reference); isa, if not NULL, points at two functions,
 * { xref_dispose, dispose }, called when the external / internal count drops below 0 (by
 * default: drop the internal reference / free the object). On a GrandCentral dispatch object
 * every retain is dispatch_retain() and every release dispatch_release(). */
typedef void *_os_object_t;
DISPATCH_EXPORT _os_object_t _os_object_alloc(const void *cls, size_t size);
DISPATCH_EXPORT _os_object_t _os_object_alloc_realized(const void *cls, size_t size);
DISPATCH_EXPORT void _os_object_dealloc(_os_object_t object);
DISPATCH_EXPORT _os_object_t _os_object_retain(_os_object_t object);
DISPATCH_EXPORT _os_object_t _os_object_retain_with_resurrect(_os_object_t object);
DISPATCH_EXPORT void _os_object_release(_os_object_t object);
DISPATCH_EXPORT _os_object_t _os_object_retain_internal(_os_object_t object);
DISPATCH_EXPORT _os_object_t _os_object_retain_internal_n(_os_object_t object, uint16_t n);
DISPATCH_EXPORT void _os_object_release_internal(_os_object_t object);
DISPATCH_EXPORT void _os_object_release_internal_n(_os_object_t object, uint16_t n);

/* MARK: fork */

/* Whether the library has started a thread in this process (since the last fork). Code that
 * must keep a process single-threaded for its forked children checks it before using
 * dispatch. */
DISPATCH_EXPORT DISPATCH_NOTHROW bool _dispatch_is_multithreaded(void);

/* Whether this process is the child of a fork taken while the parent was multithreaded by
 * dispatch. Unlike libdispatch's, such a child may use dispatch: the library's own atfork
 * handler leaves it with no threads and empty global and main queues, and the pool, the event
 * thread and timers start again on first use. Work pending in the parent is the parent's;
 * queues and sources that were busy or armed at the fork belong to the parent and must not
 * be used; fork from a dispatch worker thread is not supported. A child that calls only
 * async-signal-safe functions and _exit or exec is never blocked. */
DISPATCH_EXPORT DISPATCH_NOTHROW bool _dispatch_is_fork_of_multithreaded_parent(void);

/* With true: any dispatch call that would start a thread is a client bug (and the call
 * itself is one if dispatch has already started threads); with false: allowed again. Not
 * inherited by a forked child. */
DISPATCH_EXPORT DISPATCH_NOTHROW void _dispatch_prohibit_transition_to_multithreaded(bool prohibit);

/* libdispatch's pthread_atfork handlers. prepare and parent do nothing; the library
 * registers its own child handler, and dispatch_atfork_child records the fork facts again
 * (calling it is harmless; the reset for the child has already happened). */
DISPATCH_EXPORT DISPATCH_NOTHROW void dispatch_atfork_prepare(void);
DISPATCH_EXPORT DISPATCH_NOTHROW void dispatch_atfork_parent(void);
DISPATCH_EXPORT DISPATCH_NOTHROW void dispatch_atfork_child(void);

#endif /* __DISPATCH_PRIVATE__ */
