/*
 * The translation unit scripts/header-matrix.sh compiles (never links) with every
 * supported compiler and language mode. It includes the public headers and touches
 * every macro, type, inline function and declaration, so that each is really parsed and
 * type-checked in each mode: taking a function's address checks its declaration,
 * calling an inline function compiles its body. The same file is valid C and C++.
 */
#include <dispatch/dispatch.h>
#include <dispatch/private.h>
#include <dispatch/runloop_private.h>
#include <dispatch/dispatch.h> /* include guards: a second include is harmless */

#include <time.h>

#if !defined(DISPATCH_API_VERSION) || DISPATCH_API_VERSION != 20180109
#error "DISPATCH_API_VERSION"
#endif
#if !defined(__GRANDCENTRAL__)
#error "__GRANDCENTRAL__"
#endif
#if DISPATCH_QUEUE_PRIORITY_HIGH != 2 || DISPATCH_QUEUE_PRIORITY_DEFAULT != 0 || \
		DISPATCH_QUEUE_PRIORITY_LOW != -2 || DISPATCH_QUEUE_PRIORITY_BACKGROUND != -32768
#error "DISPATCH_QUEUE_PRIORITY_*"
#endif
#if DISPATCH_TIME_NOW != 0 || DISPATCH_TIME_FOREVER != 0xffffffffffffffffull || \
		DISPATCH_WALLTIME_NOW != 0xfffffffffffffffeull
#error "DISPATCH_TIME_*"
#endif
#if NSEC_PER_SEC != 1000000000 || NSEC_PER_MSEC != 1000000 || NSEC_PER_USEC != 1000 || \
		USEC_PER_SEC != 1000000
#error "NSEC_PER_*"
#endif
#if DISPATCH_QUEUE_OVERCOMMIT != 2 || DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS != -1 || \
		DISPATCH_QUEUE_WIDTH_MAX_PHYSICAL_CPUS != -2 || \
		DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS != -3 || QOS_MIN_RELATIVE_PRIORITY != -15
#error "private.h constants"
#endif

/* Compile-time checks that work in C99 and C++ alike: a negative array size fails. */
#define HM_CHECK(name, cond) typedef char hm_check_##name[(cond) ? 1 : -1]
HM_CHECK(qos_interactive, QOS_CLASS_USER_INTERACTIVE == 0x21);
HM_CHECK(qos_initiated, QOS_CLASS_USER_INITIATED == 0x19);
HM_CHECK(qos_default, QOS_CLASS_DEFAULT == 0x15);
HM_CHECK(qos_utility, QOS_CLASS_UTILITY == 0x11);
HM_CHECK(qos_background, QOS_CLASS_BACKGROUND == 0x09);
HM_CHECK(qos_unspecified, QOS_CLASS_UNSPECIFIED == 0x00);
HM_CHECK(qos_size, sizeof(dispatch_qos_class_t) == sizeof(unsigned int));
HM_CHECK(arf_inherit, DISPATCH_AUTORELEASE_FREQUENCY_INHERIT == 0);
HM_CHECK(arf_work_item, DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM == 1);
HM_CHECK(arf_never, DISPATCH_AUTORELEASE_FREQUENCY_NEVER == 2);
HM_CHECK(arf_size, sizeof(dispatch_autorelease_frequency_t) == sizeof(unsigned long));
HM_CHECK(time_size, sizeof(dispatch_time_t) == 8);
HM_CHECK(once_size, sizeof(dispatch_once_t) == sizeof(long));
HM_CHECK(priority_size, sizeof(dispatch_queue_priority_t) == sizeof(long));
#ifdef __BLOCKS__
HM_CHECK(block_barrier, DISPATCH_BLOCK_BARRIER == 0x1);
HM_CHECK(block_detached, DISPATCH_BLOCK_DETACHED == 0x2);
HM_CHECK(block_assign, DISPATCH_BLOCK_ASSIGN_CURRENT == 0x4);
HM_CHECK(block_no_qos, DISPATCH_BLOCK_NO_QOS_CLASS == 0x8);
HM_CHECK(block_inherit, DISPATCH_BLOCK_INHERIT_QOS_CLASS == 0x10);
HM_CHECK(block_enforce, DISPATCH_BLOCK_ENFORCE_QOS_CLASS == 0x20);
HM_CHECK(block_flags_size, sizeof(dispatch_block_flags_t) == sizeof(unsigned long));
#endif

