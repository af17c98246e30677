/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * dispatch.h: the one header to include. It declares libdispatch's C API, with
 * libdispatch's names, signatures and constant values, implemented by libgrandcentral.so
 * (`pkg-config --cflags --libs grandcentral`).
 *
 * Works with gcc and clang, as C99, C11 and C++11 or later. The calls that take blocks
 * are declared only when the compiler supports blocks (clang -fblocks, which defines
 * __BLOCKS__); each has a function-pointer twin ending in _f that is always available.
 */
#ifndef __DISPATCH_PUBLIC__
#define __DISPATCH_PUBLIC__

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

/* The libdispatch API revision these headers correspond to. */
#define DISPATCH_API_VERSION 20180109

/* Identifies GrandCentral's headers (libdispatch's do not define it). */
#define __GRANDCENTRAL__ 1

#ifndef __DISPATCH_INDIRECT__
#define __DISPATCH_INDIRECT__
#define __DISPATCH_INDIRECT_DEFINED_HERE__
#endif

#include <dispatch/base.h>
#include <dispatch/time.h>
#include <dispatch/object.h>
#include <dispatch/queue.h>
#include <dispatch/block.h>
#include <dispatch/group.h>
#include <dispatch/semaphore.h>
#include <dispatch/once.h>
#include <dispatch/source.h>
#include <dispatch/data.h>
#include <dispatch/io.h>
#include <dispatch/benchmark.h>

#ifdef __DISPATCH_INDIRECT_DEFINED_HERE__
#undef __DISPATCH_INDIRECT__
#undef __DISPATCH_INDIRECT_DEFINED_HERE__
#endif

#endif /* __DISPATCH_PUBLIC__ */
