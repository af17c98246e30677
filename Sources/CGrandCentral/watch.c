// Process and vnode sources' OS calls: pidfd_open, inotify, fstat (see CGrandCentralWatch.h).
#define _GNU_SOURCE 1
#include "CGrandCentralWatch.h"

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(GC_WATCH_MODIFY == IN_MODIFY, "GC_WATCH_MODIFY");
_Static_assert(GC_WATCH_ATTRIB == IN_ATTRIB, "GC_WATCH_ATTRIB");
_Static_assert(GC_WATCH_MOVED_FROM == IN_MOVED_FROM, "GC_WATCH_MOVED_FROM");
_Static_assert(GC_WATCH_MOVED_TO == IN_MOVED_TO, "GC_WATCH_MOVED_TO");
_Static_assert(GC_WATCH_CREATE == IN_CREATE, "GC_WATCH_CREATE");
_Static_assert(GC_WATCH_DELETE == IN_DELETE, "GC_WATCH_DELETE");
_Static_assert(GC_WATCH_DELETE_SELF == IN_DELETE_SELF, "GC_WATCH_DELETE_SELF");
_Static_assert(GC_WATCH_MOVE_SELF == IN_MOVE_SELF, "GC_WATCH_MOVE_SELF");
_Static_assert(GC_WATCH_UNMOUNT == IN_UNMOUNT, "GC_WATCH_UNMOUNT");
_Static_assert(GC_WATCH_OVERFLOW == IN_Q_OVERFLOW, "GC_WATCH_OVERFLOW");
_Static_assert(GC_WATCH_IGNORED == IN_IGNORED, "GC_WATCH_IGNORED");
_Static_assert(GC_WATCH_MASK_ADD == IN_MASK_ADD, "GC_WATCH_MASK_ADD");

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434   // the same number on every architecture
#endif

int gc_pidfd_open(int32_t pid) {
    long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0u);
    return fd < 0 ? -errno : (int)fd;
}

int gc_watch_create(void) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int gc_watch_add_descriptor(int watch, int fd, uint32_t events) {
    if (fd < 0) return -EBADF;
    char path[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(watch, path, events);
    return wd < 0 ? -errno : wd;
}

int gc_watch_remove(int watch, int32_t wd) {
    return inotify_rm_watch(watch, wd) < 0 ? -errno : 0;
}

int gc_watch_read(int watch, gc_watch_event_t *events, int capacity) {
    // 4096 bytes: room for a named event (sizeof + NAME_MAX + 1), and at most 256
    // unnamed ones (16 bytes each).
    _Static_assert(4096 / sizeof(struct inotify_event) == GC_WATCH_READ_CAPACITY, "capacity");
    alignas(struct inotify_event) char buffer[4096];
    if (capacity < GC_WATCH_READ_CAPACITY) return -EINVAL;
    ssize_t n;
    do {
        n = read(watch, buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    int count = 0;
    for (ssize_t offset = 0; offset + (ssize_t)sizeof(struct inotify_event) <= n && count < capacity;) {
        const struct inotify_event *event = (const struct inotify_event *)(buffer + offset);
        events[count].watch = event->wd;
        events[count].events = event->mask;
        events[count].is_child = event->len > 0;
        count++;
        offset += (ssize_t)sizeof(struct inotify_event) + event->len;
    }
    return count;
}

int gc_file_status(int fd, gc_file_status_t *status) {
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    status->size = (int64_t)st.st_size;
    status->links = (uint64_t)st.st_nlink;
    status->mode = (uint32_t)st.st_mode;
    status->uid = (uint32_t)st.st_uid;
    status->gid = (uint32_t)st.st_gid;
    status->atime_ns = (int64_t)st.st_atim.tv_sec * 1000000000ll + st.st_atim.tv_nsec;
    status->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    return 0;
}