/* Every exported function, by address: checks each declaration in this mode. */
typedef void (*hm_fn)(void);
#ifdef __cplusplus
#define HM_FN(f) reinterpret_cast<hm_fn>(f)
#define HM_CAST(type, value) static_cast<type>(value)
#else
#define HM_FN(f) (hm_fn)(f)
#define HM_CAST(type, value) ((type)(value))
#endif

extern const hm_fn header_matrix_functions[];
const hm_fn header_matrix_functions[] = {
	HM_FN(dispatch_retain), HM_FN(dispatch_release),
	HM_FN(dispatch_get_context), HM_FN(dispatch_set_context),
	HM_FN(dispatch_set_finalizer_f), HM_FN(dispatch_activate),
	HM_FN(dispatch_suspend), HM_FN(dispatch_resume),
	HM_FN(dispatch_debug), HM_FN(dispatch_debugv),
	HM_FN(dispatch_time), HM_FN(dispatch_walltime),
	HM_FN(dispatch_async_f), HM_FN(dispatch_sync_f),
	HM_FN(dispatch_async_and_wait_f), HM_FN(dispatch_barrier_async_f),
	HM_FN(dispatch_barrier_sync_f), HM_FN(dispatch_barrier_async_and_wait_f),
	HM_FN(dispatch_after_f), HM_FN(dispatch_apply_f),
	HM_FN(dispatch_get_global_queue),
	HM_FN(dispatch_queue_attr_make_initially_inactive),
	HM_FN(dispatch_queue_attr_make_with_autorelease_frequency),
	HM_FN(dispatch_queue_attr_make_with_qos_class),
	HM_FN(dispatch_queue_create_with_target), HM_FN(dispatch_queue_create),
	HM_FN(dispatch_queue_get_label), HM_FN(dispatch_queue_get_qos_class),
	HM_FN(dispatch_set_target_queue), HM_FN(dispatch_main),
	HM_FN(dispatch_queue_set_specific), HM_FN(dispatch_queue_get_specific),
	HM_FN(dispatch_get_specific), HM_FN(dispatch_assert_queue),
	HM_FN(dispatch_assert_queue_barrier), HM_FN(dispatch_assert_queue_not),
	HM_FN(dispatch_group_create), HM_FN(dispatch_group_async_f),
	HM_FN(dispatch_group_wait), HM_FN(dispatch_group_notify_f),
	HM_FN(dispatch_group_enter), HM_FN(dispatch_group_leave),
	HM_FN(dispatch_semaphore_create), HM_FN(dispatch_semaphore_wait),
	HM_FN(dispatch_semaphore_signal),
	HM_FN(dispatch_once_f), HM_FN(dispatch_benchmark_f),
	HM_FN(dispatch_queue_set_width), HM_FN(dispatch_queue_attr_make_with_overcommit),
	HM_FN(libdispatch_init), HM_FN(_dispatch_get_main_queue_handle_4CF),
	HM_FN(_dispatch_get_main_queue_port_4CF), HM_FN(_dispatch_main_queue_callback_4CF),
	HM_FN(_dispatch_runloop_root_queue_create_4CF), HM_FN(_dispatch_runloop_root_queue_perform_4CF),
	HM_FN(_dispatch_runloop_root_queue_wakeup_4CF), HM_FN(_dispatch_runloop_root_queue_get_port_4CF),
#ifdef __BLOCKS__
	HM_FN(dispatch_async), HM_FN(dispatch_sync), HM_FN(dispatch_async_and_wait),
	HM_FN(dispatch_barrier_async), HM_FN(dispatch_barrier_sync),
	HM_FN(dispatch_barrier_async_and_wait), HM_FN(dispatch_after),
	HM_FN(dispatch_apply), HM_FN(dispatch_group_async), HM_FN(dispatch_group_notify),
	HM_FN(dispatch_once), HM_FN(dispatch_benchmark),
	HM_FN(dispatch_block_create), HM_FN(dispatch_block_create_with_qos_class),
	HM_FN(dispatch_block_perform), HM_FN(dispatch_block_wait),
	HM_FN(dispatch_block_notify), HM_FN(dispatch_block_cancel),
	HM_FN(dispatch_block_testcancel),
#endif
};

