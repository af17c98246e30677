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
// gc_block_is_barrier() first.
//
// This header is private to the shim. It is included before anything else in every
// shim file.
#ifndef GRANDCENTRAL_BLOCKS_SHIM_H
#define GRANDCENTRAL_BLOCKS_SHIM_H

// The public header's nonnull attributes are turned off inside the library (base.h):
// with them on, clang may delete the NULL checks below that report misuse.
#define __GRANDCENTRAL_BUILDING__ 1

#include <dispatch/dispatch.h>
#include <Block.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define GC_SHIM_HIDDEN __attribute__((__visibility__("hidden")))

// MARK: - From CGrandCentral
//
// Declared in CGrandCentral.h too. That header cannot be included here: it declares
// _dispatch_main_q as a weak `char[]` for the engine, which clashes with the public
// header's `struct dispatch_queue_s _dispatch_main_q`.

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

/// A barrier work item whose submission is deferred (dispatch_after,
/// dispatch_group_notify) travels as a hop: gc_barrier_hop_run, run later on a global
/// queue, submits `block` (a copy, which it consumes) to `queue` as a barrier. The hop
/// retains the queue until then. Defined in queue.c.
GC_SHIM_HIDDEN void *gc_barrier_hop_create(dispatch_queue_t queue, void *block,
		const char *function);
GC_SHIM_HIDDEN void gc_barrier_hop_run(void *hop);

/// Allocates `size` bytes or aborts (see gc_shim_out_of_memory).
static inline void *gc_shim_alloc(size_t size, const char *function)
{
	void *memory = malloc(size);
	if (__builtin_expect(memory == NULL, 0)) gc_shim_out_of_memory(function);
	return memory;
}

#endif // GRANDCENTRAL_BLOCKS_SHIM_H
