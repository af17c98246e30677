// fault_child.h: what the fault tests (faults_*.c) share, after check.h.
//
// A fault changes the whole process (its descriptor table is full, pthread_create or malloc
// fails, its niceness), so each case runs in a child: this same program started again
// through /proc/self/exe with the case's name as argv[1], a fresh process in which the
// library is loaded (and its constructors run) as in any program. The parent collects the
// child's stdout and stderr and its exit status and checks them.
//
// Fault injection is by LD_PRELOAD shims (ctests/shim_*.c), built next to the tests by
// ctests/CMakeLists.txt and by ctests/run-reference.sh; both put their directory in the
// environment variable GC_SHIM_DIR. A case that needs a shim names it: `shim_pthread`
// is $GC_SHIM_DIR/shim_pthread.so.
#ifndef GC_CTESTS_FAULT_CHILD_H
#define GC_CTESTS_FAULT_CHILD_H

#include <sys/resource.h>

typedef struct {
    int status;          // waitpid's status
    char output[16384];  // stdout and stderr, interleaved, NUL-terminated (the start of it)
} child_result_t;

/// Runs this program again as `argv[1] = name`, with LD_PRELOAD set to the shim `shim`
/// (NULL: none) and each "NAME=value" of the NULL-terminated `environment` set.
static inline void run_child_case(const char *name, const char *shim, const char *const *environment,
                                  child_result_t *result) {
    char preload[4096] = "";
    if (shim) {
        const char *dir = getenv("GC_SHIM_DIR");
        CHECKF(dir != NULL, "GC_SHIM_DIR is not set (the test build sets it)");
        snprintf(preload, sizeof preload, "%s/%s.so", dir, shim);
        CHECKF(access(preload, R_OK) == 0, "no shim at %s", preload);
    }
    int fds[2];
    CHECKF(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    CHECKF(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        if (shim) setenv("LD_PRELOAD", preload, 1);
        for (const char *const *e = environment; e && *e; e++) putenv((char *)*e);
        execl("/proc/self/exe", check_test_name, name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    char discard[4096];
    for (;;) {
        bool full = used == sizeof result->output - 1;
        ssize_t n = full ? read(fds[0], discard, sizeof discard)
                         : read(fds[0], result->output + used, sizeof result->output - 1 - used);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (!full) used += (size_t)n;
    }
    result->output[used] = '\0';
    close(fds[0]);
    while (waitpid(child, &result->status, 0) < 0 && errno == EINTR) {}
}

/// Runs the case and fails unless it exited with status 0; prints its output indented.
static inline void expect_child_passes(const char *name, const char *shim, const char *const *environment,
                                       child_result_t *result) {
    run_child_case(name, shim, environment, result);
    const char *line = result->output;
    while (*line) {
        const char *end = strchr(line, '\n');
        int length = end ? (int)(end - line) : (int)strlen(line);
        printf("   | %.*s\n", length, line);
        line += length + (end ? 1 : 0);
    }
    CHECKF(WIFEXITED(result->status) && WEXITSTATUS(result->status) == 0,
           "case %s: the child %s %d", name, WIFEXITED(result->status) ? "exited with status" : "died by signal",
           WIFEXITED(result->status) ? WEXITSTATUS(result->status) : WTERMSIG(result->status));
}

/// The descriptors `exhaust_descriptors` opened, in order.
static int fault_filled[65536];
static int fault_filled_count;

/// Fills the descriptor table: lowers the soft RLIMIT_NOFILE to `limit` (fewer opens to do)
/// and opens /dev/null until open fails with EMFILE. Returns how many it opened.
static inline int exhaust_descriptors(rlim_t limit) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > limit) {
        rl.rlim_cur = limit;
        CHECKF(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    }
    for (;;) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            CHECKF(errno == EMFILE, "open: %s (expected EMFILE)", strerror(errno));
            break;
        }
        CHECK(fault_filled_count < (int)(sizeof fault_filled / sizeof fault_filled[0]));
        fault_filled[fault_filled_count++] = fd;
    }
    return fault_filled_count;
}

/// Closes the last `count` descriptors `exhaust_descriptors` opened.
static inline void release_descriptors(int count) {
    while (count-- > 0 && fault_filled_count > 0) close(fault_filled[--fault_filled_count]);
}

#endif
