// Work-item blocks: dispatch_block_create, _with_qos_class, _perform, _wait, _notify,
// _cancel, _testcancel, and DISPATCH_BLOCK_BARRIER honoured by the submitting calls.
//
// Needs blocks: build with clang -fblocks. Every check asserts an observable result
// (what ran, how often, in which order, what a call returned); waits are bounded by
// generous timeouts and never decide pass/fail on speed (hard rule 7). Misuse cases run
// in a forked child, which must die; under GrandCentral it must also print the
// "BUG IN CLIENT" line.
//
// The expectations were checked against the toolchain's libdispatch as well: the file
// builds against either library (only the misuse messages are GrandCentral's).
#define _DEFAULT_SOURCE 1 // usleep, fork and pipe under -std=c11
#include <dispatch/dispatch.h>

#include <Block.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __BLOCKS__
#error "blocks_workitem.c needs a compiler with blocks: clang -fblocks"
#endif

#ifndef __GRANDCENTRAL__
// libdispatch's Linux headers leave the QoS classes to <sys/qos.h>, which Linux lacks.
#define QOS_CLASS_USER_INITIATED 0x19
#define QOS_CLASS_UTILITY 0x11
#endif

static int failures;

#define CHECK(condition, ...) \
	do { \
		if (!(condition)) { \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			failures++; \
		} \
	} while (0)

static dispatch_time_t seconds_from_now(int64_t seconds)
{
	return dispatch_time(DISPATCH_TIME_NOW, seconds * (int64_t)NSEC_PER_SEC);
}

static dispatch_time_t milliseconds_from_now(int64_t milliseconds)
{
	return dispatch_time(DISPATCH_TIME_NOW, milliseconds * (int64_t)NSEC_PER_MSEC);
}

// MARK: - Running, waiting, cancelling

static void test_direct_call(void)
{
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	CHECK(b != NULL, "dispatch_block_create returned NULL");
	CHECK(dispatch_block_testcancel(b) == 0, "new block is cancelled");
	b();
	CHECK(runs == 1, "ran %d times", runs);
	CHECK(dispatch_block_wait(b, DISPATCH_TIME_NOW) == 0, "wait after a direct call timed out");
	Block_release(b);
}

static void test_async_then_wait(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.async", DISPATCH_QUEUE_SERIAL);
	__block atomic_int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ atomic_fetch_add(&runs, 1); });
	dispatch_async(q, b);
	CHECK(dispatch_block_wait(b, seconds_from_now(10)) == 0, "wait timed out");
	CHECK(atomic_load(&runs) == 1, "ran %d times", atomic_load(&runs));
	Block_release(b);
	dispatch_release(q);
}

static void test_wait_times_out_then_succeeds(void)
{
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	CHECK(dispatch_block_wait(b, DISPATCH_TIME_NOW) != 0, "wait on an unrun block succeeded");
	CHECK(dispatch_block_wait(b, milliseconds_from_now(20)) != 0,
			"second wait on an unrun block succeeded");
	b();
	CHECK(dispatch_block_wait(b, DISPATCH_TIME_FOREVER) == 0, "wait after the run failed");
	CHECK(runs == 1, "ran %d times", runs);
	Block_release(b);
}

static void test_sync_runs_before_returning(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.sync", DISPATCH_QUEUE_SERIAL);
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	dispatch_sync(q, b);
	CHECK(runs == 1, "dispatch_sync returned before the work item ran (%d)", runs);
	CHECK(dispatch_block_wait(b, DISPATCH_TIME_NOW) == 0, "finished item still pending");
	Block_release(b);
	dispatch_release(q);
}

static void test_many_runs_without_wait(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.many", DISPATCH_QUEUE_SERIAL);
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	for (int i = 0; i < 10; i++) dispatch_async(q, b);
	b();
	dispatch_sync(q, b);
	dispatch_sync(q, ^{ });
	CHECK(runs == 12, "ran %d times, expected 12", runs);
	Block_release(b);
	dispatch_release(q);
}

static void test_cancel_before_run(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.cancel", DISPATCH_QUEUE_SERIAL);
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	dispatch_suspend(q);
	dispatch_async(q, b);
	dispatch_block_cancel(b);
	CHECK(dispatch_block_testcancel(b) != 0, "testcancel after cancel is 0");
	dispatch_resume(q);
	CHECK(dispatch_block_wait(b, seconds_from_now(10)) == 0,
			"a cancelled item did not finish when dequeued");
	CHECK(runs == 0, "a cancelled item ran its body");
	Block_release(b);
	dispatch_release(q);
}

