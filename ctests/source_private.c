// The private source calls (private.h): dispatch_source_cancel_and_wait,
// dispatch_source_get_extended_data, dispatch_source_set_mandatory_cancel_handler(_f), and
// DISPATCH_SOURCE_TYPE_INTERVAL. Run against the toolchain's libdispatch too
// (ctests/run-reference.sh source_private): each expectation is what libdispatch does on
// Linux.
#include "check.h"

#ifdef GC_REFERENCE_LIBDISPATCH
extern const struct dispatch_source_type_s _dispatch_source_type_interval;
#define DISPATCH_SOURCE_TYPE_INTERVAL (&_dispatch_source_type_interval)
#define DISPATCH_INTERVAL_UI_ANIMATION 0x20
typedef struct dispatch_source_extended_data_s {
	unsigned long data;
	unsigned long status;
} *dispatch_source_extended_data_t;
void dispatch_source_cancel_and_wait(dispatch_source_t source);
size_t dispatch_source_get_extended_data(dispatch_source_t source, dispatch_source_extended_data_t data,
		size_t size);
void dispatch_source_set_mandatory_cancel_handler_f(dispatch_source_t source, dispatch_function_t handler);
void dispatch_source_set_mandatory_cancel_handler(dispatch_source_t source, dispatch_block_t handler);
#endif

// MARK: - cancel_and_wait: when it returns, no handler runs or will run

typedef struct {
	dispatch_source_t source;
	atomic_long running;   // handlers inside their body right now
	atomic_long calls;
	atomic_bool stop;
} watched_t;

static void slow_handler(void *context) {
	watched_t *w = context;
	atomic_fetch_add(&w->running, 1);
	atomic_fetch_add(&w->calls, 1);
	for (volatile int i = 0; i < 2000; i++) {}
	atomic_fetch_sub(&w->running, 1);
}

static void *merger(void *context) {
	watched_t *w = context;
	for (unsigned i = 1; !atomic_load(&w->stop); i++) {
		dispatch_source_merge_data(w->source, 1);
		if (i % 64 == 0) sched_yield();   // 2 CPUs shared with other work: let the handler run
	}
	return NULL;
}

static void cancel_and_wait_rounds(void) {
	check_section("cancel_and_wait while events arrive: 1,000 rounds");
	dispatch_queue_t q = dispatch_queue_create("cancel_and_wait", NULL);
	for (int round = 0; round < 1000; round++) {
		watched_t w = { .running = 0, .calls = 0, .stop = false };
		w.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0,
				round % 2 ? q : dispatch_get_global_queue(0, 0));
		dispatch_set_context(w.source, &w);
		dispatch_source_set_event_handler_f(w.source, slow_handler);
		dispatch_activate(w.source);
		pthread_t t;
		pthread_create(&t, NULL, merger, &w);
		while (atomic_load(&w.calls) < 1 + round % 3) sched_yield();
		dispatch_source_cancel_and_wait(w.source);
		CHECKF(atomic_load(&w.running) == 0, "round %d: a handler still runs", round);
		long calls = atomic_load(&w.calls);
		CHECK(dispatch_source_testcancel(w.source));
		atomic_store(&w.stop, true);
		pthread_join(t, NULL);
		if (round % 100 == 0) sleep_ms(2);
		CHECKF(atomic_load(&w.calls) == calls, "round %d: a handler ran after cancel_and_wait", round);
		dispatch_release(w.source);
	}
	dispatch_release(q);

	check_section("cancel_and_wait on an inactive source cancels and activates it");
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR, 0, 0, NULL);
	dispatch_source_cancel_and_wait(s);
	CHECK(dispatch_source_testcancel(s));
	dispatch_release(s);   // an inactive source could not be released

	check_section("cancel_and_wait twice");
	s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR, 0, 0, NULL);
	dispatch_activate(s);
	dispatch_source_cancel_and_wait(s);
	dispatch_source_cancel_and_wait(s);
	CHECK(dispatch_source_testcancel(s));
	dispatch_release(s);
}

static void noop(void *context) { (void)context; }

static void with_cancel_handler(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_source_set_cancel_handler_f(s, noop);
	dispatch_activate(s);
	dispatch_source_cancel_and_wait(s);
}

static void suspended(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_activate(s);
	dispatch_suspend(s);
	dispatch_source_cancel_and_wait(s);
}

static void wait_from_handler(void *context) {
	dispatch_source_cancel_and_wait((dispatch_source_t)context);
}
static void from_own_handler(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_set_context(s, s);
	dispatch_source_set_event_handler_f(s, wait_from_handler);
	dispatch_activate(s);
	dispatch_source_merge_data(s, 1);
	for (;;) sleep(1);   // the handler crashes the process; a signal may cut one sleep short
}

static void release_uncancelled_mandatory(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_source_set_mandatory_cancel_handler_f(s, noop);
	dispatch_activate(s);
	dispatch_release(s);
	sleep(5);
}

static void mandatory_on_active(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_activate(s);
	dispatch_source_set_mandatory_cancel_handler_f(s, noop);
}

static void handler_after_mandatory(void) {
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_source_set_mandatory_cancel_handler_f(s, noop);
	dispatch_activate(s);
	dispatch_source_set_event_handler_f(s, noop);
}

// MARK: - extended data

static atomic_long extended_seen;
static void extended_handler(void *context) {
	dispatch_source_t s = context;
	struct dispatch_source_extended_data_s e = { 7, 7 };
	size_t n = dispatch_source_get_extended_data(s, &e, sizeof e);
	if (n == sizeof e && e.status == 0 && e.data == dispatch_source_get_data(s)) {
		atomic_store(&extended_seen, (long)e.data);
	} else {
		atomic_store(&extended_seen, -1);
	}
}

