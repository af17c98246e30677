// The rest of libdispatch's private export list (private.h): queue labels without a copy,
// the QoS setters, the voucher-era calls, libdispatch's runtime hooks and the _os_object
// reference counting. Run against the toolchain's libdispatch too (run-reference.sh): each
// expectation outside `#ifndef GC_REFERENCE_LIBDISPATCH` is what libdispatch does on Linux.
#include "check.h"

#ifdef __BLOCKS__
#include <Block.h>
#endif

#ifdef GC_REFERENCE_LIBDISPATCH
typedef struct voucher_s *voucher_t;
void dispatch_queue_set_label_nocopy(dispatch_queue_t queue, const char *label);
void dispatch_set_qos_class(dispatch_object_t object, dispatch_qos_class_t qos_class, int relative_priority);
void dispatch_set_qos_class_floor(dispatch_object_t object, dispatch_qos_class_t qos_class, int relative_priority);
void dispatch_set_qos_class_fallback(dispatch_object_t object, dispatch_qos_class_t qos_class);
void dispatch_async_enforce_qos_class_f(dispatch_queue_t queue, void *context, dispatch_function_t work);
dispatch_queue_t dispatch_queue_create_with_accounting_override_voucher(const char *label,
		dispatch_queue_attr_t attr, voucher_t voucher);
dispatch_block_t dispatch_block_create_with_voucher(dispatch_block_flags_t flags, voucher_t voucher,
		dispatch_block_t block);
dispatch_block_t dispatch_block_create_with_voucher_and_qos_class(dispatch_block_flags_t flags,
		voucher_t voucher, dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t block);
extern void *const _dispatch_block_special_invoke;
extern void *(*_dispatch_begin_NSAutoReleasePool)(void);
extern void (*_dispatch_end_NSAutoReleasePool)(void *);
struct dispatch_queue_offsets_s { const uint16_t dqo_version; const uint16_t rest[16]; };
extern const struct dispatch_queue_offsets_s dispatch_queue_offsets;
void *_dispatch_wait_for_enqueuer(void **slot);
void _dispatch_iocntl(uint32_t parameter, uint64_t value);
void _dispatch_poll_for_events_4launchd(void);
bool _dispatch_workloop_should_yield_4NW(void);
void _dispatch_log(const char *message, ...);
void _dispatch_bug(size_t line, long value);
typedef void *_os_object_t;
_os_object_t _os_object_alloc(const void *cls, size_t size);
_os_object_t _os_object_alloc_realized(const void *cls, size_t size);
void _os_object_dealloc(_os_object_t object);
_os_object_t _os_object_retain(_os_object_t object);
_os_object_t _os_object_retain_with_resurrect(_os_object_t object);
void _os_object_release(_os_object_t object);
_os_object_t _os_object_retain_internal(_os_object_t object);
_os_object_t _os_object_retain_internal_n(_os_object_t object, uint16_t n);
void _os_object_release_internal(_os_object_t object);
void _os_object_release_internal_n(_os_object_t object, uint16_t n);
#endif

static void labels(void) {
	check_section("dispatch_queue_set_label_nocopy");
	dispatch_queue_t q = dispatch_queue_create(NULL, NULL);
	CHECK_STR(dispatch_queue_get_label(q), "");
	static const char mine[] = "nocopy-label";
	dispatch_queue_set_label_nocopy(q, mine);
	CHECK(dispatch_queue_get_label(q) == mine);
	dispatch_queue_set_label_nocopy(q, "again");
	CHECK_STR(dispatch_queue_get_label(q), "again");
	dispatch_release(q);
	const char *main_label = dispatch_queue_get_label(dispatch_get_main_queue());
	dispatch_queue_set_label_nocopy(dispatch_get_main_queue(), "not the main label");
	CHECK(dispatch_queue_get_label(dispatch_get_main_queue()) == main_label);
}

static void relabel_owned(void) {
	dispatch_queue_t q = dispatch_queue_create("owned", NULL);
	dispatch_queue_set_label_nocopy(q, "other");
}

