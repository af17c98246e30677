/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * object.h: the base type every dispatch object shares, and the calls that work on any
 * of them (reference counting, context, suspension, target queue).
 */
#ifndef __DISPATCH_OBJECT__
#define __DISPATCH_OBJECT__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/*
 * Dispatch objects are opaque pointers. DISPATCH_DECL(name) declares name_t, and
 * dispatch_object_t must accept every such type without a cast:
 *
 *  - C: dispatch_object_t is a transparent union of pointers to every object struct, so a
 *    function taking dispatch_object_t takes a dispatch_queue_t, a dispatch_group_t, ...
 *    Types declared by later headers (sources, data, I/O channels) already have their
 *    member here; their headers then only need DISPATCH_DECL.
 *  - C++: every object struct derives from dispatch_object_s, so pointers convert to
 *    dispatch_object_t implicitly. The structs cannot be constructed, copied or destroyed
 *    by client code; only pointers to them exist.
 *
 * There is no Objective-C mode: objects are never ARC-managed.
 */
#if defined(__cplusplus)
typedef struct dispatch_object_s {
private:
	dispatch_object_s();
	~dispatch_object_s();
	dispatch_object_s(const dispatch_object_s &);
	void operator=(const dispatch_object_s &);
} *dispatch_object_t;
#define DISPATCH_DECL(name) \
		typedef struct name##_s : public dispatch_object_s {} *name##_t
#define DISPATCH_DECL_SUBCLASS(name, base) \
		typedef struct name##_s : public base##_s {} *name##_t
#define DISPATCH_GLOBAL_OBJECT(type, object) (static_cast<type>(&(object)))
#else
struct dispatch_object_s;
struct dispatch_queue_s;
struct dispatch_queue_attr_s;
struct dispatch_group_s;
struct dispatch_semaphore_s;
struct dispatch_source_s;
struct dispatch_data_s;
struct dispatch_io_s;
typedef union {
	struct dispatch_object_s *_do;
	struct dispatch_queue_s *_dq;
	struct dispatch_queue_attr_s *_dqa;
	struct dispatch_group_s *_dg;
	struct dispatch_semaphore_s *_dsema;
	struct dispatch_source_s *_ds;
	struct dispatch_data_s *_ddata;
	struct dispatch_io_s *_dchannel;
} dispatch_object_t DISPATCH_TRANSPARENT_UNION;
#define DISPATCH_DECL(name) typedef struct name##_s *name##_t
#define DISPATCH_DECL_SUBCLASS(name, base) typedef base##_t name##_t
#define DISPATCH_GLOBAL_OBJECT(type, object) ((type)&(object))
#endif

/* Sources and data objects are declared the same way as any other object. */
#define DISPATCH_SOURCE_DECL(name) DISPATCH_DECL(name)
#define DISPATCH_DATA_DECL(name) DISPATCH_DECL(name)
#define DISPATCH_SOURCE_TYPE_DECL(name) \
		DISPATCH_EXPORT const struct dispatch_source_type_s \
		_dispatch_source_type_##name

#ifdef __BLOCKS__
/*!
 * @typedef dispatch_block_t
 * A block that takes no arguments and returns nothing: the unit of work queues run.
 * Functions that keep a block past the call copy it (Block_copy) themselves.
 */
typedef void (^dispatch_block_t)(void);
#endif

/*!
 * @function dispatch_retain
 * Adds a reference to a dispatch object. Balance each call with dispatch_release().
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_retain(dispatch_object_t object);

/*!
 * @function dispatch_release
 * Drops a reference to a dispatch object. The object is destroyed, and its finalizer
 * called, once no reference remains; the library may hold references of its own (for
 * example while work is queued), so the caller's release need not be the last.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_release(dispatch_object_t object);

/*!
 * @function dispatch_get_context
 * Returns the pointer last stored with dispatch_set_context(), or NULL.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_PURE DISPATCH_WARN_RESULT DISPATCH_NOTHROW
void *
dispatch_get_context(dispatch_object_t object);

/*!
 * @function dispatch_set_context
 * Stores an application-defined pointer with the object. The library never reads it,
 * except to pass it to the finalizer.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_context(dispatch_object_t object, void *context);

/*!
 * @function dispatch_set_finalizer_f
 * Sets a function to call, on the object's target queue, with the object's context once
 * the object's last reference is gone. Typically it frees the context; if the context is
 * NULL then, the finalizer is not called at all. NULL removes the finalizer.
 */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
dispatch_set_finalizer_f(dispatch_object_t object, dispatch_function_t finalizer);

