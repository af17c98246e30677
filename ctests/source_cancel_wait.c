// dispatch_source_cancel_and_wait while the source's target queue (or a queue above it) is
// suspended: it returns without waiting for the resume (the caller completes the
// cancellation when no drain of the source is running), and no handler of the source runs
// after it returned, not even once the target is resumed. Each cancel_and_wait runs on a
// helper thread and must return within 2 s, so a wait for the resume fails by section
// instead of hanging. Run against the toolchain's libdispatch too
// (ctests/run-reference.sh source_cancel_wait): it returns at once for a data source when
// no drain of the source is running (see `bounded_cancel_and_wait` for when one is); for a
// timer or a read source it waits for the resume (their unregistration goes through the
// source's own invoke on the target), so that build checks only that no handler runs
// after it returned. GrandCentral returns at once for every kind: the promise is the same
// (the monitor has stopped, no handler runs or will run), kept sooner.
#include "check.h"

#include <semaphore.h>

#ifdef GC_REFERENCE_LIBDISPATCH
void dispatch_source_cancel_and_wait(dispatch_source_t source);
#endif

// MARK: - A bounded cancel_and_wait

// One helper thread runs every cancel_and_wait: `go` hands it a source, `done` says it
// returned.
static sem_t go, done;
static dispatch_source_t _Atomic to_cancel;

static void *canceller(void *unused) {
	(void)unused;
	for (;;) {
		while (sem_wait(&go) != 0) {}
		dispatch_source_t s = atomic_load(&to_cancel);
		if (s == NULL) return NULL;
		dispatch_source_cancel_and_wait(s);
		sem_post(&done);
	}
}

#ifdef GC_REFERENCE_LIBDISPATCH
/// Calls where libdispatch waited for the resume (see `bounded_cancel_and_wait`).
static long reference_waited;
#endif

/// cancel_and_wait(s) on the helper thread, `suspended` suspended; fails unless it returns
/// within 2 s. Returns whether it resumed `suspended` (only in the reference build).
///
/// libdispatch completes the cancellation in the caller only when it can take the
/// source's drain lock; when a drain of the source is running at the call (merges racing),
/// it leaves the cancellation to that drain's next invoke, which waits on the suspended
/// target. So in the reference build a wait past 2 s is counted, the queue resumed, and
/// the call awaited (about one round in 10^4 here); GrandCentral must return every time.
static bool bounded_cancel_and_wait(dispatch_source_t s, dispatch_queue_t suspended, const char *what, int round) {
	atomic_store(&to_cancel, s);
	sem_post(&go);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	int r;
	while ((r = sem_timedwait(&done, &deadline)) != 0 && errno == EINTR) {}
#ifdef GC_REFERENCE_LIBDISPATCH
	if (r != 0 && suspended) {
		reference_waited++;
		dispatch_resume(suspended);
		while (sem_wait(&done) != 0) {}
		return true;
	}
#else
	(void)suspended;
#endif
	CHECKF(r == 0, "%s, round %d: cancel_and_wait did not return within 2 s while the target was suspended",
			what, round);
	return false;
}

// MARK: - Handlers

typedef struct {
	atomic_long calls;
	atomic_long running;
} counter_t;

static void count_handler(void *context) {
	counter_t *c = context;
	atomic_fetch_add(&c->running, 1);
	atomic_fetch_add(&c->calls, 1);
	atomic_fetch_sub(&c->running, 1);
}

static void wait_for_calls(counter_t *c, long n, const char *what) {
	uint64_t deadline = now_ns() + 20000000000ull;
	while (atomic_load(&c->calls) < n) {
		CHECKF(now_ns() < deadline, "%s: the event handler never ran", what);
		sleep_ms(1);
	}
}

/// The common part: with the source's handler seen to run, suspends `suspend` (the target
/// or a queue above it), lets events arrive (`arrive`), cancel_and_waits within 2 s, then
/// resumes and checks that no handler ran after cancel_and_wait returned.
/// `at_once`: false where libdispatch waits for the resume (see the file comment), which
/// only the reference build allows.
static void cancel_while_suspended(dispatch_source_t s, counter_t *c, dispatch_queue_t target,
		dispatch_queue_t suspend, void (*arrive)(dispatch_source_t), const char *what, bool at_once) {
	wait_for_calls(c, 1, what);
	dispatch_suspend(suspend);
	arrive(s);
#ifndef GC_REFERENCE_LIBDISPATCH
	at_once = true;
#endif
	bool resumed = false;
	if (at_once) {
		resumed = bounded_cancel_and_wait(s, suspend, what, 0);
	} else {
		atomic_store(&to_cancel, s);
		sem_post(&go);
		sleep_ms(20);
		dispatch_resume(suspend);
		while (sem_wait(&done) != 0) {}
	}
	CHECKF(atomic_load(&c->running) == 0, "%s: a handler still runs", what);
	CHECK(dispatch_source_testcancel(s));
	long calls = atomic_load(&c->calls);
	dispatch_release(s);   // the parked drain, if any, holds its own reference
	if (at_once && !resumed) dispatch_resume(suspend);
	dispatch_sync_f(target, NULL, noop_function);   // after the parked drain, if any
	sleep_ms(20);
	CHECKF(atomic_load(&c->calls) == calls, "%s: a handler ran after the resume (%ld, then %ld)", what, calls,
			atomic_load(&c->calls));
}

static void merge_some(dispatch_source_t s) {
	dispatch_source_merge_data(s, 1);
	dispatch_source_merge_data(s, 2);
}