static void test_cancel_does_not_stop_a_running_block(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.running", DISPATCH_QUEUE_SERIAL);
	dispatch_semaphore_t started = dispatch_semaphore_create(0);
	dispatch_semaphore_t proceed = dispatch_semaphore_create(0);
	__block int finished = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{
		dispatch_semaphore_signal(started);
		dispatch_semaphore_wait(proceed, DISPATCH_TIME_FOREVER);
		finished = 1;
	});
	dispatch_async(q, b);
	CHECK(dispatch_semaphore_wait(started, seconds_from_now(10)) == 0, "block did not start");
	dispatch_block_cancel(b);
	dispatch_semaphore_signal(proceed);
	CHECK(dispatch_block_wait(b, seconds_from_now(10)) == 0, "wait timed out");
	CHECK(finished == 1, "cancel interrupted a running block");
	CHECK(dispatch_block_testcancel(b) != 0, "testcancel after cancel is 0");
	Block_release(b);
	dispatch_release(started);
	dispatch_release(proceed);
	dispatch_release(q);
}

static void test_perform(void)
{
	__block int runs = 0;
	dispatch_block_perform(0, ^{ runs++; });
	dispatch_block_perform(DISPATCH_BLOCK_BARRIER | DISPATCH_BLOCK_DETACHED, ^{ runs++; });
	CHECK(runs == 2, "dispatch_block_perform ran %d of 2 blocks", runs);
}

// MARK: - Notifications

static void test_notify_after_run(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.notify", DISPATCH_QUEUE_SERIAL);
	dispatch_semaphore_t notified = dispatch_semaphore_create(0);
	__block int order = 0, body_at = -1, notify_at = -1;
	dispatch_block_t b = dispatch_block_create(0, ^{ body_at = order++; });
	dispatch_block_notify(b, q, ^{
		notify_at = order++;
		dispatch_semaphore_signal(notified);
	});
	dispatch_async(q, b);
	CHECK(dispatch_semaphore_wait(notified, seconds_from_now(10)) == 0, "no notification");
	CHECK(body_at == 0 && notify_at == 1, "body at %d, notification at %d", body_at, notify_at);

	// Registered after the item finished: fires anyway.
	dispatch_block_notify(b, q, ^{ dispatch_semaphore_signal(notified); });
	CHECK(dispatch_semaphore_wait(notified, seconds_from_now(10)) == 0,
			"no notification for an item that had already finished");
	Block_release(b);
	dispatch_release(notified);
	dispatch_release(q);
}

static void test_notify_on_release_without_run(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.release", DISPATCH_QUEUE_SERIAL);
	dispatch_semaphore_t notified = dispatch_semaphore_create(0);
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	dispatch_block_notify(b, q, ^{ dispatch_semaphore_signal(notified); });
	Block_release(b);
	CHECK(dispatch_semaphore_wait(notified, seconds_from_now(10)) == 0,
			"releasing an unrun item did not finish it");
	CHECK(runs == 0, "released item ran");
	dispatch_release(notified);
	dispatch_release(q);
}

static void test_copies_share_state(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.copy", DISPATCH_QUEUE_SERIAL);
	__block int runs = 0;
	dispatch_block_t b = dispatch_block_create(0, ^{ runs++; });
	dispatch_block_t copy = Block_copy(b);
	Block_release(b);
	dispatch_block_cancel(copy);
	dispatch_async(q, copy);
	CHECK(dispatch_block_wait(copy, seconds_from_now(10)) == 0, "wait on a copy timed out");
	CHECK(runs == 0, "a cancelled copy ran");
	Block_release(copy);
	dispatch_release(q);
}

// MARK: - Barrier work items

// Normal items count themselves in `active`; a barrier item checks that it runs alone
// and that nothing starts while it runs.
static atomic_int active;
static atomic_int in_barrier;
static atomic_int violations;

static void (^make_normal_item(void))(void)
{
	return Block_copy(^{
		atomic_fetch_add(&active, 1);
		if (atomic_load(&in_barrier) != 0) atomic_fetch_add(&violations, 1);
		for (volatile int spin = 0; spin < 20000; spin++) {
		}
		atomic_fetch_sub(&active, 1);
	});
}

