// fork (private.h): the multithreaded facts and the atfork calls. GrandCentral registers its
// own pthread_atfork child handler, so a child of a multithreaded parent knows it is one
// (libdispatch on Linux: nothing calls its handler, the child reports "multithreaded, not a
// fork child"; those checks are GrandCentral-only). GrandCentral's child of a busy parent
// with armed timers uses queues, groups, dispatch_after and a timer source, and never runs
// the parent's pending work (GrandCentral-only: libdispatch's child hangs or crashes).
#include "check.h"

#ifdef GC_REFERENCE_LIBDISPATCH
bool _dispatch_is_multithreaded(void);
bool _dispatch_is_fork_of_multithreaded_parent(void);
void _dispatch_prohibit_transition_to_multithreaded(bool prohibit);
void dispatch_atfork_prepare(void);
void dispatch_atfork_parent(void);
void dispatch_atfork_child(void);
#endif

static atomic_long fired;
static void count(void *context) { (void)context; atomic_fetch_add(&fired, 1); }

// A child forked before any dispatch thread: queues, dispatch_after, a timer and a group.
static int single_threaded_child(void) {
	dispatch_queue_t q = dispatch_queue_create("child", NULL);
	dispatch_group_t g = dispatch_group_create();
	for (int i = 0; i < 100; i++) dispatch_group_async_f(g, q, NULL, count);
	if (dispatch_group_wait(g, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) != 0) return 2;
	dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 5 * NSEC_PER_MSEC), q, NULL, count);
	dispatch_source_t t = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, q);
	dispatch_source_set_event_handler_f(t, count);
	dispatch_source_set_timer(t, DISPATCH_TIME_NOW, 2 * NSEC_PER_MSEC, 0);
	dispatch_activate(t);
	for (int i = 0; i < 1000 && atomic_load(&fired) < 110; i++) usleep(10000);
	dispatch_source_cancel(t);
	dispatch_release(t);
	dispatch_release(g);
	dispatch_release(q);
	if (atomic_load(&fired) < 110) return 3;
	return _dispatch_is_multithreaded() ? 0 : 4;
}

// The parent's pending work, which a child must never run.
static atomic_long parent_work_in_child;
static pid_t parent_pid;
static void parent_only(void *context) {
	(void)context;
	if (getpid() != parent_pid) atomic_fetch_add(&parent_work_in_child, 1);
}
static void block_a_while(void *context) { (void)context; usleep(20000); }

// Three threads that keep submitting (at most 4,096 items each in flight), so work-item
// nodes keep moving through the depot while the main thread forks.
static atomic_int pushers_stop;
static void *pusher_main(void *arg) {
	(void)arg;
	dispatch_group_t g = dispatch_group_create();
	while (!atomic_load(&pushers_stop)) {
		for (int i = 0; i < 4096; i++) dispatch_group_async_f(g, dispatch_get_global_queue(0, 0), NULL, noop_function);
		dispatch_group_wait(g, DISPATCH_TIME_FOREVER);
	}
	dispatch_release(g);
	return NULL;
}

static int wait_child(pid_t child) {
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
	CHECKF(WIFEXITED(status), "the child died by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
	return WEXITSTATUS(status);
}

static void prohibited_start(void) {
	_dispatch_prohibit_transition_to_multithreaded(true);
	dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, noop_function);
	for (;;) sleep(1);
}

static void prohibit_when_multithreaded(void) {
	dispatch_sync_f(dispatch_get_global_queue(0, 0), NULL, noop_function);
	dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, noop_function);
	sleep_ms(50);
	_dispatch_prohibit_transition_to_multithreaded(true);
}

