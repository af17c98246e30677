// The library's diagnostics (README, "Knobs and diagnostics"):
//
// - GRANDCENTRAL_DEBUG=1: the library writes one line per thread-pool decision and per
//   timerfd re-arm to stderr, each starting `GrandCentral: debug: pool: ` or
//   `GrandCentral: debug: timer: `. The variable is read once, when the pool or the event
//   thread starts, so this test runs a child (this program again, through /proc/self/exe)
//   with the variable set, with stderr into a pipe, doing work that must start a worker
//   (an async onto a global queue) and arm a timer (a 20 ms dispatch_after); then the same
//   child with the variable unset, and set to 0, which must write nothing at all.
// - dispatch_debug: every kind of object prints one line of one shape,
//   `<message>: <kind>[<handle>] = { <field> = <value>, ... }`, with the kind's fields in
//   the documented order; each line here is compared whole with what the README promises.
//
// GrandCentral-only (GC_REFERENCE_LIBDISPATCH): libdispatch has neither the variable nor
// this description format.
#include "check.h"

#ifdef GC_REFERENCE_LIBDISPATCH
int main(void) {
    printf("debug_log: skipped (GRANDCENTRAL_DEBUG and the description format are GrandCentral's)\n");
    return 0;
}
#else

#include <regex.h>

// MARK: - The child: work that starts a worker and arms a timer

static void signal_semaphore(void *context) {
    dispatch_semaphore_signal((dispatch_semaphore_t)context);
}

static int child_main(void) {
    dispatch_semaphore_t done = dispatch_semaphore_create(0);
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), done, signal_semaphore);
    if (dispatch_semaphore_wait(done, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) != 0) return 2;
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 20 * NSEC_PER_MSEC),
                     dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), done, signal_semaphore);
    if (dispatch_semaphore_wait(done, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) != 0) return 3;
    dispatch_release(done);
    return 0;
}