static dispatch_block_t make_barrier_item(atomic_int *ran)
{
	return dispatch_block_create(DISPATCH_BLOCK_BARRIER, ^{
		atomic_store(&in_barrier, 1);
		if (atomic_load(&active) != 0) atomic_fetch_add(&violations, 1);
		for (volatile int spin = 0; spin < 20000; spin++) {
		}
		if (atomic_load(&active) != 0) atomic_fetch_add(&violations, 1);
		atomic_store(&in_barrier, 0);
		atomic_fetch_add(ran, 1);
	});
}

static void test_barrier_flag(void)
{
	dispatch_queue_t c = dispatch_queue_create("workitem.barrier", DISPATCH_QUEUE_CONCURRENT);
	dispatch_group_t g = dispatch_group_create();
	dispatch_block_t normal = make_normal_item();
	atomic_int barriers_ran = 0;
	int barriers = 0;

	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 8; i++) dispatch_async(c, normal);
		dispatch_block_t barrier = make_barrier_item(&barriers_ran);
		switch (round % 4) {
		case 0: dispatch_async(c, barrier); break;
		case 1: dispatch_group_async(g, c, barrier); break;
		case 2: dispatch_after(DISPATCH_TIME_NOW, c, barrier); break;
		case 3: dispatch_sync(c, barrier); break;
		}
		barriers++;
		Block_release(barrier);
	}
	// A notification barrier, once the group's barriers have run.
	dispatch_block_t last = make_barrier_item(&barriers_ran);
	dispatch_group_notify(g, c, last);
	barriers++;
	Block_release(last);
	for (int i = 0; i < 8; i++) dispatch_async(c, normal);

	CHECK(dispatch_group_wait(g, seconds_from_now(20)) == 0, "group wait timed out");
	for (int tries = 0; tries < 2000 && atomic_load(&barriers_ran) < barriers; tries++) {
		usleep(10000);
	}
	dispatch_barrier_sync(c, ^{ });
	CHECK(atomic_load(&barriers_ran) == barriers, "%d of %d barrier items ran",
			atomic_load(&barriers_ran), barriers);
	CHECK(atomic_load(&violations) == 0, "%d barrier violations", atomic_load(&violations));
	Block_release(normal);
	dispatch_release(g);
	dispatch_release(c);
}

// MARK: - Invalid input

static void test_invalid_input_returns_null(void)
{
	dispatch_block_t b = dispatch_block_create(0x100, ^{ });
	CHECK(b == NULL, "unknown flag accepted");
	b = dispatch_block_create_with_qos_class(0, (dispatch_qos_class_t)0x22, 0, ^{ });
	CHECK(b == NULL, "unknown QoS class accepted");
	b = dispatch_block_create_with_qos_class(0, QOS_CLASS_UTILITY, 1, ^{ });
	CHECK(b == NULL, "relative priority 1 accepted");
	b = dispatch_block_create_with_qos_class(0, QOS_CLASS_UTILITY, -16, ^{ });
	CHECK(b == NULL, "relative priority -16 accepted");

	__block int runs = 0;
	b = dispatch_block_create_with_qos_class(DISPATCH_BLOCK_ENFORCE_QOS_CLASS,
			QOS_CLASS_USER_INITIATED, -15, ^{ runs++; });
	CHECK(b != NULL, "valid QoS work item refused");
	if (b != NULL) {
		b();
		CHECK(runs == 1, "QoS work item ran %d times", runs);
		Block_release(b);
	}
}

// MARK: - Misuse (each in a child process that must die)

typedef void (*misuse_fn)(void);

static void expect_death(const char *name, misuse_fn misuse, const char *function)
{
	int pipe_fds[2];
	if (pipe(pipe_fds) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		dup2(pipe_fds[1], STDERR_FILENO);
		close(pipe_fds[0]);
		misuse();
		_exit(0); // survived: the parent reports it
	}
	close(pipe_fds[1]);
	char output[1024] = { 0 };
	size_t length = 0;
	ssize_t n;
	while (length < sizeof output - 1 &&
			(n = read(pipe_fds[0], output + length, sizeof output - 1 - length)) > 0) {
		length += (size_t)n;
	}
	close(pipe_fds[0]);
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFSIGNALED(status), "%s: the child survived misuse (status %d)", name, status);
#ifdef __GRANDCENTRAL__
	char expected[256];
	snprintf(expected, sizeof expected, "GrandCentral: BUG IN CLIENT: %s: ", function);
	CHECK(strstr(output, expected) != NULL, "%s: expected \"%s...\" on stderr, got \"%s\"",
			name, expected, output);
