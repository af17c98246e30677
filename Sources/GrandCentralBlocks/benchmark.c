// Block entry point of benchmark.h: the block runs before the call returns, so it is
// passed to dispatch_benchmark_f as it is.
#include "shim.h"

uint64_t dispatch_benchmark(size_t count, dispatch_block_t block)
{
	if (block == NULL) gc_client_bug("dispatch_benchmark", "block is NULL");
	return dispatch_benchmark_f(count, (void *)block, gc_block_invoke);
}