static void qos(void) {
	check_section("dispatch_set_qos_class and _floor on inactive queues");
	int relative = 1;
	dispatch_queue_t q = dispatch_queue_create("qos", DISPATCH_QUEUE_SERIAL_INACTIVE);
	dispatch_set_qos_class(q, QOS_CLASS_UTILITY, -3);
	CHECK_EQ(dispatch_queue_get_qos_class(q, &relative), QOS_CLASS_UTILITY);
	CHECK_EQ(relative, -3);
	dispatch_activate(q);
	dispatch_sync_f(q, NULL, noop_function);
	dispatch_release(q);
	q = dispatch_queue_create("floor", DISPATCH_QUEUE_SERIAL_INACTIVE);
	dispatch_set_qos_class_floor(q, QOS_CLASS_USER_INITIATED, -2);
	CHECK_EQ(dispatch_queue_get_qos_class(q, &relative), QOS_CLASS_USER_INITIATED);
	CHECK_EQ(relative, -2);
	dispatch_activate(q);
	dispatch_release(q);
	q = dispatch_queue_create("fallback", DISPATCH_QUEUE_SERIAL_INACTIVE);
	dispatch_set_qos_class_fallback(q, QOS_CLASS_BACKGROUND);
	CHECK_EQ(dispatch_queue_get_qos_class(q, &relative), QOS_CLASS_UNSPECIFIED);
	dispatch_activate(q);
	dispatch_release(q);
}

static dispatch_queue_t active_queue;
static void qos_on_active(void) {
	active_queue = dispatch_queue_create("active", NULL);
	dispatch_set_qos_class(active_queue, QOS_CLASS_UTILITY, 0);
}
static void accounting_voucher(void) {
	(void)dispatch_queue_create_with_accounting_override_voucher("x", NULL, NULL);
}

static atomic_long enforced;
static void count_enforced(void *context) { atomic_fetch_add(&enforced, (long)(intptr_t)context); }

struct block_layout { void *isa; int flags; int reserved; void *invoke; };

static void hooks(void) {
	check_section("dispatch_async_enforce_qos_class_f runs the function on the queue");
	dispatch_queue_t q = dispatch_queue_create("enforce", NULL);
	for (int i = 0; i < 1000; i++) dispatch_async_enforce_qos_class_f(q, (void *)(intptr_t)1, count_enforced);
	dispatch_sync_f(q, NULL, noop_function);
	CHECK_EQ(atomic_load(&enforced), 1000);
	dispatch_release(q);

	check_section("runtime hooks");
	CHECK(_dispatch_begin_NSAutoReleasePool == NULL);
	CHECK(_dispatch_end_NSAutoReleasePool == NULL);
	CHECK_EQ(dispatch_queue_offsets.dqo_version, 6);
	void *value = (void *)0x1234;
	CHECK(_dispatch_wait_for_enqueuer(&value) == (void *)0x1234);
	_dispatch_iocntl(1, 4);
	_dispatch_poll_for_events_4launchd();
#ifndef GC_REFERENCE_LIBDISPATCH
	// libdispatch's reads its thread's workloop state and crashes on a thread without one.
	CHECK(!_dispatch_workloop_should_yield_4NW());
#endif

#ifdef __BLOCKS__
	check_section("blocks with vouchers are dispatch_block_create blocks");
	__block int ran = 0;
	dispatch_block_t b = dispatch_block_create_with_voucher(0, NULL, ^{ ran++; });
	CHECK(b != NULL);
	CHECK(((struct block_layout *)(void *)b)->invoke == _dispatch_block_special_invoke);
	b();
	CHECK_EQ(dispatch_block_wait(b, DISPATCH_TIME_NOW), 0);
	Block_release(b);
	b = dispatch_block_create_with_voucher_and_qos_class(0, NULL, QOS_CLASS_UTILITY, -1, ^{ ran++; });
	CHECK(b != NULL);
	dispatch_block_perform(0, b);
	b();
	CHECK_EQ(ran, 3);
	Block_release(b);
	CHECK(dispatch_block_create_with_voucher_and_qos_class(0, NULL, 0x42, 0, ^{}) == NULL);
	dispatch_block_t plain = dispatch_block_create(0, ^{});
	CHECK(((struct block_layout *)(void *)plain)->invoke == _dispatch_block_special_invoke);
	Block_release(plain);
#endif
}

