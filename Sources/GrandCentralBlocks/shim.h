// GrandCentralBlocks: the block entry points of the C ABI, compiled by clang -fblocks.
//
// Every block call is a thin wrapper over its `_f` twin, which the Swift side exports
// (Sources/GrandCentralExports): the block is the context, and a trampoline calls it.
// A block that may outlive the call is copied (Block_copy) on the way in and released by
// the trampoline after it has run; a block that runs before the call returns
// (dispatch_sync, dispatch_apply, dispatch_once, ...) is passed as it is.
//
// The one twist is work-item blocks (work_item.c): a block made by dispatch_block_create
// with DISPATCH_BLOCK_BARRIER is submitted as a barrier, so every submitting wrapper asks
// gc_block_is_barrier() first and passes the answer on: to the barrier twin where the API
// has one (dispatch_barrier_async_f, ...), otherwise to the engine's internal entry point
// that takes flags (gc_*_flags_f below). The shim never schedules anything itself.
//
// This header is private to the shim. It is included before anything else in every
// shim file.
#ifndef GRANDCENTRAL_BLOCKS_SHIM_H
#define GRANDCENTRAL_BLOCKS_SHIM_H

// The public header's nonnull attributes are turned off inside the library (base.h):
// with them on, clang may delete the NULL checks below that report misuse.
#define __GRANDCENTRAL_BUILDING__ 1

#include <dispatch/dispatch.h>
#include <dispatch/private.h>
#include <Block.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

// The numbers shared with the engine: source kinds, handler kinds, data formats, submit flags.
#include "../CGrandCentral/include/CGrandCentralKinds.h"

#define GC_SHIM_HIDDEN __attribute__((__visibility__("hidden")))

// MARK: - From CGrandCentral
//
// Declared in CGrandCentral.h too, which is the engine's and not included here.

/// Writes "GrandCentral: BUG IN CLIENT: <function>: <what>" to stderr and aborts.
__attribute__((__noreturn__)) void gc_client_bug(const char *function, const char *what);
/// Writes a string to stderr as it is (no newline is added).
void gc_write_stderr(const char *line);

// MARK: - The Block ABI
//
// The layout every blocks compiler and runtime agree on (clang's "Block Implementation
// Specification"); only work_item.c builds blocks by hand, everything else just reads
// `invoke` to recognise them.

enum {
	GC_BLOCK_HAS_COPY_DISPOSE = 1 << 25,
	GC_BLOCK_HAS_SIGNATURE = 1 << 30,
};

struct gc_block_descriptor {
	unsigned long reserved;
	unsigned long size;                          // of the whole block, header included
	void (*copy)(void *destination, const void *source); // after a stack block is moved to the heap
	void (*dispose)(const void *block);          // before a heap block is freed
	const char *signature;                       // Objective-C type encoding of invoke
};

struct gc_block_header {
	void *isa;
	int flags;
	int reserved;
	void (*invoke)(void *block);                 // the block's code, called with the block
	const struct gc_block_descriptor *descriptor;
};

// MARK: - Work-item blocks (work_item.c)

/// The invoke function of every block dispatch_block_create returns: a block is a
/// work item if and only if its invoke is this function.
GC_SHIM_HIDDEN void gc_work_item_invoke(void *block);
/// The flags the work item was created with. `block` must be a work item.
GC_SHIM_HIDDEN dispatch_block_flags_t gc_work_item_flags(dispatch_block_t block);

/// True if `block` is a work item created with DISPATCH_BLOCK_BARRIER.
static inline bool gc_block_is_barrier(dispatch_block_t block)
{
	const struct gc_block_header *header = (const struct gc_block_header *)(const void *)block;
	return header->invoke == gc_work_item_invoke &&
			(gc_work_item_flags(block) & DISPATCH_BLOCK_BARRIER) != 0;
}

// MARK: - Trampolines

/// Runs the block passed as context. For calls that run it before they return.
static inline void gc_block_invoke(void *context)
{
	((dispatch_block_t)context)();
}

/// Runs the block passed as context, then releases it: the other half of gc_block_copy.
static inline void gc_block_invoke_and_release(void *context)
{
	dispatch_block_t block = (dispatch_block_t)context;
	block();
	Block_release(block);
}

/// Out of memory in the shim: not the client's fault, but nothing sensible is left to
/// do (the work item would otherwise be dropped, hard rule 6).
__attribute__((__noreturn__, __cold__))
static inline void gc_shim_out_of_memory(const char *function)
{
	char line[160];
	snprintf(line, sizeof line, "GrandCentral: %s: out of memory\n", function);
	gc_write_stderr(line);
	abort();
}

/// Copies a block the call keeps past its return, as the trampoline's context.
static inline void *gc_block_copy(dispatch_block_t block, const char *function)
{
	void *copy = (void *)Block_copy(block);
	if (__builtin_expect(copy == NULL, 0)) gc_shim_out_of_memory(function);
	return copy;
}

/// Misuse checks shared by the submitting calls.
static inline void gc_check_queue_and_block(const void *queue, const void *block,
		const char *function)
{
	if (__builtin_expect(queue == NULL, 0)) gc_client_bug(function, "queue is NULL");
	if (__builtin_expect(block == NULL, 0)) gc_client_bug(function, "block is NULL");
}

// MARK: - Internal entry points with flags (GrandCentralExports)
//
// The `_f` calls of the API that have no barrier twin, with a flags word. Defined in Swift
// (@_cdecl); not libdispatch's names, so cmake/exports.map keeps them local to the library.
// They check their arguments like the public call named in their messages.

// The bits of the flags word are GC_SUBMIT_* (CGrandCentralKinds.h).

/// Returns the flags a block is submitted with: GC_SUBMIT_BARRIER for a barrier work item.
static inline unsigned long gc_block_submit_flags(dispatch_block_t block)
{
	return gc_block_is_barrier(block) ? GC_SUBMIT_BARRIER : 0;
}

/// dispatch_after_f with flags.
void gc_after_flags_f(dispatch_time_t when, dispatch_queue_t queue, void *context,
		dispatch_function_t function, unsigned long flags);
/// dispatch_group_async_f with flags.
void gc_group_async_flags_f(dispatch_group_t group, dispatch_queue_t queue, void *context,
		dispatch_function_t function, unsigned long flags);
/// dispatch_group_notify_f with flags.
void gc_group_notify_flags_f(dispatch_group_t group, dispatch_queue_t queue, void *context,
		dispatch_function_t function, unsigned long flags);

/// Sets a source's `kind` handler to a block copy, run by `invoke`, released by `dispose`;
/// NULL clears it; `mandatory` makes it the mandatory cancel handler
/// (GrandCentralExports/Source.swift, which names the public setter in its messages).
void gc_source_set_block_handler(dispatch_source_t source, gc_source_handler_kind_t kind, bool mandatory,
		void *block, dispatch_function_t invoke, dispatch_function_t dispose);

#endif // GRANDCENTRAL_BLOCKS_SHIM_H