static void let_fire(dispatch_source_t s) {
	(void)s;
	sleep_ms(10);
}

// MARK: - One kind at a time

static void data_source(dispatch_queue_t target, dispatch_queue_t suspend, const char *what) {
	counter_t c = { 0, 0 };
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, target);
	dispatch_set_context(s, &c);
	dispatch_source_set_event_handler_f(s, count_handler);
	dispatch_activate(s);
	dispatch_source_merge_data(s, 1);
	cancel_while_suspended(s, &c, target, suspend, merge_some, what, true);
}

static void timer_source(dispatch_queue_t target, dispatch_queue_t suspend, const char *what) {
	counter_t c = { 0, 0 };
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, target);
	dispatch_set_context(s, &c);
	dispatch_source_set_event_handler_f(s, count_handler);
	dispatch_source_set_timer(s, dispatch_time(DISPATCH_TIME_NOW, 0), 1000000, 0);
	dispatch_activate(s);
	cancel_while_suspended(s, &c, target, suspend, let_fire, what, false);
}

static void read_source(dispatch_queue_t target, dispatch_queue_t suspend, const char *what) {
	counter_t c = { 0, 0 };
	int fds[2];
	CHECK(pipe(fds) == 0);
	CHECK(write(fds[1], "x", 1) == 1);   // never read: the source stays readable
	dispatch_source_t s = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)fds[0], 0, target);
	dispatch_set_context(s, &c);
	dispatch_source_set_event_handler_f(s, count_handler);
	dispatch_activate(s);
	cancel_while_suspended(s, &c, target, suspend, let_fire, what, false);
	close(fds[0]);
	close(fds[1]);
}

static void each_kind(void) {
	dispatch_queue_t upper = dispatch_queue_create("upper", NULL);
	dispatch_queue_t target = dispatch_queue_create("target", NULL);
	dispatch_set_target_queue(target, upper);
	check_section("data source, target suspended");
	data_source(target, target, "data, target suspended");
	check_section("data source, the target's target suspended");
	data_source(target, upper, "data, upper suspended");
	check_section("timer source, target suspended");
	timer_source(target, target, "timer, target suspended");
	check_section("timer source, the target's target suspended");
	timer_source(target, upper, "timer, upper suspended");
	check_section("read source, target suspended");
	read_source(target, target, "read, target suspended");
	check_section("read source, the target's target suspended");
	read_source(target, upper, "read, upper suspended");
	dispatch_release(target);
	dispatch_release(upper);
}

// MARK: - Rounds with merges racing

typedef struct {
	dispatch_source_t source;
	atomic_bool stop;
} racer_t;

static void *merger(void *context) {
	racer_t *r = context;
	for (unsigned i = 1; !atomic_load(&r->stop); i++) {
		dispatch_source_merge_data(r->source, 1);
		if (i % 64 == 0) sched_yield();
	}
	return NULL;
}

/// Round r: the target suspended (r % 3 == 0), the queue above it (1), or nothing (2); the
/// merger thread merges throughout, before and after the suspend and the cancel.
static void rounds(int n) {
	check_section("10,000 rounds: cancel_and_wait while merges race and the target is suspended");
	dispatch_queue_t upper = dispatch_queue_create("upper", NULL);
	dispatch_queue_t target = dispatch_queue_create("target", NULL);
	dispatch_set_target_queue(target, upper);
#ifdef GC_REFERENCE_LIBDISPATCH
	reference_waited = 0;
#endif
	for (int round = 0; round < n; round++) {
		counter_t c = { 0, 0 };
		racer_t r = { .stop = false };
		r.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, target);
		dispatch_set_context(r.source, &c);
		dispatch_source_set_event_handler_f(r.source, count_handler);
		dispatch_activate(r.source);
		dispatch_retain(r.source);   // the merger's
		pthread_t t;
		pthread_create(&t, NULL, merger, &r);
		dispatch_queue_t suspend = round % 3 == 0 ? target : round % 3 == 1 ? upper : NULL;
		if (round % 2) wait_for_calls(&c, 1, "rounds");
		if (suspend) dispatch_suspend(suspend);
		bool resumed = bounded_cancel_and_wait(r.source, suspend, "rounds", round);
		CHECKF(atomic_load(&c.running) == 0, "round %d: a handler still runs", round);
		long calls = atomic_load(&c.calls);
		dispatch_release(r.source);
		if (round % 4 < 2) sched_yield();   // merges into the cancelled, parked source
		if (suspend && !resumed) dispatch_resume(suspend);
		atomic_store(&r.stop, true);
		pthread_join(t, NULL);
		dispatch_release(r.source);
		dispatch_sync_f(target, NULL, noop_function);
		CHECKF(atomic_load(&c.calls) == calls, "round %d: a handler ran after cancel_and_wait (%ld, then %ld)",
				round, calls, atomic_load(&c.calls));
	}
	dispatch_release(target);
	dispatch_release(upper);
#ifdef GC_REFERENCE_LIBDISPATCH
	printf("libdispatch waited for the resume in %ld of %d rounds\n", reference_waited, n);
#endif
}

int main(void) {
	check_start("source_cancel_wait", 170);
	CHECK(sem_init(&go, 0, 0) == 0);
	CHECK(sem_init(&done, 0, 0) == 0);
	pthread_t helper;
	pthread_create(&helper, NULL, canceller, NULL);
	each_kind();
	rounds(10000);
	atomic_store(&to_cancel, NULL);
	sem_post(&go);
	pthread_join(helper, NULL);
	check_pass();
}
