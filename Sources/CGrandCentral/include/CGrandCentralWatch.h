// CGrandCentralWatch: the OS calls behind process and vnode sources — pidfd_open (which
// glibc may not wrap, so it goes through syscall(2)), inotify, and the few fields of
// fstat(2) a vnode source compares between events. Swift's Glibc module does not import
// <sys/inotify.h>, and `struct inotify_event` is variable-length, so the event loop
// (Runtime/EventLoopProcesses.swift, Runtime/EventLoopFiles.swift) makes these calls
// through the thin functions below and nowhere else.
//
// Every function returns 0 (or a descriptor / count) on success and a negative errno on
// failure; none of them aborts. No dispatch_* names live here.
#ifndef CGRANDCENTRAL_WATCH_H
#define CGRANDCENTRAL_WATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// inotify's event bits, with inotify's values (checked by static assertions in watch.c).
#define GC_WATCH_MODIFY       0x00000002u  // IN_MODIFY: the file's data was written
#define GC_WATCH_ATTRIB       0x00000004u  // IN_ATTRIB: metadata (mode, owner, times, links)
#define GC_WATCH_MOVED_FROM   0x00000040u  // IN_MOVED_FROM: an entry left a watched directory
#define GC_WATCH_MOVED_TO     0x00000080u  // IN_MOVED_TO: an entry arrived in it
#define GC_WATCH_CREATE       0x00000100u  // IN_CREATE: an entry was created in it
#define GC_WATCH_DELETE       0x00000200u  // IN_DELETE: an entry was removed from it
#define GC_WATCH_DELETE_SELF  0x00000400u  // IN_DELETE_SELF: the inode itself is gone
#define GC_WATCH_MOVE_SELF    0x00000800u  // IN_MOVE_SELF: the file was renamed
#define GC_WATCH_UNMOUNT      0x00002000u  // IN_UNMOUNT: its file system was unmounted
#define GC_WATCH_OVERFLOW     0x00004000u  // IN_Q_OVERFLOW: events were lost (wd is -1)
#define GC_WATCH_IGNORED      0x00008000u  // IN_IGNORED: the kernel removed the watch
#define GC_WATCH_MASK_ADD     0x20000000u  // IN_MASK_ADD: add to a watch's mask, not replace

/// One inotify event, unpacked (without its name).
typedef struct gc_watch_event_s {
    int32_t watch;       // the watch descriptor, -1 for GC_WATCH_OVERFLOW
    uint32_t events;     // GC_WATCH_* bits
    uint32_t is_child;   // nonzero when the event names an entry of a watched directory
} gc_watch_event_t;

/// What a vnode source compares between two events on a file.
typedef struct gc_file_status_s {
    int64_t size;
    uint64_t links;
    uint32_t mode;
    uint32_t uid;
    uint32_t gid;
    int64_t atime_ns;
    int64_t mtime_ns;
} gc_file_status_t;

/// pidfd_open(pid, 0): a close-on-exec descriptor that becomes readable when the process
/// exits (whether or not it is the caller's child; a zombie counts as exited). -ESRCH
/// when no such process exists.
int gc_pidfd_open(int32_t pid);

/// inotify_init1(IN_NONBLOCK | IN_CLOEXEC).
int gc_watch_create(void);
/// inotify_add_watch(watch, "/proc/self/fd/<fd>", events): watches the inode `fd` refers
/// to (the magic link is followed, so a file unlinked while open can be watched too).
/// Returns the watch descriptor, the same one for every descriptor of one inode.
int gc_watch_add_descriptor(int watch, int fd, uint32_t events);
/// inotify_rm_watch(watch, wd).
int gc_watch_remove(int watch, int32_t wd);
/// Reads the pending events into `events` (at most `capacity`, which must be at least
/// GC_WATCH_READ_CAPACITY: one read(2) can return that many). Returns the count, -EAGAIN
/// when none is pending.
int gc_watch_read(int watch, gc_watch_event_t *events, int capacity);
#define GC_WATCH_READ_CAPACITY 256

/// fstat(fd) into `status`.
int gc_file_status(int fd, gc_file_status_t *status);

#ifdef __cplusplus
}
#endif
#endif