static void extended_data(void) {
	check_section("get_extended_data");
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR, 0, 0, NULL);
	unsigned char buffer[32];
	memset(buffer, 0x55, sizeof buffer);
	CHECK_EQ(dispatch_source_get_extended_data(s, (dispatch_source_extended_data_t)(void *)buffer, sizeof buffer), 16);
	for (size_t i = 0; i < sizeof buffer; i++) CHECKF(buffer[i] == 0, "byte %zu is %02x", i, buffer[i]);
	memset(buffer, 0x55, sizeof buffer);
	CHECK_EQ(dispatch_source_get_extended_data(s, (dispatch_source_extended_data_t)(void *)buffer, 12), 12);
	for (size_t i = 0; i < 8; i++) CHECK(buffer[i] == 0);
	for (size_t i = 8; i < sizeof buffer; i++) CHECKF(buffer[i] == 0x55, "byte %zu written", i);
	memset(buffer, 0x55, sizeof buffer);
	CHECK_EQ(dispatch_source_get_extended_data(s, (dispatch_source_extended_data_t)(void *)buffer, 4), 4);
	for (size_t i = 0; i < sizeof buffer; i++) CHECK(buffer[i] == 0x55);
	CHECK_EQ(dispatch_source_get_extended_data(s, (dispatch_source_extended_data_t)(void *)buffer, 0), 0);

	dispatch_set_context(s, s);
	dispatch_source_set_event_handler_f(s, extended_handler);
	dispatch_activate(s);
	dispatch_source_merge_data(s, 0x30);
	CHECK(wait_for_count(&extended_seen, 0x30, 10));
	dispatch_source_cancel(s);
	dispatch_release(s);
}

// MARK: - mandatory cancel handler

static atomic_long mandatory_runs;
static void count_mandatory(void *context) { (void)context; atomic_fetch_add(&mandatory_runs, 1); }

static void mandatory(void) {
	check_section("mandatory cancel handler runs on cancel");
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_source_set_mandatory_cancel_handler_f(s, count_mandatory);
	dispatch_activate(s);
	dispatch_source_cancel(s);
	dispatch_release(s);
	CHECK(wait_for_count(&mandatory_runs, 1, 10));
#ifdef __BLOCKS__
	__block atomic_long block_runs = 0;
	s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	dispatch_source_set_mandatory_cancel_handler(s, ^{ atomic_fetch_add(&block_runs, 1); });
	dispatch_activate(s);
	dispatch_source_cancel(s);
	dispatch_release(s);
	CHECK(wait_for_count(&block_runs, 1, 10));
#endif
}

// MARK: - interval sources

typedef struct {
	atomic_long fires;
	atomic_long data;
} interval_t;
static void interval_fired(void *context) {
	interval_t *i = context;
	atomic_fetch_add(&i->fires, 1);
}

static void interval(void) {
	check_section("interval: what dispatch_source_create accepts");
	CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_INTERVAL, 0, 0, NULL) == NULL);
	CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_INTERVAL, 10, 0x40, NULL) == NULL);
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_INTERVAL, 10, DISPATCH_INTERVAL_UI_ANIMATION, NULL);
	CHECK(s != NULL);
	CHECK_EQ(dispatch_source_get_handle(s), 1);
	CHECK_EQ(dispatch_source_get_mask(s), 0x30);
	dispatch_source_cancel(s);
	dispatch_activate(s);
	dispatch_release(s);

	check_section("interval: fires every interval once resumed, stops when cancelled");
	interval_t state = { 0, 0 };
	s = dispatch_source_create(DISPATCH_SOURCE_TYPE_INTERVAL, 20, 0, dispatch_get_global_queue(0, 0));
	CHECK_EQ(dispatch_source_get_handle(s), 1);
	CHECK_EQ(dispatch_source_get_mask(s), 0x10);
	dispatch_set_context(s, &state);
	dispatch_source_set_event_handler_f(s, interval_fired);
	dispatch_activate(s);
	CHECK(wait_for_count(&state.fires, 5, 20));
	dispatch_source_cancel_and_wait(s);
	long fires = atomic_load(&state.fires);
	sleep_ms(100);
	CHECK_EQ(atomic_load(&state.fires), fires);
	dispatch_release(s);

	check_section("interval: dispatch_source_set_timer(FOREVER) stops it");
	interval_t quiet = { 0, 0 };
	s = dispatch_source_create(DISPATCH_SOURCE_TYPE_INTERVAL, 10, 0, dispatch_get_global_queue(0, 0));
	dispatch_set_context(s, &quiet);
	dispatch_source_set_event_handler_f(s, interval_fired);
	dispatch_source_set_timer(s, DISPATCH_TIME_FOREVER, 0, 0);
	dispatch_activate(s);
	sleep_ms(100);
	CHECK_EQ(atomic_load(&quiet.fires), 0);
	dispatch_source_set_timer(s, DISPATCH_TIME_NOW, 10, 500);
	CHECK(wait_for_count(&quiet.fires, 2, 20));
	dispatch_source_cancel_and_wait(s);
	dispatch_release(s);
}

int main(void) {
	check_start("source_private", 110);
	check_section("misuse");
	expect_client_bug("dispatch_source_cancel_and_wait", with_cancel_handler);
	expect_client_bug("dispatch_source_cancel_and_wait", suspended);
	expect_client_bug("dispatch_source_cancel_and_wait", from_own_handler);
	expect_client_bug("dispatch_release", release_uncancelled_mandatory);
	expect_client_bug("dispatch_source_set_mandatory_cancel_handler_f", mandatory_on_active);
	expect_client_bug("dispatch_source_set_event_handler_f", handler_after_mandatory);
	cancel_and_wait_rounds();
	extended_data();
	mandatory();
	interval();
	check_pass();
}
