// Workloops (private.h): a serial context for its items and those of the queues that
// target it, usable as a target. On Linux, libdispatch runs a workloop's items in
// submission order, and so does GrandCentral; the test holds both to that (run-reference.sh
// workloop). GrandCentral-only: dispatch_workloop_is_current / _copy_current find the
// workloop from its items (libdispatch on Linux answers false / NULL there); queues that
// target a workloop (libdispatch on Linux crashes with SIGSEGV when one drains); and the
// QoS a workloop reports (libdispatch: 0).
#include "check.h"

#ifdef GC_REFERENCE_LIBDISPATCH
typedef dispatch_queue_t dispatch_workloop_t;
dispatch_workloop_t dispatch_workloop_create(const char *label);
dispatch_workloop_t dispatch_workloop_create_inactive(const char *label);
dispatch_workloop_t dispatch_workloop_copy_current(void);
bool dispatch_workloop_is_current(dispatch_workloop_t workloop);
void dispatch_workloop_set_qos_class_floor(dispatch_workloop_t workloop, dispatch_qos_class_t qos,
		int relative_priority, uint64_t flags);
void dispatch_workloop_set_qos_class(dispatch_workloop_t workloop, dispatch_qos_class_t qos, uint64_t flags);
void dispatch_workloop_set_autorelease_frequency(dispatch_workloop_t workloop, unsigned long frequency);
#endif

#define ITEMS 100000
#define SOURCES 8

typedef struct {
	long next[SOURCES];    // per serial queue: the sequence number expected next
	atomic_long running;   // items inside their body right now
	atomic_long overlaps;
	atomic_long done;
	long order_errors;
	long last_direct;
} state_t;

typedef struct {
	state_t *state;
	int source;
	long seq;
} item_t;

static void run_item(void *context) {
	item_t *item = context;
	state_t *s = item->state;
	if (atomic_fetch_add(&s->running, 1) != 0) atomic_fetch_add(&s->overlaps, 1);
	if (item->source < 0) {
		if (item->seq != s->last_direct + 1) s->order_errors++;
		s->last_direct = item->seq;
	} else {
		if (s->next[item->source] != item->seq) s->order_errors++;
		s->next[item->source] = item->seq + 1;
	}
	atomic_fetch_sub(&s->running, 1);
	atomic_fetch_add(&s->done, 1);
}

static void order_and_exclusion(void) {
	check_section("FIFO and one item at a time: 100,000 items, direct and through 8 serial queues");
	dispatch_workloop_t w = dispatch_workloop_create("wl");
	CHECK_STR(dispatch_queue_get_label(w), "wl");
	dispatch_queue_t serial[SOURCES];
	for (int i = 0; i < SOURCES; i++) serial[i] = dispatch_queue_create_with_target("into-wl", NULL, w);
	static state_t state;
	state.last_direct = -1;
	item_t *items = calloc(ITEMS, sizeof *items);
	long seq[SOURCES] = {0};
	long direct = 0;
	for (long i = 0; i < ITEMS; i++) {
#ifdef GC_REFERENCE_LIBDISPATCH
		// libdispatch on Linux crashes (SIGSEGV) when a queue targeting a workloop drains.
		int source = -1;
#else
		int source = (int)(i % (SOURCES + 1)) - 1;   // -1: straight onto the workloop
#endif
		items[i].state = &state;
		items[i].source = source;
		items[i].seq = source < 0 ? direct++ : seq[source]++;
		dispatch_async_f(source < 0 ? w : serial[source], &items[i], run_item);
	}
	CHECK(wait_for_count(&state.done, ITEMS, 40));
	CHECK_EQ(atomic_load(&state.overlaps), 0);
	CHECK_EQ(state.order_errors, 0);
	for (int i = 0; i < SOURCES; i++) dispatch_release(serial[i]);
	dispatch_release(w);
	free(items);
}

typedef struct { dispatch_workloop_t w; atomic_long ok; } current_t;
static void check_current(void *context) {
	current_t *c = context;
	bool is = dispatch_workloop_is_current(c->w);
	dispatch_workloop_t copy = dispatch_workloop_copy_current();
	if (is && copy == c->w) atomic_fetch_add(&c->ok, 1);
	if (copy) dispatch_release(copy);
}

static void current(void) {
	check_section("dispatch_async_and_wait on a workloop");
	dispatch_workloop_t w = dispatch_workloop_create("current");
	current_t c = { w, 0 };
	static atomic_long ran;
	dispatch_async_and_wait_f(w, &ran, (dispatch_function_t)(void (*)(void *))noop_function);
#ifndef GC_REFERENCE_LIBDISPATCH
	check_section("is_current and copy_current inside items, directly and through a queue");
	dispatch_async_and_wait_f(w, &c, check_current);
	dispatch_queue_t q = dispatch_queue_create_with_target("through", NULL, w);
	dispatch_async_f(q, &c, check_current);
	dispatch_sync_f(q, NULL, noop_function);
	CHECK_EQ(atomic_load(&c.ok), 2);
	CHECK(!dispatch_workloop_is_current(w));
	CHECK(dispatch_workloop_copy_current() == NULL);
	dispatch_release(q);
#else
	(void)c;
#endif
	dispatch_release(w);
}

static void properties(void) {
	check_section("properties of an inactive workloop");
	int relative = 1;
	dispatch_workloop_t w = dispatch_workloop_create_inactive("props");
	dispatch_workloop_set_qos_class_floor(w, QOS_CLASS_UTILITY, -1, 0);
#ifndef GC_REFERENCE_LIBDISPATCH
	// libdispatch keeps a workloop's QoS apart and reports 0 here; GrandCentral reports it.
	CHECK_EQ(dispatch_queue_get_qos_class(w, &relative), QOS_CLASS_UTILITY);
	CHECK_EQ(relative, -1);
#endif
	dispatch_workloop_set_qos_class(w, QOS_CLASS_USER_INITIATED, 0);
#ifndef GC_REFERENCE_LIBDISPATCH
	CHECK_EQ(dispatch_queue_get_qos_class(w, &relative), QOS_CLASS_USER_INITIATED);
#endif
	dispatch_workloop_set_autorelease_frequency(w, DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM);
	dispatch_activate(w);
	static atomic_long ran;
	dispatch_async_f(w, NULL, noop_function);
	dispatch_async_and_wait_f(w, &ran, noop_function);
	dispatch_release(w);
}

static void set_on_active(void) {
	dispatch_workloop_t w = dispatch_workloop_create("active");
	dispatch_workloop_set_qos_class_floor(w, QOS_CLASS_UTILITY, 0, 0);
}

int main(void) {
	check_start("workloop", 60);
	check_section("misuse");
	expect_client_bug("dispatch_workloop_set_qos_class_floor", set_on_active);
	order_and_exclusion();
	current();
	properties();
	check_pass();
}