#else
	(void)function;
#endif
}

static void misuse_wait_twice(void)
{
	dispatch_block_t b = dispatch_block_create(0, ^{ });
	b();
	(void)dispatch_block_wait(b, DISPATCH_TIME_FOREVER);
	(void)dispatch_block_wait(b, DISPATCH_TIME_FOREVER);
}

static void misuse_wait_after_two_runs(void)
{
	dispatch_block_t b = dispatch_block_create(0, ^{ });
	b();
	b();
	(void)dispatch_block_wait(b, DISPATCH_TIME_FOREVER);
}

static void misuse_run_after_wait(void)
{
	dispatch_block_t b = dispatch_block_create(0, ^{ });
	b();
	(void)dispatch_block_wait(b, DISPATCH_TIME_FOREVER);
	b();
}

static void misuse_wait_on_plain_block(void)
{
	(void)dispatch_block_wait(^{ }, DISPATCH_TIME_NOW);
}

static void misuse_cancel_plain_block(void)
{
	dispatch_block_cancel(^{ });
}

static void misuse_testcancel_plain_block(void)
{
	// Use the result: the function is declared pure, so an unused call may be dropped.
	if (dispatch_block_testcancel(^{ }) != 0) fputs("cancelled\n", stdout);
}

static void misuse_notify_plain_block(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.misuse", DISPATCH_QUEUE_SERIAL);
	dispatch_block_notify(^{ }, q, ^{ });
}

static void misuse_perform_unknown_flag(void)
{
	dispatch_block_perform(0x100, ^{ });
}

static void misuse_create_null(void)
{
	dispatch_block_t nothing = NULL;
	dispatch_block_t b = dispatch_block_create(0, nothing);
	(void)b;
}

static void misuse_async_null(void)
{
	dispatch_queue_t q = dispatch_queue_create("workitem.misuse", DISPATCH_QUEUE_SERIAL);
	dispatch_block_t nothing = NULL;
	dispatch_async(q, nothing);
}

static void test_misuse(void)
{
	expect_death("wait twice", misuse_wait_twice, "dispatch_block_wait");
	expect_death("wait after two runs", misuse_wait_after_two_runs, "dispatch_block_wait");
	expect_death("run after wait", misuse_run_after_wait, "dispatch_block_wait");
	expect_death("wait on a plain block", misuse_wait_on_plain_block, "dispatch_block_wait");
	expect_death("cancel a plain block", misuse_cancel_plain_block, "dispatch_block_cancel");
	expect_death("testcancel a plain block", misuse_testcancel_plain_block,
			"dispatch_block_testcancel");
	expect_death("notify on a plain block", misuse_notify_plain_block, "dispatch_block_notify");
	expect_death("perform with an unknown flag", misuse_perform_unknown_flag,
			"dispatch_block_perform");
#ifdef __GRANDCENTRAL__
	// libdispatch does not check these two; it crashes later or not at all.
	expect_death("create with a NULL block", misuse_create_null, "dispatch_block_create");
	expect_death("dispatch_async of a NULL block", misuse_async_null, "dispatch_async");
#else
	(void)misuse_create_null;
	(void)misuse_async_null;
#endif
}

int main(void)
{
	test_direct_call();
	test_async_then_wait();
	test_wait_times_out_then_succeeds();
	test_sync_runs_before_returning();
	test_many_runs_without_wait();
	test_cancel_before_run();
	test_cancel_does_not_stop_a_running_block();
	test_perform();
	test_notify_after_run();
	test_notify_on_release_without_run();
	test_copies_share_state();
	test_barrier_flag();
	test_invalid_input_returns_null();
	test_misuse();

	if (failures != 0) {
		fprintf(stderr, "blocks_workitem: %d check(s) failed\n", failures);
		return 1;
	}
	printf("blocks_workitem: all checks passed\n");
	return 0;
}
