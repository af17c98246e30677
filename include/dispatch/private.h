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
 * mandatory: releasing the source's last reference before cancelling it is a client bug.
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

#endif /* __DISPATCH_PRIVATE__ */