/*!
 * @function dispatch_activate
 * Starts an object created inactive (for example with DISPATCH_QUEUE_SERIAL_INACTIVE):
 * its work may now run. Has no effect on an object that is already active.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_activate(dispatch_object_t object);

/*!
 * @function dispatch_suspend
 * Stops the object from starting new work items after the ones already running
 * finish. Suspensions nest: each must be balanced with dispatch_resume().
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_suspend(dispatch_object_t object);

/*!
 * @function dispatch_resume
 * Undoes one dispatch_suspend(); work continues when the count reaches zero.
 * Resuming an object that is not suspended is a client bug and aborts.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_resume(dispatch_object_t object);

/*!
 * @function dispatch_debug
 * Writes a description of the object, after the printf-style message, to stderr.
 * Deprecated in libdispatch; kept for old code.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NOTHROW DISPATCH_COLD
DISPATCH_FORMAT(printf, 2, 3)
void
dispatch_debug(dispatch_object_t object, const char *message, ...);

/*!
 * @function dispatch_debugv
 * dispatch_debug() taking a va_list.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NOTHROW DISPATCH_COLD
DISPATCH_FORMAT(printf, 2, 0)
void
dispatch_debugv(dispatch_object_t object, const char *message, va_list ap);

/* MARK: - Type-generic calls
 *
 * dispatch_wait, dispatch_notify, dispatch_cancel and dispatch_testcancel take an object
 * of any type that has the operation and call that type's own function:
 *
 *   dispatch_wait(object, timeout)      block: dispatch_block_wait
 *                                       group: dispatch_group_wait
 *                                       semaphore: dispatch_semaphore_wait
 *   dispatch_notify(object, queue, b)   block: dispatch_block_notify
 *                                       group: dispatch_group_notify
 *   dispatch_cancel(object)             block: dispatch_block_cancel
 *   dispatch_testcancel(object)         block: dispatch_block_testcancel
 *
 *   dispatch_cancel(object)             source: dispatch_source_cancel
 *   dispatch_testcancel(object)         source: dispatch_source_testcancel
 *
 * The block forms exist only with __BLOCKS__ (dispatch_notify has no other form).
 *
 * How the type is chosen:
 *  - C11 (and C99 on compilers that offer _Generic as an extension, such as clang): each
 *    name is a macro over a _Generic selection. Any other type does not compile.
 *  - C++: each name is a set of inline overloads (C++ linkage), one per type.
 *  - Otherwise (gcc with -std=c99): there is no selection; the names are declared as
 *    unavailable functions taking void *, so a call is a compile-time error rather than
 *    a link-time one. Call the type's own function instead.
 * In every mode the names are also declared as functions taking void *, marked
 * unavailable (dispatch_notify only with __BLOCKS__): the library
 * defines no function of these names (nor does libdispatch). In C++ a call with a type
 * that has no overload resolves to them and is reported as unavailable.
 */

DISPATCH_EXPORT DISPATCH_UNAVAILABLE DISPATCH_NONNULL1 DISPATCH_NOTHROW
intptr_t
dispatch_wait(void *object, dispatch_time_t timeout);

#ifdef __BLOCKS__
DISPATCH_EXPORT DISPATCH_UNAVAILABLE DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_notify(void *object, dispatch_object_t queue, dispatch_block_t notification_block);
#endif /* __BLOCKS__ */

DISPATCH_EXPORT DISPATCH_UNAVAILABLE DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_cancel(void *object);

DISPATCH_EXPORT DISPATCH_UNAVAILABLE DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_NOTHROW
intptr_t
dispatch_testcancel(void *object);

#if defined(__cplusplus)
/* The functions the overloads call, declared ahead of their own headers (which declare
 * them again, identically) because object.h comes first. */
struct dispatch_group_s;
struct dispatch_semaphore_s;
struct dispatch_source_s;
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_source_cancel(struct dispatch_source_s *source);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
intptr_t
dispatch_source_testcancel(struct dispatch_source_s *source);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
intptr_t
dispatch_group_wait(struct dispatch_group_s *group, dispatch_time_t timeout);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
intptr_t
dispatch_semaphore_wait(struct dispatch_semaphore_s *dsema, dispatch_time_t timeout);
#ifdef __BLOCKS__
struct dispatch_queue_s;
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NOTHROW
intptr_t
dispatch_block_wait(dispatch_block_t block, dispatch_time_t timeout);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_block_notify(dispatch_block_t block, struct dispatch_queue_s *queue,
		dispatch_block_t notification_block);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_group_notify(struct dispatch_group_s *group, struct dispatch_queue_s *queue,
		dispatch_block_t block);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_block_cancel(dispatch_block_t block);
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_WARN_RESULT DISPATCH_PURE DISPATCH_NOTHROW
intptr_t
dispatch_block_testcancel(dispatch_block_t block);
#endif /* __BLOCKS__ */