int main(void) {
	check_start("fork", 50);
	check_section("a fresh process is not multithreaded by dispatch");
	CHECK(!_dispatch_is_multithreaded());
	CHECK(!_dispatch_is_fork_of_multithreaded_parent());
	dispatch_atfork_prepare();
	dispatch_atfork_parent();

#ifndef GC_REFERENCE_LIBDISPATCH
	check_section("misuse");
	expect_client_bug("_dispatch_prohibit_transition_to_multithreaded", prohibited_start);
	expect_client_bug("_dispatch_prohibit_transition_to_multithreaded", prohibit_when_multithreaded);

	check_section("prohibit, then allow again");
	_dispatch_prohibit_transition_to_multithreaded(true);
	_dispatch_prohibit_transition_to_multithreaded(false);
#endif

	check_section("a child forked before any dispatch thread uses dispatch");
	fflush(stdout);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) _exit(single_threaded_child());
	CHECK_EQ(wait_child(child), 0);

	check_section("using dispatch makes the process multithreaded");
	dispatch_queue_t q = dispatch_queue_create("parent", NULL);
	for (int i = 0; i < 1000; i++) dispatch_async_f(q, NULL, count);
	dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 60 * NSEC_PER_SEC), q, NULL, count);
	dispatch_sync_f(q, NULL, noop_function);
	CHECK(_dispatch_is_multithreaded());

	check_section("a child of a multithreaded parent: the facts, async-signal-safe calls, _exit");
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 50; i++) dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, count);
		child = fork();
		CHECK(child >= 0);
		if (child == 0) {
			int code = 0;
#ifndef GC_REFERENCE_LIBDISPATCH
			if (!_dispatch_is_fork_of_multithreaded_parent()) code = 5;
			if (_dispatch_is_multithreaded()) code = 6;
			dispatch_atfork_child();
			if (!_dispatch_is_fork_of_multithreaded_parent()) code = 7;
#endif
			char byte = 'x';
			int fds[2];
			if (pipe(fds) != 0 || write(fds[1], &byte, 1) != 1 || read(fds[0], &byte, 1) != 1) code = 8;
			_exit(code);
		}
		CHECKF(wait_child(child) == 0, "round %d", round);
	}

#ifndef GC_REFERENCE_LIBDISPATCH
	// libdispatch's child hangs or crashes here (nothing rebuilds its threads on Linux).
	check_section("a child of a busy parent with armed timers uses dispatch: 20 forks");
	parent_pid = getpid();
	dispatch_source_t parent_timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, q);
	dispatch_source_set_event_handler_f(parent_timer, noop_function);
	dispatch_source_set_timer(parent_timer, DISPATCH_TIME_NOW, NSEC_PER_MSEC, 0);
	dispatch_activate(parent_timer);
	dispatch_queue_t busy = dispatch_queue_create("busy", NULL);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 4; i++) dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, block_a_while);
		dispatch_async_f(busy, NULL, block_a_while);
		for (int i = 0; i < 100; i++) dispatch_async_f(busy, NULL, parent_only);
		dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_MSEC), busy, NULL, parent_only);
		child = fork();
		CHECK(child >= 0);
		if (child == 0) {
			atomic_store(&fired, 0);
			int code = single_threaded_child();
			if (code == 0) {
				sleep_ms(60);   // the parent's dispatch_after would have fired by now
				if (atomic_load(&parent_work_in_child) != 0) code = 9;
			}
			_exit(code);
		}
		CHECKF(wait_child(child) == 0, "round %d", round);
	}
	dispatch_source_cancel(parent_timer);
	dispatch_release(parent_timer);
	dispatch_sync_f(busy, NULL, noop_function);
	dispatch_release(busy);

	// Work-item nodes circulate between threads through a shared depot under a lock; a
	// fork while another thread held it left the child spinning in its first
	// dispatch_async (a review program with three threads flooding the queues without
	// bound: 1 child in 40 hung there, seen in gdb). This bounded version did not catch it
	// in 900 forks on that library: it keeps the contract under test, not the bug.
	check_section("children forked while three threads submit work use dispatch: 150 forks");
	atomic_store(&pushers_stop, 0);
	pthread_t pushers[3];
	for (int i = 0; i < 3; i++) CHECK_EQ(pthread_create(&pushers[i], NULL, pusher_main, NULL), 0);
	for (int round = 0; round < 150; round++) {
		usleep((useconds_t)(round % 7) * 300);
		child = fork();
		CHECK(child >= 0);
		if (child == 0) {
			alarm(20);   // a hung child dies by SIGALRM, which wait_child reports
			dispatch_group_t g = dispatch_group_create();
			dispatch_queue_t cq = dispatch_queue_create("child", NULL);
			atomic_store(&fired, 0);
			for (int i = 0; i < 1000; i++) {
				dispatch_group_async_f(g, dispatch_get_global_queue(0, 0), NULL, count);
				dispatch_group_async_f(g, cq, NULL, count);
			}
			int code = dispatch_group_wait(g, dispatch_time(DISPATCH_TIME_NOW, 15 * NSEC_PER_SEC)) == 0 ? 0 : 2;
			if (code == 0 && atomic_load(&fired) != 2000) code = 3;
			_exit(code);
		}
		CHECKF(wait_child(child) == 0, "round %d", round);
	}
	atomic_store(&pushers_stop, 1);
	for (int i = 0; i < 3; i++) pthread_join(pushers[i], NULL);
#endif
	dispatch_sync_f(q, NULL, noop_function);
	CHECK(_dispatch_is_multithreaded());
	CHECK(!_dispatch_is_fork_of_multithreaded_parent());
	dispatch_release(q);
	check_pass();
}