/// Runs this program as the child with GRANDCENTRAL_DEBUG set to `value` (NULL: unset)
/// and returns what it wrote to stderr in `output`. Fails unless it exits with status 0.
static void run_child(const char *value, char *output, size_t size) {
    int fds[2];
    CHECKF(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    CHECKF(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        if (value) setenv("GRANDCENTRAL_DEBUG", value, 1);
        else unsetenv("GRANDCENTRAL_DEBUG");
        execl("/proc/self/exe", "debug_log", "child", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    while ((n = read(fds[0], output + used, size - 1 - used)) != 0) {
        if (n < 0) {
            CHECKF(errno == EINTR, "read: %s", strerror(errno));
            continue;
        }
        used += (size_t)n;
        if (used + 1 == size) break;
    }
    output[used] = '\0';
    close(fds[0]);
    int status = 0;
    CHECKF(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the child (GRANDCENTRAL_DEBUG=%s) did not exit 0 (status 0x%x); its stderr:\n%s",
           value ? value : "<unset>", status, output);
}

/// Every line of `output` is a pool, timer or library debug line, and there is at least one
/// of each (the library line says which file the process runs GrandCentral from).
static void expect_debug_lines(const char *output) {
    static const char *const areas[] = {"GrandCentral: debug: pool: ", "GrandCentral: debug: timer: ",
                                        "GrandCentral: debug: library: "};
    bool seen[3] = {false, false, false};
    for (const char *line = output; *line;) {
        const char *end = strchr(line, '\n');
        CHECKF(end != NULL, "the last line is not terminated: \"%s\"", line);
        bool known = false;
        for (int i = 0; i < 3; i++) {
            if (strncmp(line, areas[i], strlen(areas[i])) == 0) known = seen[i] = true;
        }
        CHECKF(known, "a line that is not a pool, timer or library debug line: \"%.*s\"", (int)(end - line), line);
        line = end + 1;
    }
    CHECKF(seen[0], "no \"%s\" line in:\n%s", areas[0], output);
    CHECKF(seen[1], "no \"%s\" line in:\n%s", areas[1], output);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECKF(seen[2], "no \"%s\" line in:\n%s", areas[2], output);
#endif
}

// MARK: - dispatch_debug

/// The shape every description has, message aside.
static regex_t shape;

/// The object `describe` describes (a handle of any kind).
static void *described;

static void describe(void *context) {
    (void)context;
    dispatch_debug((dispatch_object_t){._do = described}, "msg");
}

/// dispatch_debug(object, "msg") prints exactly `msg: <kind>[<object's %p>] = { <fields> }\n`.
static void expect_description(void *object, const char *kind, const char *fields) {
    char output[2048], expected[2048], handle[32];
    described = object;
    capture_stderr(describe, NULL, output, sizeof output);
    printf("   %s", output);
    snprintf(handle, sizeof handle, "%p", object);
    snprintf(expected, sizeof expected, "msg: %s[%s] = { %s }\n", kind, handle, fields);
    CHECKF(strcmp(output, expected) == 0, "dispatch_debug printed\n     \"%s\"\n   expected\n     \"%s\"", output,
           expected);
    CHECKF(regexec(&shape, output, 0, NULL, 0) == 0, "the line does not have the documented shape: \"%s\"",
           output);
}

#define EXPECT_DESCRIPTION(object, kind, fields) expect_description((void *)(object), kind, fields)

static dispatch_semaphore_t waited_on;

static void *wait_on_semaphore(void *context) {
    (void)context;
    dispatch_semaphore_wait(waited_on, DISPATCH_TIME_FOREVER);
    return NULL;
}

static void nothing_cleanup(void *context, int error) {
    (void)context;
    (void)error;
}

static void check_descriptions(void) {
    CHECK(regcomp(&shape,
                  "^msg: [a-z]+\\[0x[0-9a-f]+\\] = \\{ [a-z]+ = [^,]+(, [a-z]+ = [^,]+)* \\}\n$",
                  REG_EXTENDED) == 0);

    check_section("dispatch_debug: queues");
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.debug-log", NULL);
    EXPECT_DESCRIPTION(serial, "queue",
                       "label = \"com.grandcentral.tests.debug-log\", refcount = 1, width = serial, suspended = 0, "
                       "inactive = false, running = 0, target = \"com.apple.root.default-qos.overcommit\"");
    dispatch_suspend(serial);
    dispatch_retain(serial);
    EXPECT_DESCRIPTION(serial, "queue",
                       "label = \"com.grandcentral.tests.debug-log\", refcount = 2, width = serial, suspended = 1, "
                       "inactive = false, running = 0, target = \"com.apple.root.default-qos.overcommit\"");
    dispatch_release(serial);
    dispatch_resume(serial);
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.debug-log.concurrent",
                                                        DISPATCH_QUEUE_CONCURRENT);
    dispatch_set_target_queue(concurrent, serial);
    EXPECT_DESCRIPTION(concurrent, "queue",
                       "label = \"com.grandcentral.tests.debug-log.concurrent\", refcount = 1, width = concurrent, "
                       "suspended = 0, inactive = false, running = 0, target = \"com.grandcentral.tests.debug-log\"");
    dispatch_queue_t inactive = dispatch_queue_create("inactive",
                                                      dispatch_queue_attr_make_initially_inactive(NULL));
    EXPECT_DESCRIPTION(inactive, "queue",
                       "label = \"inactive\", refcount = 1, width = serial, suspended = 0, "
                       "inactive = true, running = 0, target = \"com.apple.root.default-qos.overcommit\"");
    dispatch_activate(inactive);
    EXPECT_DESCRIPTION(dispatch_get_global_queue(QOS_CLASS_UTILITY, 0), "queue",
                       "label = \"com.apple.root.utility-qos\", refcount = global, width = concurrent, "
                       "suspended = 0, inactive = false, running = 0, target = none");
    EXPECT_DESCRIPTION(dispatch_get_main_queue(), "queue",
                       "label = \"com.apple.main-thread\", refcount = global, width = serial, "
                       "suspended = 0, inactive = false, running = 0, "
                       "target = \"com.apple.root.default-qos.overcommit\"");

    check_section("dispatch_debug: groups");
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_enter(group);
    EXPECT_DESCRIPTION(group, "group", "refcount = 1, count = 1, waiters = false, notify = false");
    dispatch_group_notify_f(group, serial, NULL, noop_function);
    EXPECT_DESCRIPTION(group, "group", "refcount = 1, count = 1, waiters = false, notify = true");
    dispatch_group_leave(group);
    dispatch_group_wait(group, DISPATCH_TIME_FOREVER);
    EXPECT_DESCRIPTION(group, "group", "refcount = 1, count = 0, waiters = false, notify = false");

    check_section("dispatch_debug: semaphores");
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(2);
    dispatch_semaphore_wait(semaphore, DISPATCH_TIME_FOREVER);
    EXPECT_DESCRIPTION(semaphore, "semaphore", "refcount = 1, value = 1, waiters = 0, initial = 2");
    waited_on = dispatch_semaphore_create(0);
    pthread_t waiter;
    CHECK(pthread_create(&waiter, NULL, wait_on_semaphore, NULL) == 0);
    // The waiter counts from its first decrement, before it sleeps: poll for it.
    char line[512];
    uint64_t deadline = now_ns() + 5 * NSEC_PER_SEC;
    for (;;) {
        described = waited_on;
        capture_stderr(describe, NULL, line, sizeof line);
        if (strstr(line, "waiters = 1") || now_ns() > deadline) break;
        sleep_ms(1);
    }
    EXPECT_DESCRIPTION(waited_on, "semaphore", "refcount = 1, value = 0, waiters = 1, initial = 0");
    dispatch_semaphore_signal(waited_on);
    CHECK(pthread_join(waiter, NULL) == 0);
    EXPECT_DESCRIPTION(waited_on, "semaphore", "refcount = 1, value = 0, waiters = 0, initial = 0");

    check_section("dispatch_debug: sources");
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, serial);
    CHECK(source != NULL);
    EXPECT_DESCRIPTION(source, "source",
                       "type = data-add, refcount = 1, handle = 0, mask = 0x0, data = 0, pending = 0, suspended = 0, "
                       "inactive = true, cancelled = false, target = \"com.grandcentral.tests.debug-log\"");
    dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, DISPATCH_TIMER_STRICT, NULL);
    CHECK(timer != NULL);
    dispatch_source_cancel(timer);
    EXPECT_DESCRIPTION(timer, "source",
                       "type = timer, refcount = 1, handle = 0, mask = 0x1, data = 0, pending = 0, suspended = 0, "
                       "inactive = true, cancelled = true, target = \"com.apple.root.default-qos\"");

    check_section("dispatch_debug: data");
    dispatch_data_t data = dispatch_data_create_f("hello", 5, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    EXPECT_DESCRIPTION(data, "data", "refcount = 1, size = 5, regions = 1");
    EXPECT_DESCRIPTION(dispatch_data_empty, "data", "refcount = global, size = 0, regions = 0");
    dispatch_data_t world = dispatch_data_create_f(", world", 7, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    dispatch_data_t both = dispatch_data_create_concat(data, world);
    EXPECT_DESCRIPTION(both, "data", "refcount = 1, size = 12, regions = 2");
    dispatch_release(both);
    dispatch_release(world);

    check_section("dispatch_debug: I/O channels");
    int fds[2];
    CHECK(pipe(fds) == 0);
    dispatch_io_t stream = dispatch_io_create_f(DISPATCH_IO_STREAM, fds[0], serial, NULL, nothing_cleanup);
    CHECK(stream != NULL);
    char fields[256];
    snprintf(fields, sizeof fields, "type = stream, refcount = 1, fd = %d, closed = false", fds[0]);
    EXPECT_DESCRIPTION(stream, "io", fields);
    dispatch_io_close(stream, 0);
    // Closed with nothing queued: the channel has given its descriptor back (EBADF from here).
    snprintf(fields, sizeof fields, "type = stream, refcount = 1, error = %d, closed = true", EBADF);
    EXPECT_DESCRIPTION(stream, "io", fields);
    // O_CREAT: the path passes the check at creation (its directory exists) and, with no
    // operation, is never opened (a missing path without O_CREAT is the channel's error).
    dispatch_io_t path = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, "/tmp/gc-debug-log-unopened",
                                                        O_RDONLY | O_CREAT, 0600, serial, NULL, nothing_cleanup);
    CHECK(path != NULL);
    EXPECT_DESCRIPTION(path, "io", "type = random, refcount = 1, path = \"/tmp/gc-debug-log-unopened\", closed = false");

    dispatch_release(path);
    dispatch_release(stream);
    dispatch_release(data);
    dispatch_activate(timer);   // releasing an inactive source is a client bug
    dispatch_release(timer);
    dispatch_source_cancel(source);
    dispatch_activate(source);
    dispatch_release(source);
    dispatch_release(waited_on);
    dispatch_semaphore_signal(semaphore);   // back to its initial value before the release
    dispatch_release(semaphore);
    dispatch_release(group);
    dispatch_release(inactive);
    dispatch_release(concurrent);
    dispatch_sync_f(serial, NULL, noop_function);
    dispatch_release(serial);
    close(fds[0]);
    close(fds[1]);
    regfree(&shape);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) return child_main();
    // This process's own stderr is captured below: no debug lines of its own.
    unsetenv("GRANDCENTRAL_DEBUG");
    check_start("debug_log", 60);
    static char output[65536];

    check_section("GRANDCENTRAL_DEBUG=1: pool and timer lines, nothing else");
    run_child("1", output, sizeof output);
    printf("%s", output);
    expect_debug_lines(output);
    // The first async onto the default global queue finds no worker at all: a worker is
    // started for that root; the 20 ms dispatch_after arms the uptime clock's timerfd.
    CHECKF(strstr(output, "GrandCentral: debug: pool: worker started for root default: ") != NULL,
           "no line saying a worker was started for root default in:\n%s", output);
    CHECKF(strstr(output, "GrandCentral: debug: timer: uptime timerfd armed at +") != NULL,
           "no line saying the uptime timerfd was armed in:\n%s", output);

    check_section("GRANDCENTRAL_DEBUG unset: nothing on stderr");
    run_child(NULL, output, sizeof output);
    CHECKF(output[0] == '\0', "the child wrote to stderr:\n%s", output);

    check_section("GRANDCENTRAL_DEBUG=0: nothing on stderr");
    run_child("0", output, sizeof output);
    CHECKF(output[0] == '\0', "the child wrote to stderr:\n%s", output);

    check_descriptions();
    check_pass();
    return 0;
}

#endif