/* Deprecated, so referring to it warns; the declaration must still be there. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static dispatch_queue_t (*const hm_current_queue)(void) = dispatch_get_current_queue;
#pragma GCC diagnostic pop

/* Exact signatures: assigning to a pointer of the expected type fails on a mismatch. */
static void (*const hm_async_f)(dispatch_queue_t, void *, dispatch_function_t) =
		dispatch_async_f;
static void (*const hm_after_f)(dispatch_time_t, dispatch_queue_t, void *,
		dispatch_function_t) = dispatch_after_f;
static void (*const hm_apply_f)(size_t, dispatch_queue_t, void *,
		void (*)(void *, size_t)) = dispatch_apply_f;
static dispatch_queue_global_t (*const hm_global)(intptr_t, uintptr_t) =
		dispatch_get_global_queue;
static intptr_t (*const hm_group_wait)(dispatch_group_t, dispatch_time_t) =
		dispatch_group_wait;
static intptr_t (*const hm_sema_wait)(dispatch_semaphore_t, dispatch_time_t) =
		dispatch_semaphore_wait;
static dispatch_semaphore_t (*const hm_sema_create)(intptr_t) = dispatch_semaphore_create;
static dispatch_time_t (*const hm_time)(dispatch_time_t, int64_t) = dispatch_time;
static dispatch_time_t (*const hm_walltime)(const struct timespec *, int64_t) =
		dispatch_walltime;
static dispatch_qos_class_t (*const hm_get_qos)(dispatch_queue_t, int *) =
		dispatch_queue_get_qos_class;
static void (*const hm_set_width)(dispatch_queue_t, long) = dispatch_queue_set_width;
static uint64_t (*const hm_benchmark_f)(size_t, void *, dispatch_function_t) =
		dispatch_benchmark_f;
static void (*const hm_once_f)(dispatch_once_t *, void *, dispatch_function_t) =
		dispatch_once_f;

static void hm_work(void *context)
{
	(void)context;
}

static void hm_apply_work(void *context, size_t i)
{
	(void)context;
	(void)i;
}

/* Calls the inline functions and expands the function-like macros. Never run: the
 * matrix only compiles. */
void header_matrix_use(void);
void header_matrix_use(void)
{
	static dispatch_once_t once;
	dispatch_queue_main_t main_queue = dispatch_get_main_queue();
	dispatch_queue_t q = dispatch_queue_create("hm", DISPATCH_QUEUE_SERIAL);
	dispatch_queue_t c = dispatch_queue_create("hm.c", DISPATCH_QUEUE_CONCURRENT);
	dispatch_queue_t inactive = dispatch_queue_create("hm.i", DISPATCH_QUEUE_SERIAL_INACTIVE);
	dispatch_queue_t cinactive = dispatch_queue_create_with_target("hm.ci",
			DISPATCH_QUEUE_CONCURRENT_INACTIVE, DISPATCH_TARGET_QUEUE_DEFAULT);
	dispatch_queue_global_t global = dispatch_get_global_queue(
			DISPATCH_QUEUE_PRIORITY_BACKGROUND, DISPATCH_QUEUE_OVERCOMMIT);
	dispatch_queue_attr_t attr = dispatch_queue_attr_make_with_qos_class(
			DISPATCH_QUEUE_CONCURRENT, QOS_CLASS_UTILITY, QOS_MIN_RELATIVE_PRIORITY);
	dispatch_group_t g = dispatch_group_create();
	dispatch_semaphore_t s = dispatch_semaphore_create(0);
	int relative = 0;
	void *pointer;
	const char *label;
	dispatch_qos_class_t qos;
	
	attr = dispatch_queue_attr_make_with_autorelease_frequency(attr,
			DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM);
	attr = dispatch_queue_attr_make_with_overcommit(attr, true);
	(void)attr;

	/* Objects convert to dispatch_object_t without a cast, in C and C++. */
	dispatch_retain(q);
	dispatch_release(q);
	dispatch_retain(g);
	dispatch_release(s);
	dispatch_set_context(main_queue, &once);
	pointer = dispatch_get_context(global);
	dispatch_set_finalizer_f(c, hm_work);
	dispatch_suspend(c);
	dispatch_resume(c);
	dispatch_activate(inactive);
	dispatch_activate(cinactive);
	dispatch_set_target_queue(q, global);
	dispatch_set_target_queue(c, DISPATCH_TARGET_QUEUE_DEFAULT);
	dispatch_debug(q, "%s %d", "queue", 1);

	/* Submission with the _f forms. */
	dispatch_async_f(main_queue, NULL, hm_work);
	dispatch_sync_f(q, NULL, hm_work);
	dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, HM_CAST(int64_t, NSEC_PER_MSEC)), q, NULL, hm_work);
	dispatch_after_f(dispatch_walltime(NULL, 0), q, NULL, hm_work);
	dispatch_after_f(dispatch_time(DISPATCH_WALLTIME_NOW, 1), q, NULL, hm_work);
	dispatch_apply_f(4, DISPATCH_APPLY_AUTO, NULL, hm_apply_work);
	dispatch_group_async_f(g, c, NULL, hm_work);
	dispatch_group_notify_f(g, q, NULL, hm_work);
	(void)dispatch_group_wait(g, DISPATCH_TIME_FOREVER);
	(void)dispatch_semaphore_signal(s);
	(void)dispatch_semaphore_wait(s, DISPATCH_TIME_NOW);
	label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
	qos = dispatch_queue_get_qos_class(q, &relative);
	dispatch_queue_set_specific(q, &once, &relative, NULL);
	pointer = dispatch_queue_get_specific(q, &once);
	pointer = dispatch_get_specific(&once);
	dispatch_assert_queue_debug(q);
	dispatch_assert_queue_barrier_debug(q);
	dispatch_assert_queue_not_debug(q);
	dispatch_queue_set_width(c, DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS);
	(void)dispatch_benchmark_f(10, NULL, hm_work);

	/* The inline fast path of dispatch_once_f. */
	dispatch_once_f(&once, NULL, hm_work);

	/* Type-generic calls (object.h): _Generic macros in C11, overloads in C++; absent
	 * where neither exists (gcc -std=c99), where only the unavailable declarations are. */
