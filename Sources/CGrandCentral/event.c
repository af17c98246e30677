// The event thread's OS calls: epoll, timerfd, eventfd (see CGrandCentralEvent.h).
#include "CGrandCentralEvent.h"

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

_Static_assert(GC_POLL_IN == EPOLLIN, "GC_POLL_IN");
_Static_assert(GC_POLL_OUT == EPOLLOUT, "GC_POLL_OUT");
_Static_assert(GC_POLL_ERR == EPOLLERR, "GC_POLL_ERR");
_Static_assert(GC_POLL_HUP == EPOLLHUP, "GC_POLL_HUP");
_Static_assert(GC_POLL_RDHUP == EPOLLRDHUP, "GC_POLL_RDHUP");
_Static_assert(GC_POLL_ONESHOT == EPOLLONESHOT, "GC_POLL_ONESHOT");
_Static_assert(GC_POLL_ADD == EPOLL_CTL_ADD, "GC_POLL_ADD");
_Static_assert(GC_POLL_DEL == EPOLL_CTL_DEL, "GC_POLL_DEL");
_Static_assert(GC_POLL_MOD == EPOLL_CTL_MOD, "GC_POLL_MOD");

static clockid_t gc_clock_id(int clock) {
    switch (clock) {
    case GC_CLOCK_WALL: return CLOCK_REALTIME;
    case GC_CLOCK_BOOT: return CLOCK_BOOTTIME;
    default: return CLOCK_MONOTONIC;
    }
}

uint64_t gc_boottime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int gc_poll_create(void) {
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int gc_poll_control(int poll, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = { .events = events, .data.u64 = data };
    return epoll_ctl(poll, op, fd, &ev) < 0 ? -errno : 0;
}

int gc_poll_wait(int poll, gc_poll_event_t *events, int capacity, int timeout_ms) {
    struct epoll_event raw[256];
    if (capacity > 256) capacity = 256;
    if (capacity <= 0) return -EINVAL;
    int n = epoll_wait(poll, raw, capacity, timeout_ms);
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) {
        events[i].events = raw[i].events;
        events[i].data = raw[i].data.u64;
    }
    return n;
}

int gc_eventfd_create(void) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int gc_eventfd_signal(int fd) {
    uint64_t one = 1;
    for (;;) {
        ssize_t n = write(fd, &one, sizeof one);
        if (n == (ssize_t)sizeof one) return 0;
        if (n < 0 && errno == EINTR) continue;
        // EAGAIN: the counter is at its maximum, so the descriptor is readable anyway.
        return n < 0 ? -errno : -EIO;
    }
}

int gc_eventfd_drain(int fd) {
    uint64_t value;
    for (;;) {
        ssize_t n = read(fd, &value, sizeof value);
        if (n == (ssize_t)sizeof value) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -errno : -EIO;
    }
}

int gc_timerfd_create(int clock) {
    int fd = timerfd_create(gc_clock_id(clock), TFD_CLOEXEC | TFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int gc_timerfd_arm(int fd, uint64_t deadline_ns, bool cancel_on_set) {
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
    int flags = TFD_TIMER_ABSTIME;
    if (cancel_on_set && deadline_ns != 0) flags |= TFD_TIMER_CANCEL_ON_SET;
    return timerfd_settime(fd, flags, &spec, NULL) < 0 ? -errno : 0;
}

int gc_timerfd_drain(int fd) {
    uint64_t expirations;
    for (;;) {
        ssize_t n = read(fd, &expirations, sizeof expirations);
        if (n == (ssize_t)sizeof expirations) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -errno : -EIO;
    }
}

int gc_descriptor_close(int fd) {
    return close(fd) < 0 ? -errno : 0;
}
