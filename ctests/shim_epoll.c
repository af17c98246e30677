// LD_PRELOAD shim for the fault tests: with GC_SHIM_EPOLL_PIDFD_FAIL set (to an errno
// number, e.g. 28 for ENOSPC), every epoll_ctl(EPOLL_CTL_ADD) of a pidfd fails with that
// errno, as it would for a process over fs.epoll.max_user_watches. Other descriptors and
// operations pass through. Unset: no failures.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static int shim_is_pidfd(int fd) {
    char path[64], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = 0;
    return strcmp(target, "anon_inode:[pidfd]") == 0;
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
    static int (*real)(int, int, int, struct epoll_event *);
    if (!real) real = (int (*)(int, int, int, struct epoll_event *))dlsym(RTLD_NEXT, "epoll_ctl");
    const char *fail = getenv("GC_SHIM_EPOLL_PIDFD_FAIL");
    if (fail && op == EPOLL_CTL_ADD && shim_is_pidfd(fd)) {
        errno = atoi(fail);
        return -1;
    }
    return real(epfd, op, fd, event);
}