#if defined(__cplusplus) || defined(dispatch_wait)
	(void)dispatch_wait(g, DISPATCH_TIME_NOW);
	(void)dispatch_wait(s, dispatch_time(DISPATCH_TIME_NOW, HM_CAST(int64_t, NSEC_PER_MSEC)));
#endif

#ifdef __BLOCKS__
	{
		__block int counter = 0;
		dispatch_block_flags_t flags = DISPATCH_BLOCK_BARRIER | DISPATCH_BLOCK_DETACHED;
		dispatch_block_t b = dispatch_block_create(flags, ^{ counter++; });
		dispatch_block_t bq = dispatch_block_create_with_qos_class(
				DISPATCH_BLOCK_ENFORCE_QOS_CLASS, QOS_CLASS_USER_INITIATED, 0,
				^{ counter--; });
		dispatch_async(q, b);
		dispatch_sync(q, ^{ counter++; });
		dispatch_async_and_wait(q, ^{ counter++; });
		dispatch_barrier_async(c, b);
		dispatch_barrier_sync(c, ^{ counter++; });
		dispatch_barrier_async_and_wait(c, ^{ counter++; });
		dispatch_after(DISPATCH_TIME_NOW, q, bq);
		dispatch_apply(3, c, ^(size_t i) { counter += HM_CAST(int, i); });
		dispatch_group_async(g, q, ^{ counter++; });
		dispatch_group_notify(g, q, ^{ counter++; });
		dispatch_block_perform(DISPATCH_BLOCK_NO_QOS_CLASS, ^{ counter++; });
		dispatch_block_notify(b, q, ^{ counter++; });
		dispatch_block_cancel(bq);
		(void)dispatch_block_testcancel(bq);
		(void)dispatch_block_wait(b, DISPATCH_TIME_FOREVER);
#if defined(__cplusplus) || defined(dispatch_notify)
		(void)dispatch_wait(b, DISPATCH_TIME_NOW);
		dispatch_notify(g, q, ^{ counter++; });
		dispatch_notify(b, main_queue, ^{ counter++; });
		dispatch_cancel(bq);
		(void)dispatch_testcancel(bq);
#endif
		(void)dispatch_benchmark(10, ^{ counter++; });
		/* The inline fast path of dispatch_once. */
		dispatch_once(&once, ^{ counter++; });
		(void)counter;
	}
#endif

	(void)pointer;
	(void)label;
	(void)qos;
	dispatch_main();
	(void)hm_async_f; (void)hm_after_f; (void)hm_apply_f; (void)hm_global;
	(void)hm_group_wait; (void)hm_sema_wait; (void)hm_sema_create; (void)hm_time;
	(void)hm_walltime; (void)hm_get_qos; (void)hm_set_width; (void)hm_benchmark_f;
	(void)hm_once_f; (void)hm_current_queue;
}