// MARK: - _os_object

static atomic_long xref_disposed, disposed;
static void on_xref_dispose(_os_object_t object) {
	atomic_fetch_add(&xref_disposed, 1);
	_os_object_release_internal(object);   // what a default xref_dispose does
}
static void on_dispose(_os_object_t object) {
	atomic_fetch_add(&disposed, 1);
	_os_object_dealloc(object);
}
static const struct { void (*xref_dispose)(_os_object_t); void (*dispose)(_os_object_t); } vtable = {
	on_xref_dispose, on_dispose,
};
struct header { const void *isa; int ref_cnt; int xref_cnt; };

static void os_objects(void) {
	check_section("_os_object counts in libdispatch's layout");
	struct header *o = _os_object_alloc_realized(&vtable, 64);
	CHECK(o->isa == &vtable);
	CHECK_EQ(o->ref_cnt, 0);
	CHECK_EQ(o->xref_cnt, 0);
	CHECK(_os_object_retain(o) == o);
	CHECK_EQ(o->xref_cnt, 1);
	_os_object_retain_internal_n(o, 3);
	CHECK_EQ(o->ref_cnt, 3);
	_os_object_release_internal_n(o, 3);
	_os_object_release(o);
	CHECK_EQ(o->xref_cnt, 0);
	CHECK_EQ(atomic_load(&xref_disposed), 0);
	_os_object_release(o);   // external count -1: xref_dispose, which drops the internal one
	CHECK_EQ(atomic_load(&xref_disposed), 1);
	CHECK_EQ(atomic_load(&disposed), 1);

	check_section("_os_object_retain_with_resurrect");
	static const struct { void (*xref_dispose)(_os_object_t); void (*dispose)(_os_object_t); } keep = {
		NULL, on_dispose,
	};
	o = _os_object_alloc(&keep, sizeof *o);
	_os_object_retain_internal(o);       // something internal keeps it
	_os_object_release(o);               // external -1: the internal reference it held goes
	CHECK_EQ(o->xref_cnt, -1);
	CHECK_EQ(o->ref_cnt, 0);
	_os_object_retain_with_resurrect(o); // back: external 0, internal reference taken again
	CHECK_EQ(o->xref_cnt, 0);
	CHECK_EQ(o->ref_cnt, 1);
	_os_object_release_internal(o);
	_os_object_release(o);
	CHECK_EQ(atomic_load(&disposed), 2);

	check_section("_os_object calls on dispatch objects are dispatch_retain/release");
	dispatch_queue_t q = dispatch_queue_create("os_object", NULL);
	_os_object_retain(q);
	dispatch_release(q);
	dispatch_sync_f(q, NULL, noop_function);   // still alive: the _os_object_retain holds it
	_os_object_retain_internal(q);
	_os_object_release_internal(q);
	_os_object_release(q);
}

static void os_over_release(void) {
	struct header *o = _os_object_alloc(NULL, sizeof *o);
	_os_object_release(o);   // -1: frees it (no vtable); the next one is an over-release
	o = _os_object_alloc(NULL, sizeof *o);
	o->xref_cnt = -1;
	_os_object_release(o);
}

static void log_calls(void) {
	check_section("_dispatch_log and _dispatch_bug: silent without LIBDISPATCH_LOG");
	unsetenv("LIBDISPATCH_LOG");
	_dispatch_log("hello %d", 42);
	_dispatch_bug(123, 0x55);
}

int main(void) {
	check_start("exports_private", 50);
	check_section("misuse");
	expect_client_bug("dispatch_queue_set_label_nocopy", relabel_owned);
	expect_client_bug("dispatch_set_qos_class", qos_on_active);
	expect_client_bug("dispatch_queue_create_with_accounting_override_voucher", accounting_voucher);
	expect_client_bug("_os_object_release", os_over_release);
	labels();
	qos();
	hooks();
	os_objects();
	log_calls();
	check_pass();
}