extern "C++" {
inline intptr_t dispatch_wait(struct dispatch_group_s *group, dispatch_time_t timeout)
{
	return dispatch_group_wait(group, timeout);
}
inline intptr_t dispatch_wait(struct dispatch_semaphore_s *semaphore, dispatch_time_t timeout)
{
	return dispatch_semaphore_wait(semaphore, timeout);
}
#ifdef __BLOCKS__
inline intptr_t dispatch_wait(dispatch_block_t block, dispatch_time_t timeout)
{
	return dispatch_block_wait(block, timeout);
}
inline void dispatch_notify(struct dispatch_group_s *group, struct dispatch_queue_s *queue,
		dispatch_block_t notification_block)
{
	dispatch_group_notify(group, queue, notification_block);
}
inline void dispatch_notify(dispatch_block_t block, struct dispatch_queue_s *queue,
		dispatch_block_t notification_block)
{
	dispatch_block_notify(block, queue, notification_block);
}
inline void dispatch_cancel(dispatch_block_t block)
{
	dispatch_block_cancel(block);
}
inline intptr_t dispatch_testcancel(dispatch_block_t block)
{
	return dispatch_block_testcancel(block);
}
#endif /* __BLOCKS__ */
inline void dispatch_cancel(struct dispatch_source_s *source)
{
	dispatch_source_cancel(source);
}
inline intptr_t dispatch_testcancel(struct dispatch_source_s *source)
{
	return dispatch_source_testcancel(source);
}
} /* extern "C++" */

#elif (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L) || \
		DISPATCH_HAS_EXTENSION(c_generic_selections)
/* __extension__ keeps -pedantic quiet where _Generic is an extension (C99). */
#if DISPATCH_GNU_ATTRIBUTES
#define __DISPATCH_GENERIC(object, ...) (__extension__ _Generic((object), __VA_ARGS__))
#else
#define __DISPATCH_GENERIC(object, ...) _Generic((object), __VA_ARGS__)
#endif
/* One association for blocks, or none without __BLOCKS__ (always listed first). */
#ifdef __BLOCKS__
#define __DISPATCH_GENERIC_BLOCK(function) dispatch_block_t: function,
#else
#define __DISPATCH_GENERIC_BLOCK(function)
#endif

#define dispatch_wait(object, timeout) \
		__DISPATCH_GENERIC(object, \
			__DISPATCH_GENERIC_BLOCK(dispatch_block_wait) \
			dispatch_group_t: dispatch_group_wait, \
			dispatch_semaphore_t: dispatch_semaphore_wait)((object), (timeout))

#ifdef __BLOCKS__
#define dispatch_notify(object, queue, notification_block) \
		__DISPATCH_GENERIC(object, \
			dispatch_block_t: dispatch_block_notify, \
			dispatch_group_t: dispatch_group_notify)((object), (queue), (notification_block))
#endif /* __BLOCKS__ */
#define dispatch_cancel(object) \
		__DISPATCH_GENERIC(object, \
			__DISPATCH_GENERIC_BLOCK(dispatch_block_cancel) \
			struct dispatch_source_s *: dispatch_source_cancel)((object))
#define dispatch_testcancel(object) \
		__DISPATCH_GENERIC(object, \
			__DISPATCH_GENERIC_BLOCK(dispatch_block_testcancel) \
			struct dispatch_source_s *: dispatch_source_testcancel)((object))
#endif /* type-generic selection */

/*
 * Passing a queue or group where a dispatch_object_t is expected relies on the
 * transparent union, a GNU extension that gcc reports at every call under -pedantic.
 * These macros mark the calls as intended (__extension__), so clients can build with
 * -pedantic -Werror. They change nothing else: the functions keep their addresses and
 * accept the same arguments (any object pointer, void *, NULL).
 */
#if !defined(__cplusplus) && DISPATCH_GNU_ATTRIBUTES
#define dispatch_retain(object) (__extension__ dispatch_retain(object))
#define dispatch_release(object) (__extension__ dispatch_release(object))
#define dispatch_get_context(object) (__extension__ dispatch_get_context(object))
#define dispatch_set_context(object, context) \
		(__extension__ dispatch_set_context(object, context))
#define dispatch_set_finalizer_f(object, finalizer) \
		(__extension__ dispatch_set_finalizer_f(object, finalizer))
#define dispatch_activate(object) (__extension__ dispatch_activate(object))
#define dispatch_suspend(object) (__extension__ dispatch_suspend(object))
#define dispatch_resume(object) (__extension__ dispatch_resume(object))
#define dispatch_debug(object, ...) (__extension__ dispatch_debug(object, __VA_ARGS__))
#define dispatch_debugv(object, message, ap) \
		(__extension__ dispatch_debugv(object, message, ap))
#endif

#endif /* __DISPATCH_OBJECT__ */