/* data.h: exact signatures, the constants, the _f forms with every destructor spelling,
 * and the block forms. */
static dispatch_data_t (*const hm_data_create_f)(const void *, size_t, dispatch_queue_t,
		dispatch_function_t) = dispatch_data_create_f;
static size_t (*const hm_data_get_size)(dispatch_data_t) = dispatch_data_get_size;
static dispatch_data_t (*const hm_data_create_map)(dispatch_data_t, const void **, size_t *) =
		dispatch_data_create_map;
static dispatch_data_t (*const hm_data_create_concat)(dispatch_data_t, dispatch_data_t) =
		dispatch_data_create_concat;
static dispatch_data_t (*const hm_data_create_subrange)(dispatch_data_t, size_t, size_t) =
		dispatch_data_create_subrange;
static bool (*const hm_data_apply_f)(dispatch_data_t, void *, dispatch_data_applier_function_t) =
		dispatch_data_apply_f;
static dispatch_data_t (*const hm_data_copy_region)(dispatch_data_t, size_t, size_t *) =
		dispatch_data_copy_region;
#ifdef __BLOCKS__
static dispatch_data_t (*const hm_data_create)(const void *, size_t, dispatch_queue_t,
		dispatch_block_t) = dispatch_data_create;
#endif

static bool hm_data_applier(void *context, dispatch_data_t region, size_t offset,
		const void *buffer, size_t size)
{
	(void)context; (void)region; (void)offset; (void)buffer; (void)size;
	return true;
}

void header_matrix_use_data(void);
void header_matrix_use_data(void)
{
	static char bytes[16];
	const void *buffer = NULL;
	size_t size = 0, offset = 0;
	dispatch_queue_t q = dispatch_queue_create("hm.data", DISPATCH_QUEUE_SERIAL);
	dispatch_data_t empty = dispatch_data_empty;
	dispatch_data_t copied = dispatch_data_create_f(bytes, sizeof bytes, q,
			DISPATCH_DATA_DESTRUCTOR_DEFAULT);
	dispatch_data_t freed = dispatch_data_create_f(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_FREE_F);
	dispatch_data_t unmapped = dispatch_data_create_f(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_MUNMAP_F);
	dispatch_data_t called = dispatch_data_create_f(bytes, 1, q, hm_work);
#ifndef __BLOCKS__
	dispatch_data_t plain = dispatch_data_create_f(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_FREE);
	dispatch_release(plain);
	plain = dispatch_data_create_f(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_MUNMAP);
	dispatch_release(plain);
#endif
	dispatch_data_t map = dispatch_data_create_map(copied, &buffer, &size);
	dispatch_data_t both = dispatch_data_create_concat(copied, empty);
	dispatch_data_t part = dispatch_data_create_subrange(both, 1, 2);
	dispatch_data_t region = dispatch_data_copy_region(both, 0, &offset);
	(void)dispatch_data_apply_f(both, NULL, hm_data_applier);
	size += dispatch_data_get_size(part);
#ifdef __BLOCKS__
	{
		dispatch_data_t b1 = dispatch_data_create(bytes, 1, q, ^{ bytes[0]++; });
		dispatch_data_t b2 = dispatch_data_create(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_FREE);
		dispatch_data_t b3 = dispatch_data_create(bytes, 1, NULL, DISPATCH_DATA_DESTRUCTOR_MUNMAP);
		dispatch_data_applier_t applier = ^bool(dispatch_data_t r, size_t o, const void *p, size_t s) {
			(void)r; (void)o; (void)p;
			return s > 0;
		};
		(void)dispatch_data_apply(b1, applier);
		dispatch_release(b1);
		dispatch_release(b2);
		dispatch_release(b3);
	}
	(void)hm_data_create;
#endif
	dispatch_release(region);
	dispatch_release(part);
	dispatch_release(both);
	dispatch_release(map);
	dispatch_release(called);
	dispatch_release(unmapped);
	dispatch_release(freed);
	dispatch_release(copied);
	dispatch_release(q);
	(void)buffer; (void)size;
	(void)hm_data_create_f; (void)hm_data_get_size; (void)hm_data_create_map;
	(void)hm_data_create_concat; (void)hm_data_create_subrange; (void)hm_data_apply_f;
	(void)hm_data_copy_region;
}
